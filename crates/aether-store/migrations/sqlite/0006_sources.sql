-- Federation: what each upstream MCP server was last seen as, the vault's encrypted
-- credentials, the tables upstream tools returned, and the operator's saved reports.

-- One row per upstream, written by the serving process on every change of state, so the CLI
-- and the admin API (and other processes sharing the store) can tell how it is.
CREATE TABLE upstream_status (
    name        TEXT PRIMARY KEY,
    transport   TEXT NOT NULL,
    connected   INTEGER NOT NULL,
    last_error  TEXT,
    tool_count  INTEGER NOT NULL,
    -- sha256 over the digests of its tools' definitions, in name order
    fingerprint TEXT NOT NULL,
    -- its tools, resources and prompts as listed (JSON), for `aether sources show`
    listing     TEXT NOT NULL,
    updated_us  INTEGER NOT NULL
) WITHOUT ROWID;

-- Credentials for upstreams, encrypted (XChaCha20-Poly1305, the name as associated data) with
-- a key that lives in a file outside the store. The store never holds a plaintext.
CREATE TABLE vault (
    name       TEXT PRIMARY KEY,
    nonce      BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    updated_us INTEGER NOT NULL
) WITHOUT ROWID;

-- Tables (rows of records) returned by upstream tools, at most 5,000 rows each; the model saw
-- at most 50 of them.
CREATE TABLE datasets (
    call_id    TEXT PRIMARY KEY,
    at_us      INTEGER NOT NULL,
    agent      TEXT NOT NULL,
    tool       TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    columns    TEXT NOT NULL,
    rows       TEXT NOT NULL,
    row_count  INTEGER NOT NULL,
    -- rows the tool returned beyond the 5,000 kept
    dropped    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX datasets_at ON datasets (at_us);

-- A saved report: a stored call (tool, arguments, the agent it runs as) to run again.
CREATE TABLE reports (
    name      TEXT PRIMARY KEY,
    tool      TEXT NOT NULL,
    arguments TEXT NOT NULL,
    agent     TEXT NOT NULL,
    saved_by  TEXT NOT NULL,
    at_us     INTEGER NOT NULL,
    last_call TEXT
) WITHOUT ROWID;

-- `aether sources refresh` asks the serving processes to list their upstreams again.
INSERT INTO revisions (what, n) VALUES ('sources', 0);
