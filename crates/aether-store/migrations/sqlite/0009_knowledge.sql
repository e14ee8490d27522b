-- Knowledge: documents agents can search, each in a scope (`pack:NAME`, `team:NAME`,
-- `project:NAME`, `agent:NAME`), indexed by SQLite's FTS5 (external content, kept in step by
-- triggers).
CREATE TABLE knowledge (
    id         INTEGER PRIMARY KEY,
    scope      TEXT NOT NULL,
    source     TEXT NOT NULL,
    title      TEXT NOT NULL,
    body       TEXT NOT NULL,
    updated_us INTEGER NOT NULL,
    UNIQUE (scope, source)
);
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
    title, body, content = 'knowledge', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER knowledge_ai AFTER INSERT ON knowledge BEGIN
    INSERT INTO knowledge_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER knowledge_ad AFTER DELETE ON knowledge BEGIN
    INSERT INTO knowledge_fts (knowledge_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER knowledge_au AFTER UPDATE ON knowledge BEGIN
    INSERT INTO knowledge_fts (knowledge_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
    INSERT INTO knowledge_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
