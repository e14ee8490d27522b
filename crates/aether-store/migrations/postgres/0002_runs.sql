-- Agent runs (as SQLite's 0012_runs.sql).
CREATE TABLE runs (
    id                TEXT PRIMARY KEY,
    parent            TEXT,
    agent             TEXT NOT NULL,
    model             TEXT NOT NULL,
    task              TEXT NOT NULL,
    status            TEXT NOT NULL,
    started_us        BIGINT NOT NULL,
    ended_us          BIGINT,
    rounds            BIGINT NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    answer            TEXT,
    error             TEXT,
    stop_by           TEXT,
    stop_why          TEXT
);
CREATE INDEX runs_started ON runs (started_us);

CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq    BIGINT NOT NULL,
    at_us  BIGINT NOT NULL,
    kind   TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
