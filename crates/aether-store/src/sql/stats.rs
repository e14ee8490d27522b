//! Calls per minute (`call_stats`) and per hour (`call_stats_hour`), counted from the audit
//! behind a mark (`calls_counted_through_seq`) off the calls' own commits, and the console's
//! overview read from them: calls over time by outcome, refusals by step and rule, latency
//! percentiles per tool. The overview's queries read a range of a table's primary key (time
//! first), the hours' table for windows of whole hours; the counting reads only the audit rows
//! after the mark.
//!
//! Counting moves the mark in the transaction that adds the counts, and only from where it
//! read it, so a row is counted once whatever crashes and however many processes count: a
//! crash before the commit leaves the mark where it was, and of two processes counting the
//! same rows, the second finds the mark moved and adds nothing.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Serialize;

use super::SqlStore;
use crate::db::{Arg, DbResult, Optional, Sql, SqlExt, args};
use crate::{Result, StoreError};

/// Upper bounds (µs) of the latency buckets `lat0`…`lat10`; `lat11` holds what is slower.
pub const LATENCY_BOUNDS_US: [i64; 11] = [
    1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 5_000_000,
];
const BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;
const MINUTE_US: i64 = 60_000_000;
const COLUMNS: &str = "minute_us, tool, outcome, step, rule, calls, duration_us, \
     lat0, lat1, lat2, lat3, lat4, lat5, lat6, lat7, lat8, lat9, lat10, lat11";
const ARITY: usize = 7 + BUCKETS;
/// Rows per statement: well under every database's limit on placeholders.
const ROWS_PER_STATEMENT: usize = 500;

/// One minute's calls of a tool that ended one way, and how long they took.
#[derive(Default)]
struct Counts {
    calls: i64,
    duration_us: i64,
    latency: [i64; BUCKETS],
}

/// (minute or hour, tool, outcome, refusing step, refusing rule): a row's key.
type Key<'a> = (i64, &'a str, &'a str, &'a str, &'a str);

/// What the counts take from one audit row.
struct Counted {
    at_us: i64,
    tool: String,
    outcome: String,
    step: String,
    rule: String,
    duration_us: i64,
}

fn bucket_of(duration_us: i64) -> usize {
    LATENCY_BOUNDS_US
        .iter()
        .position(|bound| duration_us <= *bound)
        .unwrap_or(BUCKETS - 1)
}

const HOUR_US: i64 = 60 * MINUTE_US;

/// A table of counts: how long a span of time one row counts, and the two halves of its upsert
/// (the rows' tuples go between), made once rather than on every count.
struct Table {
    bucket_us: i64,
    head: String,
    tail: String,
}

/// The two tables of counts: by minute, and the same by hour (read by long windows).
static TABLES: LazyLock<[Table; 2]> = LazyLock::new(|| {
    [
        ("call_stats", "minute_us", MINUTE_US),
        ("call_stats_hour", "hour_us", HOUR_US),
    ]
    .map(|(name, key, bucket_us)| {
        let adds = std::iter::once("calls".to_string())
            .chain(std::iter::once("duration_us".to_string()))
            .chain((0..BUCKETS).map(|i| format!("lat{i}")))
            .map(|c| format!("{c} = {name}.{c} + excluded.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        Table {
            bucket_us,
            head: format!(
                "INSERT INTO {name} ({}) VALUES ",
                COLUMNS.replacen("minute_us", key, 1)
            ),
            tail: format!(" ON CONFLICT ({key}, tool, outcome, step, rule) DO UPDATE SET {adds}"),
        }
    })
});

/// One row's placeholders.
static TUPLE: LazyLock<String> = LazyLock::new(|| format!("({})", vec!["?"; ARITY].join(", ")));

/// What `rows` add to a table of counts per `bucket_us`, one entry per row (in key order, so
/// that processes updating the same rows lock them in the same order).
fn tally(rows: &[Counted], bucket_us: i64) -> BTreeMap<Key<'_>, Counts> {
    let mut counts: BTreeMap<Key<'_>, Counts> = BTreeMap::new();
    for r in rows {
        let key = (
            r.at_us.div_euclid(bucket_us) * bucket_us,
            r.tool.as_str(),
            r.outcome.as_str(),
            r.step.as_str(),
            r.rule.as_str(),
        );
        let c = counts.entry(key).or_default();
        c.calls += 1;
        c.duration_us += r.duration_us.max(0);
        c.latency[bucket_of(r.duration_us)] += 1;
    }
    counts
}

