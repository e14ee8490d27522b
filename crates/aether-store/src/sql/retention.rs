//! Audit retention: the oldest rows go, a signed checkpoint keeps the rest verifiable.

use super::SqlStore;
use crate::chain::Checkpoint;
use crate::db::{DbResult, Optional, Row, Sql, SqlExt, args};
use crate::{Result, StoreError, Vault, now_us};

fn checkpoint(r: &Row) -> DbResult<Checkpoint> {
    Ok(Checkpoint {
        seq: r.get(0)?,
        hash: r.get(1)?,
        at_us: r.get(2)?,
        pruned: r.get(3)?,
        by: r.get(4)?,
        signature: r.get(5)?,
    })
}

/// The newest checkpoint: the chain's rows go on from it.
pub(super) fn latest_checkpoint(conn: &mut dyn Sql) -> DbResult<Option<Checkpoint>> {
    conn.query_row(
        "SELECT seq, hash, at_us, pruned, by, signature FROM audit_checkpoints
         ORDER BY seq DESC LIMIT 1",
        &[],
        checkpoint,
    )
    .optional()
}

impl SqlStore {
    /// Prunes the audit rows written before `before_us` (and the receipts of their calls),
    /// leaving a checkpoint signed with `vault`'s key in the same transaction; `None` when no
    /// row is that old. The newest row is never pruned, so the chain's head stays in the table.
    pub async fn prune_audit(
        &self,
        before_us: i64,
        by: String,
        vault: std::sync::Arc<Vault>,
    ) -> Result<Option<Checkpoint>> {
        self.write(move |conn| {
            let context = "prune the audit";
            let mut tx = conn.begin().map_err(StoreError::sql(context))?;
            let cut: Option<(i64, String)> = tx
                .query_row(
                    "SELECT seq, hash FROM audit
                     WHERE at_us < ? AND seq < (SELECT max(seq) FROM audit)
                     ORDER BY seq DESC LIMIT 1",
                    args![before_us],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            let Some((seq, hash)) = cut else {
                return Ok(None);
            };
            tx.execute(
                "DELETE FROM receipts WHERE call_id IN (SELECT call_id FROM audit WHERE seq <= ?)",
                args![seq],
            )
            .map_err(StoreError::sql(context))?;
            let pruned = tx
                .execute("DELETE FROM audit WHERE seq <= ?", args![seq])
                .map_err(StoreError::sql(context))?;
            let mut c = Checkpoint {
                seq,
                hash,
                at_us: now_us(),
                pruned: pruned as i64,
                by,
                signature: String::new(),
            };
            c.signature = vault.sign(&c.signed_text());
            tx.execute(
                "INSERT INTO audit_checkpoints (seq, hash, at_us, pruned, by, signature)
                 VALUES (?, ?, ?, ?, ?, ?)",
                args![c.seq, c.hash, c.at_us, c.pruned, c.by, c.signature],
            )
            .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(Some(c))
        })
        .await
    }
}
