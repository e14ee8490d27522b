-- The call counts are no longer added in each call's own commit: they are counted from the
-- audit behind this mark (every row numbered up to it is counted), off the calls' path. The
-- rows already in the audit were counted in their commits (or by 0020's backfill).
INSERT INTO store_meta (key, value)
    SELECT 'calls_counted_through_seq', coalesce(max(seq), 0) FROM audit;
