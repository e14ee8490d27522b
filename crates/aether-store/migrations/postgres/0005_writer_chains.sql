-- Writer chains (as SQLite's 0015_writer_chains.sql). Sequence numbers come from a sequence,
-- so replicas allocate them without waiting for each other (a rolled-back batch leaves a gap;
-- a chain's links have none).
ALTER TABLE audit ADD COLUMN chain TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN link BIGINT NOT NULL DEFAULT 0;
UPDATE audit SET link = seq;
CREATE UNIQUE INDEX audit_by_chain ON audit (chain, link);
ALTER TABLE audit_checkpoints ADD COLUMN chain TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_checkpoints ADD COLUMN link BIGINT NOT NULL DEFAULT 0;
UPDATE audit_checkpoints SET link = seq;
CREATE INDEX audit_checkpoints_by_chain ON audit_checkpoints (chain, link);
CREATE SEQUENCE audit_seq;
SELECT setval('audit_seq', GREATEST(
    (SELECT COALESCE(max(seq), 0) FROM audit),
    (SELECT COALESCE(max(seq), 0) FROM audit_checkpoints), 1),
    (SELECT count(*) > 0 FROM audit) OR (SELECT count(*) > 0 FROM audit_checkpoints));
