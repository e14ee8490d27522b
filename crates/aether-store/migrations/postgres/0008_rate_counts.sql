-- Rate limit counts every process on the store shares (as SQLite's 0018_rate_counts.sql).
CREATE TABLE rate_counts (
    key          TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    writer       TEXT NOT NULL,
    calls        BIGINT NOT NULL,
    at_us        BIGINT NOT NULL,
    PRIMARY KEY (key, window_start, writer)
);
CREATE INDEX rate_counts_by_window ON rate_counts (window_start);
