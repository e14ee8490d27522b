-- Receipts: one per admitted call, durable before the call runs.
CREATE TABLE receipts (
    call_id    TEXT PRIMARY KEY,
    at_us      INTEGER NOT NULL,
    session    TEXT NOT NULL,
    transport  TEXT NOT NULL,
    agent      TEXT NOT NULL,
    tool       TEXT NOT NULL,
    definition TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    decision   TEXT NOT NULL
) WITHOUT ROWID;

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
-- One secondary index: every index is one more page in every commit's WAL write, and every
-- call commits twice. By agent is what sessions read (their own events); search by other
-- columns scans, which is fine at this scale (indexes for 10M-row search come with the
-- PostgreSQL store and its retention jobs).
CREATE INDEX audit_by_agent ON audit (agent, seq);

-- The registry: which tool definitions are approved, bound by digest.
CREATE TABLE registry (
    name            TEXT PRIMARY KEY,
    state           TEXT NOT NULL CHECK (state IN ('approved', 'unapproved', 'withdrawn')),
    approved_digest TEXT,
    definition      TEXT NOT NULL,
    origin          TEXT NOT NULL,
    updated_at_us   INTEGER NOT NULL,
    updated_by      TEXT NOT NULL,
    why             TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE registry_history (
    id         INTEGER PRIMARY KEY,
    at_us      INTEGER NOT NULL,
    name       TEXT NOT NULL,
    from_state TEXT,
    to_state   TEXT NOT NULL,
    digest     TEXT,
    by         TEXT NOT NULL,
    why        TEXT NOT NULL
);
CREATE INDEX registry_history_by_name ON registry_history (name, id);

-- The emergency halt: one row.
CREATE TABLE halt (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    halted INTEGER NOT NULL,
    by     TEXT,
    why    TEXT,
    at_us  INTEGER
);
INSERT INTO halt (id, halted) VALUES (1, 0);
