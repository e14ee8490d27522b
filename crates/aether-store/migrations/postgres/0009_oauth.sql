-- Aether's own authorization server (as SQLite's 0019_oauth.sql).
CREATE TABLE oauth_clients (
    client_id     TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    created_us    BIGINT NOT NULL
);
CREATE TABLE oauth_codes (
    code_hash    TEXT PRIMARY KEY,
    client_id    TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    account      TEXT NOT NULL,
    scope        TEXT NOT NULL,
    resource     TEXT NOT NULL,
    challenge    TEXT NOT NULL,
    expires_us   BIGINT NOT NULL,
    -- The grant its redemption started (NULL until redeemed).
    grant_id     TEXT
);
CREATE TABLE oauth_grants (
    grant_id   TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL,
    account    TEXT NOT NULL,
    scope      TEXT NOT NULL,
    resource   TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    expires_us BIGINT NOT NULL,
    revoked_us BIGINT
);
CREATE TABLE oauth_refresh (
    token_hash TEXT PRIMARY KEY,
    grant_id   TEXT NOT NULL,
    expires_us BIGINT NOT NULL,
    used_us    BIGINT
);
CREATE INDEX oauth_refresh_by_grant ON oauth_refresh (grant_id);