/// Adds `rows` to `call_stats` and `call_stats_hour` in transaction `tx`.
fn add(tx: &mut dyn Sql, rows: &[Counted]) -> DbResult<()> {
    for table in TABLES.iter() {
        let counts: Vec<(Key<'_>, Counts)> = tally(rows, table.bucket_us).into_iter().collect();
        for chunk in counts.chunks(ROWS_PER_STATEMENT) {
            let mut bound = Vec::with_capacity(chunk.len() * ARITY);
            for ((start, tool, outcome, step, rule), c) in chunk {
                bound.extend([
                    Arg::Int(*start),
                    Arg::Text(tool),
                    Arg::Text(outcome),
                    Arg::Text(step),
                    Arg::Text(rule),
                    Arg::Int(c.calls),
                    Arg::Int(c.duration_us),
                ]);
                bound.extend(c.latency.iter().map(|n| Arg::Int(*n)));
            }
            let tuples = vec![TUPLE.as_str(); chunk.len()].join(", ");
            tx.execute(&format!("{}{tuples}{}", table.head, table.tail), &bound)?;
        }
    }
    Ok(())
}

/// The mark: every audit row numbered up to it is counted.
const COUNTED: &str = "calls_counted_through_seq";
/// Audit rows counted per transaction.
const COUNT_BATCH: i64 = 20_000;

fn counted_through(conn: &mut dyn Sql) -> DbResult<i64> {
    Ok(conn
        .query_row(
            "SELECT value FROM store_meta WHERE key = ?",
            args![COUNTED],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// The calls of one span of time, by outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpanCounts {
    pub start_us: i64,
    pub by_outcome: BTreeMap<String, i64>,
}

/// Refusals by the step (and rule) that refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefusalCount {
    pub step: String,
    pub rule: String,
    pub calls: i64,
}

/// A tool's calls and their latency: median and 95th percentile, as the upper bound of the
/// bucket they fall in (`None` past the last bound, 5 s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolLatency {
    pub tool: String,
    pub calls: i64,
    pub mean_us: i64,
    pub p50_us: Option<i64>,
    pub p95_us: Option<i64>,
}

/// What the overview shows of calls in `[since_us, until_us)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CallOverview {
    pub since_us: i64,
    pub until_us: i64,
    pub span_us: i64,
    pub spans: Vec<SpanCounts>,
    pub refusals: Vec<RefusalCount>,
    pub tools: Vec<ToolLatency>,
}

/// The upper bound of the bucket holding the `q`-quantile of `latency` (`None`: beyond the
/// last bound).
fn quantile(latency: &[i64; BUCKETS], q: f64) -> Option<i64> {
    let total: i64 = latency.iter().sum();
    if total == 0 {
        return Some(0);
    }
    let rank = (q * total as f64).ceil().max(1.0) as i64;
    let mut seen = 0;
    for (i, n) in latency.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return LATENCY_BOUNDS_US.get(i).copied();
        }
    }
    None
}

/// How long counts are kept: minutes three days (the windows read from minutes, up to 24
/// hours, reach back a little over one), hours 400 days (the longest window is 30 days).
pub const MINUTES_KEPT_US: i64 = 3 * 24 * HOUR_US;
pub const HOURS_KEPT_US: i64 = 400 * 24 * HOUR_US;

