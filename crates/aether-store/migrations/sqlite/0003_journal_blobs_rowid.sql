-- Pre-images move to a rowid table. Keyed by their (random) content hash, each new image was
-- inserted at a random place in the table's B-tree, so every commit rewrote pages all over it
-- (several WAL frames per edit, plus page splits). Appended by rowid, an image fills fresh
-- pages at the end, and only the small hash index takes a random insert.
CREATE TABLE journal_blobs_by_id (
    id    INTEGER PRIMARY KEY,
    hash  TEXT NOT NULL UNIQUE,
    size  INTEGER NOT NULL,
    bytes BLOB NOT NULL
);
INSERT INTO journal_blobs_by_id (hash, size, bytes) SELECT hash, size, bytes FROM journal_blobs;
DROP TABLE journal_blobs;
ALTER TABLE journal_blobs_by_id RENAME TO journal_blobs;
