//! Rate limit counts shared by every process on the store.

use std::collections::HashMap;

use super::SqlStore;
use crate::db::{DbResult, Sql, SqlExt, args};
use crate::{Result, SharedCounts, StoreError};

/// A writer's calls in flight are kept under this window start (no window is negative).
const IN_FLIGHT: i64 = -1;

impl SqlStore {
    /// Adds `writer`'s new counts (key, window start, calls) and sets its calls in flight per
    /// key, then reads every other writer's counts of `windows`, and their calls in flight as
    /// shared after `fresh_after_us`. One transaction; with `prune`, rows of windows over for
    /// a day (and calls in flight not shared for 10 minutes) are let go.
    pub async fn share_rate_counts(
        &self,
        writer: String,
        adds: Vec<(String, i64, u64)>,
        in_flight: Vec<(String, u64)>,
        windows: Vec<(String, i64)>,
        fresh_after_us: i64,
        prune: bool,
    ) -> Result<SharedCounts> {
        self.write(move |conn| {
            let context = "share rate limit counts";
            let now = crate::now_us();
            let mut tx = conn.begin_shared().map_err(StoreError::sql(context))?;
            for (key, start, calls) in &adds {
                tx.execute(
                    "INSERT INTO rate_counts (key, window_start, writer, calls, at_us)
                     VALUES (?, ?, ?, ?, ?)
                     ON CONFLICT (key, window_start, writer) DO UPDATE SET
                         calls = rate_counts.calls + excluded.calls, at_us = excluded.at_us",
                    args![key, *start, writer, *calls as i64, now],
                )
                .map_err(StoreError::sql(context))?;
            }
            for (key, calls) in &in_flight {
                tx.execute(
                    "INSERT INTO rate_counts (key, window_start, writer, calls, at_us)
                     VALUES (?, ?, ?, ?, ?)
                     ON CONFLICT (key, window_start, writer) DO UPDATE SET
                         calls = excluded.calls, at_us = excluded.at_us",
                    args![key, IN_FLIGHT, writer, *calls as i64, now],
                )
                .map_err(StoreError::sql(context))?;
            }
            let mut seen = SharedCounts {
                windows: others_in(&mut *tx, &writer, windows).map_err(StoreError::sql(context))?,
                ..Default::default()
            };
            let flights: Vec<(String, i64)> = tx
                .query_map(
                    "SELECT key, CAST(coalesce(sum(calls), 0) AS BIGINT) FROM rate_counts
                     WHERE window_start = ? AND writer <> ? AND at_us > ? GROUP BY key",
                    args![IN_FLIGHT, writer, fresh_after_us],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(StoreError::sql(context))?;
            seen.in_flight = flights
                .into_iter()
                .map(|(k, n)| (k, n.max(0) as u64))
                .collect::<HashMap<_, _>>();
            if prune {
                tx.execute(
                    "DELETE FROM rate_counts WHERE (window_start >= 0 AND window_start < ?)
                         OR (window_start = ? AND at_us < ?)",
                    args![now - 86_400_000_000, IN_FLIGHT, now - 600_000_000],
                )
                .map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(seen)
        })
        .await
    }
}

impl SqlStore {
    /// The other writers' counts of `windows` (key, window start), read only.
    pub async fn rate_counts(
        &self,
        writer: String,
        windows: Vec<(String, i64)>,
    ) -> Result<HashMap<(String, i64), u64>> {
        self.read(move |conn| {
            others_in(conn, &writer, windows).map_err(StoreError::sql("read rate limit counts"))
        })
        .await
    }
}

/// Every writer's but `writer`'s calls in each of `windows`.
fn others_in(
    conn: &mut dyn Sql,
    writer: &str,
    windows: Vec<(String, i64)>,
) -> DbResult<HashMap<(String, i64), u64>> {
    let mut seen = HashMap::new();
    for (key, start) in windows {
        let others: i64 = conn.query_row(
            "SELECT CAST(coalesce(sum(calls), 0) AS BIGINT) FROM rate_counts
             WHERE key = ? AND window_start = ? AND writer <> ?",
            args![key, start, writer],
            |r| r.get(0),
        )?;
        seen.insert((key, start), others.max(0) as u64);
    }
    Ok(seen)
}
