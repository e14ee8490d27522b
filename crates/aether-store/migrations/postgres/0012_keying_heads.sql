-- The keying marker names every chain's newest row at keying (as SQLite's 0022_keying_heads.sql).
ALTER TABLE audit_keying ADD COLUMN heads TEXT;
