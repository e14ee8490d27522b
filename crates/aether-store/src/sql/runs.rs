//! Agent runs and their transcripts.

use super::SqlStore;
use crate::db::{Optional, Row, SqlExt, args};
use crate::{Result, RunEvent, RunRecord, RunStart, StoreError, now_us};

const RUN_COLUMNS: &str = "id, parent, agent, model, task, status, started_us, ended_us, rounds, \
     prompt_tokens, completion_tokens, answer, error, stop_by, stop_why, alive_us, lease_ms";

/// The SQL condition of a run whose process is gone: still `running`, its lease lapsed.
const LAPSED: &str =
    "status = 'running' AND alive_us IS NOT NULL AND alive_us + lease_ms * 1000 < ?";

fn run_record(r: &Row) -> crate::db::DbResult<RunRecord> {
    let status: String = r.get(5)?;
    let alive_us: Option<i64> = r.get(15)?;
    let lease_ms: Option<i64> = r.get(16)?;
    let lapsed = matches!((alive_us, lease_ms), (Some(alive), Some(lease)) if alive + lease * 1000 < now_us());
    Ok(RunRecord {
        id: r.get(0)?,
        parent: r.get(1)?,
        agent: r.get(2)?,
        model: r.get(3)?,
        task: r.get(4)?,
        status: if status == "running" && lapsed {
            "interrupted".into()
        } else {
            status
        },
        started_us: r.get(6)?,
        ended_us: r.get(7)?,
        rounds: r.get(8)?,
        prompt_tokens: r.get(9)?,
        completion_tokens: r.get(10)?,
        answer: r.get(11)?,
        error: r.get(12)?,
        stop_by: r.get(13)?,
        stop_why: r.get(14)?,
        alive_us,
    })
}

impl SqlStore {
    pub async fn run_start(&self, run: RunStart) -> Result<()> {
        let now = now_us();
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO runs (id, parent, agent, model, task, status, started_us, alive_us, lease_ms)
                 VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                args![
                    run.id,
                    run.parent,
                    run.agent,
                    run.model,
                    run.task,
                    now,
                    now,
                    run.lease_ms.max(1)
                ],
            )
            .map_err(StoreError::sql("record a run"))?;
            Ok(())
        })
        .await
    }

    /// Appends one entry to a run's transcript; its sequence number.
    pub async fn run_event(&self, run_id: String, kind: String, body: String) -> Result<i64> {
        self.write(move |conn| {
            let context = "record a run's event";
            let mut tx = conn.begin().map_err(StoreError::sql(context))?;
            let seq: i64 = tx
                .query_row(
                    "SELECT coalesce(max(seq), 0) + 1 FROM run_events WHERE run_id = ?",
                    args![run_id],
                    |r| r.get(0),
                )
                .map_err(StoreError::sql(context))?;
            tx.execute(
                "INSERT INTO run_events (run_id, seq, at_us, kind, body) VALUES (?, ?, ?, ?, ?)",
                args![run_id, seq, now_us(), kind, body],
            )
            .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(seq)
        })
        .await
    }

    /// Records the rounds and tokens so far.
    pub async fn run_progress(
        &self,
        id: String,
        rounds: i64,
        prompt_tokens: i64,
        completion_tokens: i64,
    ) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                "UPDATE runs SET rounds = ?, prompt_tokens = ?, completion_tokens = ? WHERE id = ?",
                args![rounds, prompt_tokens, completion_tokens, id],
            )
            .map_err(StoreError::sql("record a run's progress"))?;
            Ok(())
        })
        .await
    }

    /// Renews a running run's lease; false if it is not running (it ended, or an operator
    /// ended it as interrupted).
    pub async fn run_alive(&self, id: String) -> Result<bool> {
        self.write(move |conn| {
            let n = conn
                .execute(
                    "UPDATE runs SET alive_us = ? WHERE id = ? AND status = 'running'",
                    args![now_us(), id],
                )
                .map_err(StoreError::sql("renew a run's lease"))?;
            Ok(n == 1)
        })
        .await
    }

    /// Ends a running run; false if it was not running.
    pub async fn run_finish(
        &self,
        id: String,
        status: String,
        answer: Option<String>,
        error: Option<String>,
    ) -> Result<bool> {
        self.write(move |conn| {
            let n = conn
                .execute(
                    "UPDATE runs SET status = ?, answer = ?, error = ?, ended_us = ?
                     WHERE id = ? AND status = 'running'",
                    args![status, answer, error, now_us(), id],
                )
                .map_err(StoreError::sql("end a run"))?;
            Ok(n == 1)
        })
        .await
    }

    /// Asks a running run to stop (it stops before its next model request or tool call);
    /// a run whose process is gone (interrupted) is ended there and then, as `interrupted`.
    /// False if no such run is running.
    pub async fn run_stop(&self, id: String, by: String, why: String) -> Result<bool> {
        self.write(move |conn| {
            let context = StoreError::sql("stop a run");
            let mut tx = conn.begin().map_err(context)?;
            let now = now_us();
            let ended = tx
                .execute(
                    &format!(
                        "UPDATE runs SET status = 'interrupted', ended_us = ?, stop_by = ?, stop_why = ?,
                         error = 'its process ended without recording how the run ended'
                         WHERE id = ? AND {LAPSED}"
                    ),
                    args![now, by, why, id, now],
                )
                .map_err(StoreError::sql("stop a run"))?;
            let asked = if ended == 1 {
                0
            } else {
                tx.execute(
                    "UPDATE runs SET stop_by = ?, stop_why = ?
                     WHERE id = ? AND status = 'running' AND stop_by IS NULL",
                    args![by, why, id],
                )
                .map_err(StoreError::sql("stop a run"))?
            };
            tx.commit().map_err(StoreError::sql("stop a run"))?;
            Ok(ended + asked == 1)
        })
        .await
    }

    pub async fn run(&self, id: String) -> Result<Option<RunRecord>> {
        self.read(move |conn| {
            conn.query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"),
                args![id],
                run_record,
            )
            .optional()
            .map_err(StoreError::sql("read a run"))
        })
        .await
    }

    /// The newest runs first.
    pub async fn runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        self.read(move |conn| {
            conn.query_map(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs ORDER BY started_us DESC, id DESC LIMIT ?"
                ),
                args![limit.clamp(1, 10_000) as i64],
                run_record,
            )
            .map_err(StoreError::sql("list runs"))
        })
        .await
    }

    pub async fn run_events(&self, id: String) -> Result<Vec<RunEvent>> {
        self.read(move |conn| {
            conn.query_map(
                "SELECT seq, at_us, kind, body FROM run_events WHERE run_id = ? ORDER BY seq",
                args![id],
                |r| {
                    Ok(RunEvent {
                        seq: r.get(0)?,
                        at_us: r.get(1)?,
                        kind: r.get(2)?,
                        body: r.get(3)?,
                    })
                },
            )
            .map_err(StoreError::sql("read a run's transcript"))
        })
        .await
    }
}
