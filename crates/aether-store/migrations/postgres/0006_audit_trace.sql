-- The W3C trace context of the request that made a call (as SQLite's 0016_audit_trace.sql).
ALTER TABLE audit ADD COLUMN trace TEXT;
