-- Aether's own authorization server ([auth] builtin): the clients registered with it (dynamic
-- client registration), the authorization codes it issued (by their SHA-256; each redeemed
-- once), the grants a person consented to, and each grant's refresh tokens (by their SHA-256;
-- each used once: a used one presented again revokes its grant).
CREATE TABLE oauth_clients (
    client_id     TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    created_us    INTEGER NOT NULL
);
CREATE TABLE oauth_codes (
    code_hash    TEXT PRIMARY KEY,
    client_id    TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    account      TEXT NOT NULL,
    scope        TEXT NOT NULL,
    resource     TEXT NOT NULL,
    challenge    TEXT NOT NULL,
    expires_us   INTEGER NOT NULL,
    -- The grant its redemption started (NULL until redeemed).
    grant_id     TEXT
);
CREATE TABLE oauth_grants (
    grant_id   TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL,
    account    TEXT NOT NULL,
    scope      TEXT NOT NULL,
    resource   TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,
    revoked_us INTEGER
);
CREATE TABLE oauth_refresh (
    token_hash TEXT PRIMARY KEY,
    grant_id   TEXT NOT NULL,
    expires_us INTEGER NOT NULL,
    used_us    INTEGER
);
CREATE INDEX oauth_refresh_by_grant ON oauth_refresh (grant_id);