impl SqlStore {
    /// Counts the audit rows written since the last count (calls, not operator actions) into
    /// `call_stats` and `call_stats_hour`; returns how many rows it read. On PostgreSQL only
    /// rows up to the settled horizon: a lower number can commit after a higher one, and the
    /// mark must not pass it. Cheap when nothing is new: one read, no write.
    pub async fn count_calls(&self) -> Result<u64> {
        let (mark, newest, horizon) = self
            .read(|conn| {
                let context = "count calls";
                let mark = counted_through(conn).map_err(StoreError::sql(context))?;
                let newest: Option<i64> = conn
                    .query_row("SELECT max(seq) FROM audit", &[], |r| r.get(0))
                    .map_err(StoreError::sql(context))?;
                let horizon = match newest.is_some_and(|n| n > mark) {
                    true => super::settled_horizon(conn)?,
                    false => None,
                };
                Ok((mark, newest.unwrap_or(0), horizon))
            })
            .await?;
        if newest <= mark {
            return Ok(0);
        }
        let upto = horizon.unwrap_or(i64::MAX);
        let mut total = 0;
        loop {
            let read = self
                .write(move |conn| {
                    let context = "count calls";
                    let mut tx = conn.begin_shared().map_err(StoreError::sql(context))?;
                    let from = counted_through(&mut *tx).map_err(StoreError::sql(context))?;
                    let (mut last, mut scanned) = (from, 0i64);
                    let mut rows = Vec::new();
                    tx.each(
                        "SELECT seq, at_us, tool, outcome, coalesce(step, ''), coalesce(rule, ''),
                                duration_us, transport
                         FROM audit WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                        args![from, upto, COUNT_BATCH],
                        &mut |r| {
                            last = r.get(0)?;
                            scanned += 1;
                            // Operator actions are not calls.
                            if r.get::<String>(7)? != "operator" {
                                rows.push(Counted {
                                    at_us: r.get(1)?,
                                    tool: r.get(2)?,
                                    outcome: r.get(3)?,
                                    step: r.get(4)?,
                                    rule: r.get(5)?,
                                    duration_us: r.get(6)?,
                                });
                            }
                            Ok(())
                        },
                    )
                    .map_err(StoreError::sql(context))?;
                    if last == from {
                        return Ok(0);
                    }
                    // The mark moves only from where this count read it: another process that
                    // counted these rows first has moved it, and this count adds nothing.
                    let moved = tx
                        .execute(
                            "UPDATE store_meta SET value = ? WHERE key = ? AND value = ?",
                            args![last, COUNTED, from],
                        )
                        .map_err(StoreError::sql(context))?;
                    if moved != 1 {
                        return Ok(0);
                    }
                    add(&mut *tx, &rows).map_err(StoreError::sql(context))?;
                    tx.commit().map_err(StoreError::sql(context))?;
                    Ok(scanned)
                })
                .await?;
            total += read as u64;
            if read < COUNT_BATCH {
                return Ok(total);
            }
        }
    }

    /// Drops the counts no window reads any more (see [`MINUTES_KEPT_US`]); returns how many
    /// rows went.
    pub async fn prune_call_stats(&self, now_us: i64) -> Result<usize> {
        self.write(move |conn| {
            let context = "prune the call counts";
            let minutes = conn
                .execute(
                    "DELETE FROM call_stats WHERE minute_us < ?",
                    args![now_us - MINUTES_KEPT_US],
                )
                .map_err(StoreError::sql(context))?;
            let hours = conn
                .execute(
                    "DELETE FROM call_stats_hour WHERE hour_us < ?",
                    args![now_us - HOURS_KEPT_US],
                )
                .map_err(StoreError::sql(context))?;
            Ok((minutes + hours) as usize)
        })
        .await
    }

