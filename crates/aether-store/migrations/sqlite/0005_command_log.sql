-- The command log: every command run_command and run_shell ran, written (durably) before it
-- starts and completed when it ends. A row with no end is a command Aether stopped without
-- seeing end (it was killed with Aether's process tree, or is still running).
CREATE TABLE command_log (
    id          INTEGER PRIMARY KEY,
    at_us       INTEGER NOT NULL,
    call_id     TEXT NOT NULL,
    session     TEXT NOT NULL,
    agent       TEXT NOT NULL,
    tool        TEXT NOT NULL,
    root        TEXT NOT NULL,
    cwd         TEXT NOT NULL,
    command     TEXT NOT NULL,
    sandbox     TEXT NOT NULL,
    ended_at_us INTEGER,
    exit_code   INTEGER,
    timed_out   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX command_log_agent ON command_log (agent, id);
CREATE INDEX command_log_call ON command_log (call_id);
