-- A run's lease (as SQLite's 0013_run_leases.sql).
ALTER TABLE runs ADD COLUMN alive_us BIGINT;
ALTER TABLE runs ADD COLUMN lease_ms BIGINT;
