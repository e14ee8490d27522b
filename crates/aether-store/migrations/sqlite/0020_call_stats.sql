-- The console's overview reads calls per minute from here, never by scanning the audit: each
-- audit row of a call adds to its minute's row (tool, outcome, refusing step and rule) in the
-- transaction that writes it, with its duration in one of twelve latency buckets (upper
-- bounds 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000 ms, then beyond). Rows already in the
-- audit are counted once, here. Operator actions (transport 'operator') are not calls.
CREATE TABLE call_stats (
    minute_us    INTEGER NOT NULL,
    tool         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    step         TEXT NOT NULL DEFAULT '',
    rule         TEXT NOT NULL DEFAULT '',
    calls        INTEGER NOT NULL,
    duration_us  INTEGER NOT NULL,
    lat0         INTEGER NOT NULL DEFAULT 0,
    lat1         INTEGER NOT NULL DEFAULT 0,
    lat2         INTEGER NOT NULL DEFAULT 0,
    lat3         INTEGER NOT NULL DEFAULT 0,
    lat4         INTEGER NOT NULL DEFAULT 0,
    lat5         INTEGER NOT NULL DEFAULT 0,
    lat6         INTEGER NOT NULL DEFAULT 0,
    lat7         INTEGER NOT NULL DEFAULT 0,
    lat8         INTEGER NOT NULL DEFAULT 0,
    lat9         INTEGER NOT NULL DEFAULT 0,
    lat10        INTEGER NOT NULL DEFAULT 0,
    lat11        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute_us, tool, outcome, step, rule)
);
INSERT INTO call_stats (minute_us, tool, outcome, step, rule, calls, duration_us, lat0, lat1, lat2, lat3, lat4, lat5, lat6, lat7, lat8, lat9, lat10, lat11)
SELECT (at_us / 60000000) * 60000000, tool, outcome, COALESCE(step, ''), COALESCE(rule, ''),
       COUNT(*), SUM(duration_us),
       SUM(CASE WHEN duration_us <= 1000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 1000 AND duration_us <= 2000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 2000 AND duration_us <= 5000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 5000 AND duration_us <= 10000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 10000 AND duration_us <= 25000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 25000 AND duration_us <= 50000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 50000 AND duration_us <= 100000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 100000 AND duration_us <= 250000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 250000 AND duration_us <= 500000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 500000 AND duration_us <= 1000000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 1000000 AND duration_us <= 5000000 THEN 1 ELSE 0 END),
       SUM(CASE WHEN duration_us > 5000000 THEN 1 ELSE 0 END)
FROM audit
WHERE transport <> 'operator'
GROUP BY (at_us / 60000000) * 60000000, tool, outcome, COALESCE(step, ''), COALESCE(rule, '');
