-- The console: accounts (argon2id password hashes), sign-in sessions (the SHA-256 of each
-- cookie, never the cookie), and one-time setup links (their SHA-256).
CREATE TABLE accounts (
    name          TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL,
    created_us    INTEGER NOT NULL,
    created_by    TEXT NOT NULL,
    changed_us    INTEGER NOT NULL
) WITHOUT ROWID;

-- A session is the cookie (id_hash) and a second secret the page keeps in its own storage and
-- sends as a header (key_hash): a cookie alone, which a browser also sends to any other server
-- on the same host name, is not enough.
CREATE TABLE console_sessions (
    id_hash    TEXT PRIMARY KEY,
    key_hash   TEXT NOT NULL,
    account    TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX console_sessions_by_account ON console_sessions (account);

CREATE TABLE setup_links (
    token_hash TEXT PRIMARY KEY,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,
    used_us    INTEGER
) WITHOUT ROWID;

INSERT INTO revisions (what, n) VALUES ('accounts', 0);
