-- A run's lease: the process running it renews `alive_us` every third of `lease_ms`; a run
-- still `running` whose lease has lapsed lost its process (killed, crashed) and is shown as
-- `interrupted`. Rows from before this migration have no lease and stay as they were.
ALTER TABLE runs ADD COLUMN alive_us INTEGER;
ALTER TABLE runs ADD COLUMN lease_ms INTEGER;
