-- The W3C trace context (traceparent) of the request that made a call, when the client sent
-- one (MCP 2026-07-28 carries it in _meta). Part of the row's hash when present; rows without
-- it hash as before.
ALTER TABLE audit ADD COLUMN trace TEXT;
