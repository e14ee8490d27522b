-- The call counts are counted from the audit behind this mark (as SQLite's
-- 0023_calls_counted.sql).
INSERT INTO store_meta (key, value)
    SELECT 'calls_counted_through_seq', coalesce(max(seq), 0) FROM audit;
