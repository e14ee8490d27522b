-- The audit: every outcome of every call, each row chained to the one before by its hash.
CREATE TABLE audit (
    seq              INTEGER PRIMARY KEY,
    at_us            INTEGER NOT NULL,
    call_id          TEXT NOT NULL,
    session          TEXT NOT NULL,
    transport        TEXT NOT NULL,
    agent            TEXT NOT NULL,
    team             TEXT,
    project          TEXT,
    tool             TEXT NOT NULL,
    tier             TEXT NOT NULL,
    outcome          TEXT NOT NULL,
    step             TEXT,
    rule             TEXT,
    reason           TEXT,
    definition       TEXT,
    arguments_digest TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    result           TEXT NOT NULL,
    duration_us      INTEGER NOT NULL,
    prev_hash        TEXT NOT NULL,
    hash             TEXT NOT NULL
);
CREATE INDEX audit_by_agent ON audit (agent, seq);
CREATE INDEX audit_by_tool ON audit (tool, seq);
CREATE INDEX audit_by_call ON audit (call_id);
