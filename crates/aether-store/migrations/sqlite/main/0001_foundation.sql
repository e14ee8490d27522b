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
