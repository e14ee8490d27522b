-- Retention: the oldest audit rows may be pruned. A checkpoint, signed with a key kept outside
-- the store, records the last pruned row's sequence number and hash, so the rows kept still
-- verify as the rest of one chain.
CREATE TABLE audit_checkpoints (
    seq       INTEGER PRIMARY KEY,
    hash      TEXT NOT NULL,
    at_us     INTEGER NOT NULL,
    pruned    INTEGER NOT NULL,
    by        TEXT NOT NULL,
    signature TEXT NOT NULL
);

-- Audit search at millions of rows: each filter has an index that also gives the order.
CREATE INDEX audit_by_tool ON audit (tool, seq);
CREATE INDEX audit_by_outcome ON audit (outcome, seq);
CREATE INDEX audit_by_call ON audit (call_id);
CREATE INDEX audit_by_time ON audit (at_us);

-- MCP sessions over HTTP, by id, with the client's initialize request (JSON): a request that
-- lands on another replica (or after a restart) resumes its session there.
CREATE TABLE mcp_sessions (
    id         TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    -- the agent of the session's first authenticated request: no other agent may use it
    agent      TEXT
) WITHOUT ROWID;
CREATE INDEX mcp_sessions_created ON mcp_sessions (created_us);
