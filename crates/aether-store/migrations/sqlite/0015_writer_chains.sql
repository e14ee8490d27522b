-- Every writer appends to a chain of its own (see src/chain.rs): a row's chain is its
-- writer's id and its link its place there. Rows from before are the chain '' whose links
-- are their sequence numbers. Sequence numbers stay unique and rise along each chain.
ALTER TABLE audit ADD COLUMN chain TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN link INTEGER NOT NULL DEFAULT 0;
UPDATE audit SET link = seq;
CREATE UNIQUE INDEX audit_by_chain ON audit (chain, link);
-- Retention cuts each chain at its own row.
ALTER TABLE audit_checkpoints ADD COLUMN chain TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_checkpoints ADD COLUMN link INTEGER NOT NULL DEFAULT 0;
UPDATE audit_checkpoints SET link = seq;
CREATE INDEX audit_checkpoints_by_chain ON audit_checkpoints (chain, link);