    /// Calls in `[since_us, until_us)` in spans of `span_us` (a whole number of minutes), by
    /// outcome; refusals by step and rule; latency per tool.
    pub async fn call_overview(
        &self,
        since_us: i64,
        until_us: i64,
        span_us: i64,
    ) -> Result<CallOverview> {
        let span_us = (span_us / MINUTE_US).max(1) * MINUTE_US;
        let since_us = since_us.div_euclid(MINUTE_US) * MINUTE_US;
        // Whole hours (the 7- and 30-day windows) are read from the hours' counts.
        let (table, key) = if [span_us, since_us, until_us]
            .iter()
            .all(|t| t % HOUR_US == 0)
        {
            ("call_stats_hour", "hour_us")
        } else {
            ("call_stats", "minute_us")
        };
        self.read(move |conn| {
            let context = "read the call overview";
            let series = conn
                .query_map(
                    &format!(
                        "SELECT ({key} - ?) / ?, outcome, CAST(SUM(calls) AS BIGINT) \
                         FROM {table} WHERE {key} >= ? AND {key} < ? \
                         GROUP BY 1, 2 ORDER BY 1, 2"
                    ),
                    args![since_us, span_us, since_us, until_us],
                    |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?, r.get::<i64>(2)?)),
                )
                .map_err(StoreError::sql(context))?;
            let mut spans: BTreeMap<i64, SpanCounts> = BTreeMap::new();
            for (index, outcome, calls) in series {
                let start_us = since_us + index * span_us;
                let span = spans.entry(index).or_insert_with(|| SpanCounts {
                    start_us,
                    by_outcome: BTreeMap::new(),
                });
                *span.by_outcome.entry(outcome).or_default() += calls;
            }
            let refusals = conn
                .query_map(
                    &format!(
                        "SELECT step, rule, CAST(SUM(calls) AS BIGINT) FROM {table} \
                         WHERE {key} >= ? AND {key} < ? AND outcome = 'refused' \
                         GROUP BY step, rule ORDER BY 3 DESC, 1, 2 LIMIT 50"
                    ),
                    args![since_us, until_us],
                    |r| {
                        Ok(RefusalCount {
                            step: r.get(0)?,
                            rule: r.get(1)?,
                            calls: r.get(2)?,
                        })
                    },
                )
                .map_err(StoreError::sql(context))?;
            let sums = (0..BUCKETS)
                .map(|i| format!("CAST(SUM(lat{i}) AS BIGINT)"))
                .collect::<Vec<_>>()
                .join(", ");
            // Latency of the calls that ran (a refusal's time is the pipeline's, not the tool's).
            let tools = conn
                .query_map(
                    &format!(
                        "SELECT tool, CAST(SUM(calls) AS BIGINT), CAST(SUM(duration_us) AS BIGINT), \
                         {sums} FROM {table} \
                         WHERE {key} >= ? AND {key} < ? AND outcome IN ('ok', 'tool_error') \
                         GROUP BY tool ORDER BY 2 DESC, 1 LIMIT 100"
                    ),
                    args![since_us, until_us],
                    |r| {
                        let mut latency = [0i64; BUCKETS];
                        for (i, n) in latency.iter_mut().enumerate() {
                            *n = r.get(3 + i)?;
                        }
                        let calls: i64 = r.get(1)?;
                        let duration: i64 = r.get(2)?;
                        Ok(ToolLatency {
                            tool: r.get(0)?,
                            calls,
                            mean_us: if calls > 0 { duration / calls } else { 0 },
                            p50_us: quantile(&latency, 0.5),
                            p95_us: quantile(&latency, 0.95),
                        })
                    },
                )
                .map_err(StoreError::sql(context))?;
            Ok(CallOverview {
                since_us,
                until_us,
                span_us,
                spans: spans.into_values().collect(),
                refusals,
                tools,
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_the_bounds_of_the_buckets_they_fall_in() {
        let mut latency = [0i64; BUCKETS];
        latency[bucket_of(800)] += 50; // ≤ 1 ms
        latency[bucket_of(30_000)] += 45; // ≤ 50 ms
        latency[bucket_of(9_000_000)] += 5; // beyond 5 s
        assert_eq!(quantile(&latency, 0.5), Some(1_000));
        assert_eq!(quantile(&latency, 0.95), Some(50_000));
        assert_eq!(quantile(&latency, 0.96), None);
        assert_eq!(bucket_of(1_000), 0);
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(5_000_001), BUCKETS - 1);
    }
}
