-- The journal: the state of a file before each change an agent (or an undo) made, so that the
-- change can be undone. One row per file a call touched; a move has its source in `path` and
-- its destination in `dest`.
CREATE TABLE journal (
    id          INTEGER PRIMARY KEY,
    at_us       INTEGER NOT NULL,
    call_id     TEXT NOT NULL,
    session     TEXT NOT NULL,
    agent       TEXT NOT NULL,
    tool        TEXT NOT NULL,
    op          TEXT NOT NULL CHECK (op IN ('write', 'delete', 'move', 'mkdir', 'rmdir')),
    root        TEXT NOT NULL,
    path        TEXT NOT NULL,
    dest        TEXT,
    -- Content hash (sha256 hex) of the file before and after; NULL: there was no file.
    before_hash TEXT,
    before_mode INTEGER,
    after_hash  TEXT,
    -- The entry this one undid, for an undo's own entries.
    undoes      INTEGER,
    -- The call that undid this entry.
    reverted_by TEXT
);
CREATE INDEX journal_by_call ON journal (call_id);
CREATE INDEX journal_by_file ON journal (root, path, id);
CREATE INDEX journal_by_session ON journal (session, id);

-- Pre- and post-images, stored once per content (content-addressed).
CREATE TABLE journal_blobs (
    hash  TEXT PRIMARY KEY,
    size  INTEGER NOT NULL,
    bytes BLOB NOT NULL
) WITHOUT ROWID;

-- Sealed roots: the files of a root pinned by hash when the operator sealed it.
CREATE TABLE seals (
    root      TEXT PRIMARY KEY,
    root_path TEXT NOT NULL,
    at_us     INTEGER NOT NULL,
    by        TEXT NOT NULL,
    why       TEXT NOT NULL,
    files     INTEGER NOT NULL,
    -- Bumped on every seal, so a running server sees a re-seal without re-reading the pins.
    generation INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE seal_pins (
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (root, path)
) WITHOUT ROWID;
