-- Rate limit counts every process on the store shares: per key (an agent, a caller, a tool of
-- an agent) and window, each writer's calls; under window_start -1, its calls in flight.
CREATE TABLE rate_counts (
    key          TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    writer       TEXT NOT NULL,
    calls        INTEGER NOT NULL,
    at_us        INTEGER NOT NULL,
    PRIMARY KEY (key, window_start, writer)
);
CREATE INDEX rate_counts_by_window ON rate_counts (window_start);
