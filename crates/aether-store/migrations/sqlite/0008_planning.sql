-- The working tools' records: plans and to-do lists as versioned JSON documents (a change
-- names the version it read, so two agents editing one plan cannot overwrite each other), and
-- the messages agents of a team leave for each other.
CREATE TABLE documents (
    kind       TEXT NOT NULL,
    scope      TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    body       TEXT NOT NULL,
    updated_us INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (kind, scope, name)
) WITHOUT ROWID;

CREATE TABLE messages (
    id         INTEGER PRIMARY KEY,
    team       TEXT NOT NULL,
    from_agent TEXT NOT NULL,
    to_agent   TEXT NOT NULL,
    at_us      INTEGER NOT NULL,
    body       TEXT NOT NULL,
    read_us    INTEGER
);
CREATE INDEX messages_inbox ON messages (team, to_agent, id);
