-- Idempotency keys: a call that names a key runs once per agent, tool and key (within the
-- retention window); a repeat with the same arguments gets the first call's result.
CREATE TABLE idempotency (
    agent            TEXT NOT NULL,
    tool             TEXT NOT NULL,
    key              TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    -- 'running' until the call ends; then 'done' with its result (JSON)
    state            TEXT NOT NULL,
    result           TEXT,
    at_us            INTEGER NOT NULL,
    PRIMARY KEY (agent, tool, key)
) WITHOUT ROWID;
