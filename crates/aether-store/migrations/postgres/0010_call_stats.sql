-- Calls per minute for the console's overview (as SQLite's 0020_call_stats.sql).
CREATE TABLE call_stats (
    minute_us    BIGINT NOT NULL,
    tool         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    step         TEXT NOT NULL DEFAULT '',
    rule         TEXT NOT NULL DEFAULT '',
    calls        BIGINT NOT NULL,
    duration_us  BIGINT NOT NULL,
    lat0         BIGINT NOT NULL DEFAULT 0,
    lat1         BIGINT NOT NULL DEFAULT 0,
    lat2         BIGINT NOT NULL DEFAULT 0,
    lat3         BIGINT NOT NULL DEFAULT 0,
    lat4         BIGINT NOT NULL DEFAULT 0,
    lat5         BIGINT NOT NULL DEFAULT 0,
    lat6         BIGINT NOT NULL DEFAULT 0,
    lat7         BIGINT NOT NULL DEFAULT 0,
    lat8         BIGINT NOT NULL DEFAULT 0,
    lat9         BIGINT NOT NULL DEFAULT 0,
    lat10        BIGINT NOT NULL DEFAULT 0,
    lat11        BIGINT NOT NULL DEFAULT 0,
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
