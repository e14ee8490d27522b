-- The person an OAuth access token was issued to (as SQLite's 0017_audit_subject.sql).
ALTER TABLE audit ADD COLUMN subject TEXT;
