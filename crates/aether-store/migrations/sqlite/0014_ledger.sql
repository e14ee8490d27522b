-- The ledger (issue 25).
--
-- Which process admitted a call: a receipt names its writer, and a writer's row says whether
-- that process is alive (its heartbeat, its host and process, or a clean stop). A receipt
-- without an audit row whose writer is gone was interrupted by a crash; the next start
-- records it as `interrupted`.
ALTER TABLE receipts ADD COLUMN writer TEXT;
CREATE INDEX receipts_by_writer ON receipts (writer);
CREATE TABLE writers (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    -- The process's start time as the kernel counts it (`/proc/PID/stat`), so that a
    -- process id used again by another process is not taken for the writer.
    proc_start   INTEGER NOT NULL,
    started_us   INTEGER NOT NULL,
    heartbeat_us INTEGER NOT NULL,
    stopped_us   INTEGER,
    -- When a start recorded this gone writer's unfinished calls as interrupted.
    reaped_us    INTEGER
) WITHOUT ROWID;

-- A side-effect-free call's admission and outcome are one record: its audit row, with no
-- receipt before it.
ALTER TABLE audit ADD COLUMN single INTEGER NOT NULL DEFAULT 0;

-- The audit's keying: from the row after `keyed_after_seq` on, each row's hash is an
-- HMAC under a key outside the store. The row is signed under that key (`mac`), and so are
-- the markers `verify` reads from it.
CREATE TABLE audit_keying (
    id                         INTEGER PRIMARY KEY CHECK (id = 1),
    key_id                     TEXT NOT NULL,
    store_id                   TEXT NOT NULL,
    keyed_after_seq            INTEGER NOT NULL,
    keyed_after_hash           TEXT NOT NULL,
    receipts_checked_after_seq INTEGER NOT NULL,
    at_us                      INTEGER NOT NULL,
    mac                        TEXT NOT NULL
);
