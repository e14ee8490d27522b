//! Audit retention: the oldest rows go, a signed checkpoint per chain cut keeps the rest
//! verifiable.

use super::SqlStore;
use crate::chain::Checkpoint;
use crate::db::{DbResult, Optional, Row, Sql, SqlExt, args};
use crate::{Result, StoreError, Vault, now_us};

const COLUMNS: &str = "chain, link, seq, hash, at_us, pruned, by, signature";

fn checkpoint(r: &Row) -> DbResult<Checkpoint> {
    Ok(Checkpoint {
        chain: r.get(0)?,
        link: r.get(1)?,
        seq: r.get(2)?,
        hash: r.get(3)?,
        at_us: r.get(4)?,
        pruned: r.get(5)?,
        by: r.get(6)?,
        signature: r.get(7)?,
    })
}

/// The newest checkpoint of any chain.
pub(super) fn latest_checkpoint(conn: &mut dyn Sql) -> DbResult<Option<Checkpoint>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM audit_checkpoints ORDER BY seq DESC LIMIT 1"),
        &[],
        checkpoint,
    )
    .optional()
}

/// The newest checkpoint of chain `chain`: its rows go on from it.
pub(super) fn latest_checkpoint_of(
    conn: &mut dyn Sql,
    chain: &str,
) -> DbResult<Option<Checkpoint>> {
    conn.query_row(
        &format!(
            "SELECT {COLUMNS} FROM audit_checkpoints WHERE chain = ? ORDER BY link DESC LIMIT 1"
        ),
        args![chain],
        checkpoint,
    )
    .optional()
}

/// Each chain's newest checkpoint.
pub(super) fn latest_checkpoints(conn: &mut dyn Sql) -> DbResult<Vec<Checkpoint>> {
    let mut newest: std::collections::BTreeMap<String, Checkpoint> = Default::default();
    conn.each(
        &format!("SELECT {COLUMNS} FROM audit_checkpoints ORDER BY chain, link"),
        &[],
        &mut |r| {
            let c = checkpoint(r)?;
            newest.insert(c.chain.clone(), c);
            Ok(())
        },
    )?;
    Ok(newest.into_values().collect())
}

impl SqlStore {
    /// Prunes the audit rows written before `before_us` (and the receipts of their calls),
    /// cutting each chain at its newest such row and leaving a checkpoint of the cut signed
    /// with `vault`'s key, all in one transaction; empty when no row is that old. The
    /// audit's newest row is never pruned, so the table keeps the highest sequence number.
    pub async fn prune_audit(
        &self,
        before_us: i64,
        by: String,
        vault: std::sync::Arc<Vault>,
    ) -> Result<Vec<Checkpoint>> {
        // Rows not yet counted for the overview are counted before they go.
        self.count_calls().await?;
        self.write(move |conn| {
            let context = "prune the audit";
            let sql = StoreError::sql(context);
            let mut tx = conn.begin().map_err(sql)?;
            let cuts: Vec<(String, i64)> = tx
                .query_map(
                    "SELECT chain, max(link) FROM audit
                     WHERE at_us < ? AND seq < (SELECT max(seq) FROM audit)
                     GROUP BY chain ORDER BY chain",
                    args![before_us],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(StoreError::sql(context))?;
            let mut made = Vec::with_capacity(cuts.len());
            for (chain, link) in cuts {
                let (seq, hash): (i64, String) = tx
                    .query_row(
                        "SELECT seq, hash FROM audit WHERE chain = ? AND link = ?",
                        args![chain, link],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map_err(StoreError::sql(context))?;
                tx.execute(
                    "DELETE FROM receipts WHERE call_id IN
                       (SELECT call_id FROM audit WHERE chain = ? AND link <= ?)",
                    args![chain, link],
                )
                .map_err(StoreError::sql(context))?;
                let pruned = tx
                    .execute(
                        "DELETE FROM audit WHERE chain = ? AND link <= ?",
                        args![chain, link],
                    )
                    .map_err(StoreError::sql(context))?;
                let mut c = Checkpoint {
                    chain,
                    link,
                    seq,
                    hash,
                    at_us: now_us(),
                    pruned: pruned as i64,
                    by: by.clone(),
                    signature: String::new(),
                };
                c.signature = vault.sign(&c.signed_text());
                tx.execute(
                    &format!(
                        "INSERT INTO audit_checkpoints ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    ),
                    args![
                        c.chain,
                        c.link,
                        c.seq,
                        c.hash,
                        c.at_us,
                        c.pruned,
                        c.by,
                        c.signature
                    ],
                )
                .map_err(StoreError::sql(context))?;
                made.push(c);
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(made)
        })
        .await
    }
}
