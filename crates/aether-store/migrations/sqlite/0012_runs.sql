-- Agent runs: a model loop under one agent's identity (`aether agent run`), with the rounds,
-- the tokens the model server counted, how it ended, and a request to stop it from elsewhere.
CREATE TABLE runs (
    id                TEXT PRIMARY KEY,
    parent            TEXT,
    agent             TEXT NOT NULL,
    model             TEXT NOT NULL,
    task              TEXT NOT NULL,
    status            TEXT NOT NULL,
    started_us        INTEGER NOT NULL,
    ended_us          INTEGER,
    rounds            INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    answer            TEXT,
    error             TEXT,
    stop_by           TEXT,
    stop_why          TEXT
) WITHOUT ROWID;
CREATE INDEX runs_started ON runs (started_us);

-- A run's transcript: each request to the model, its reply, each tool call and its result.
CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    at_us  INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
