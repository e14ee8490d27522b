-- Governance: what the registry last saw of each tool and what its approval bound, calls
-- waiting for a person, bearer tokens, and one counter per kind of change so that every
-- process sharing the store notices a change with one small read.

-- `definition` is now the definition last seen (built-ins at start, upstream tools as
-- listed); `seen_digest` its digest. `approved_definition` is what the approval bound, kept
-- for the diff an operator reads before approving a changed tool again.
ALTER TABLE registry ADD COLUMN seen_digest TEXT;
ALTER TABLE registry ADD COLUMN approved_definition TEXT;
UPDATE registry SET seen_digest = approved_digest, approved_definition = definition
    WHERE state = 'approved';

-- Each history row is the registry row's state after the change, so `undo` restores the one
-- before it. `undoes` names the change an undo reverted.
ALTER TABLE registry_history ADD COLUMN approved_definition TEXT;
ALTER TABLE registry_history ADD COLUMN undoes INTEGER;

-- A call waiting for a person. `id` is the call id. The state moves once, from `pending` to
-- one of the others, by a conditional update, so an approval and the timeout cannot both win.
CREATE TABLE approvals (
    id               TEXT PRIMARY KEY,
    requested_at_us  INTEGER NOT NULL,
    expires_at_us    INTEGER NOT NULL,
    session          TEXT NOT NULL,
    transport        TEXT NOT NULL,
    agent            TEXT NOT NULL,
    team             TEXT,
    project          TEXT,
    tool             TEXT NOT NULL,
    tier             TEXT NOT NULL,
    definition       TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    -- What asked for a person: `tier:restricted` or `rule:NAME`.
    asked_by         TEXT NOT NULL,
    reason           TEXT,
    state            TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    decided_at_us    INTEGER,
    decided_by       TEXT,
    why              TEXT
) WITHOUT ROWID;
CREATE INDEX approvals_by_state ON approvals (state, requested_at_us);

-- Bearer tokens, stored as the SHA-256 of the token (a token is 256 random bits, so a fast
-- hash is enough: there is nothing to guess). `kind` agent: an MCP caller acting as `subject`;
-- operator: the admin API, as the person `subject`.
CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('agent', 'operator')),
    subject       TEXT NOT NULL,
    hash          TEXT NOT NULL UNIQUE,
    label         TEXT NOT NULL,
    created_at_us INTEGER NOT NULL,
    created_by    TEXT NOT NULL,
    revoked_at_us INTEGER,
    revoked_by    TEXT
) WITHOUT ROWID;

CREATE TABLE revisions (
    what TEXT PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO revisions (what, n) VALUES ('registry', 0), ('approvals', 0), ('tokens', 0), ('halt', 0);

-- Facts about the store itself. Rows of calls that ended before their receipt say so from this
-- migration on; `aether audit verify` expects a receipt for every other call's row written after
-- `receipts_checked_after_seq` (older rows could lack one without anyone tampering).
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO store_meta (key, value)
    SELECT 'receipts_checked_after_seq', coalesce(max(seq), 0) FROM audit;
