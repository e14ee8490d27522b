-- Calls per hour for the overview's long windows (as SQLite's 0021_call_stats_hour.sql).
CREATE TABLE call_stats_hour (
    hour_us      BIGINT NOT NULL,
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
    PRIMARY KEY (hour_us, tool, outcome, step, rule)
);
INSERT INTO call_stats_hour (hour_us, tool, outcome, step, rule, calls, duration_us, lat0, lat1, lat2, lat3, lat4, lat5, lat6, lat7, lat8, lat9, lat10, lat11)
SELECT (minute_us / 3600000000) * 3600000000, tool, outcome, step, rule, SUM(calls), SUM(duration_us),
       SUM(lat0), SUM(lat1), SUM(lat2), SUM(lat3), SUM(lat4), SUM(lat5), SUM(lat6), SUM(lat7), SUM(lat8), SUM(lat9), SUM(lat10), SUM(lat11)
FROM call_stats
GROUP BY (minute_us / 3600000000) * 3600000000, tool, outcome, step, rule;
