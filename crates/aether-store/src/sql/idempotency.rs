//! Idempotency keys.

use super::SqlStore;
use super::governance::immediate;
use crate::db::{Optional, SqlExt, args};
use crate::{IdempotencyClaim, Result, StoreError};

impl SqlStore {
    /// Claims `key` for a call, or says who has it: a new (or expired) key is recorded as
    /// running under `call_id`, in one transaction, so two calls with one key cannot both run.
    pub async fn claim_idempotency(
        &self,
        agent: String,
        tool: String,
        key: String,
        arguments_digest: String,
        call_id: String,
        not_before_us: i64,
    ) -> Result<IdempotencyClaim> {
        self.write(move |conn| {
            let context = "claim an idempotency key";
            let mut tx = immediate(conn, context)?;
            let found: Option<(String, String, String, Option<String>, i64)> = tx
                .query_row(
                    "SELECT arguments_digest, call_id, state, result, at_us FROM idempotency
                     WHERE agent = ? AND tool = ? AND key = ?",
                    args![agent, tool, key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            let claim = match found {
                Some((digest, first, state, result, at)) if at >= not_before_us => {
                    if digest != arguments_digest {
                        IdempotencyClaim::OtherArguments { call_id: first }
                    } else if state == "done" {
                        IdempotencyClaim::Done {
                            call_id: first,
                            result: result.unwrap_or_default(),
                        }
                    } else {
                        IdempotencyClaim::Running { call_id: first }
                    }
                }
                _ => {
                    tx.execute(
                        "INSERT INTO idempotency (agent, tool, key, arguments_digest, call_id, state, result, at_us)
                         VALUES (?, ?, ?, ?, ?, 'running', NULL, ?)
                         ON CONFLICT (agent, tool, key) DO UPDATE SET
                             arguments_digest = excluded.arguments_digest, call_id = excluded.call_id,
                             state = excluded.state, result = excluded.result, at_us = excluded.at_us",
                        args![agent, tool, key, arguments_digest, call_id, crate::now_us()],
                    )
                    .map_err(StoreError::sql(context))?;
                    IdempotencyClaim::Claimed
                }
            };
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(claim)
        })
        .await
    }

    /// Records the result of the call holding a key (`Some`), or lets the key go (`None`: the
    /// call did not run, so a retry may).
    pub async fn settle_idempotency(
        &self,
        agent: String,
        tool: String,
        key: String,
        call_id: String,
        result: Option<String>,
    ) -> Result<()> {
        self.write(move |conn| {
            let context = "settle an idempotency key";
            match result {
                Some(result) => conn.execute(
                    "UPDATE idempotency SET state = 'done', result = ? WHERE agent = ? AND tool = ? AND key = ? AND call_id = ?",
                    args![result, agent, tool, key, call_id],
                ),
                None => conn.execute(
                    "DELETE FROM idempotency WHERE agent = ? AND tool = ? AND key = ? AND call_id = ?",
                    args![agent, tool, key, call_id],
                ),
            }
            .map_err(StoreError::sql(context))?;
            Ok(())
        })
        .await
    }

    pub async fn prune_idempotency(&self, before_us: i64) -> Result<usize> {
        self.write(move |conn| {
            let n = conn
                .execute("DELETE FROM idempotency WHERE at_us < ?", args![before_us])
                .map_err(StoreError::sql("prune idempotency keys"))?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
        .await
    }
}
