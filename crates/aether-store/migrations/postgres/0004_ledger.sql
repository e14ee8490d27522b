-- The ledger (as SQLite's 0014_ledger.sql).
ALTER TABLE receipts ADD COLUMN writer TEXT;
CREATE INDEX receipts_by_writer ON receipts (writer);
CREATE TABLE writers (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    proc_start   BIGINT NOT NULL,
    started_us   BIGINT NOT NULL,
    heartbeat_us BIGINT NOT NULL,
    stopped_us   BIGINT,
    -- When a start recorded this gone writer's unfinished calls as interrupted.
    reaped_us    BIGINT
);
ALTER TABLE audit ADD COLUMN single BIGINT NOT NULL DEFAULT 0;
CREATE TABLE audit_keying (
    id                         INTEGER PRIMARY KEY CHECK (id = 1),
    key_id                     TEXT NOT NULL,
    store_id                   TEXT NOT NULL,
    keyed_after_seq            BIGINT NOT NULL,
    keyed_after_hash           TEXT NOT NULL,
    receipts_checked_after_seq BIGINT NOT NULL,
    at_us                      BIGINT NOT NULL,
    mac                        TEXT NOT NULL
);
