//! The journal and the seals.

use super::SqlStore;
use crate::db::{DbError, DbResult, Optional, Row, Sql, SqlExt, Value, args, bind};
use crate::{
    JournalEntry, JournalOp, JournalQuery, JournalWrite, Result, SealPin, SealRecord, StoreError,
};

const ENTRY_COLUMNS: &str = "id, at_us, call_id, session, agent, tool, op, root, path, dest, \
     before_hash, before_mode, after_hash, undoes, reverted_by";

/// Writes one journal write inside the batch's transaction; returns the new entries' ids.
pub(super) fn write(tx: &mut dyn Sql, w: &JournalWrite) -> DbResult<Vec<i64>> {
    for (hash, bytes) in &w.blobs {
        tx.execute(
            "INSERT INTO journal_blobs (hash, size, bytes) VALUES (?, ?, ?) ON CONFLICT (hash) DO NOTHING",
            args![hash, bytes.len() as i64, bytes],
        )?;
    }
    let mut ids = Vec::with_capacity(w.entries.len());
    for e in &w.entries {
        let id: i64 = tx.query_row(
            "INSERT INTO journal (at_us, call_id, session, agent, tool, op, root, path, dest,
                 before_hash, before_mode, after_hash, undoes, reverted_by)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
             RETURNING id",
            args![
                e.at_us,
                e.call_id,
                e.session,
                e.agent,
                e.tool,
                e.op.as_str(),
                e.root,
                e.path,
                e.dest,
                e.before_hash,
                e.before_mode,
                e.after_hash,
                e.undoes,
            ],
            |r| r.get(0),
        )?;
        ids.push(id);
    }
    if !w.reverts.is_empty() {
        let by = w.entries.first().map(|e| e.call_id.as_str()).unwrap_or("");
        for id in &w.reverts {
            let marked = tx.execute(
                "UPDATE journal SET reverted_by = ? WHERE id = ? AND reverted_by IS NULL",
                args![by, id],
            )?;
            if marked != 1 {
                // Undone by someone else meanwhile: the whole write must fail, or one change
                // would be undone twice.
                return Err(DbError::Refused(format!(
                    "journal entry {id} was already undone"
                )));
            }
        }
    }
    Ok(ids)
}

/// The entries call `call_id` journalled, oldest first.
pub(super) fn of_call(conn: &mut dyn Sql, call_id: &str) -> DbResult<Vec<JournalEntry>> {
    conn.query_map(
        &format!("SELECT {ENTRY_COLUMNS} FROM journal WHERE call_id = ? ORDER BY id"),
        args![call_id],
        entry,
    )
}

/// The entries of calls writer `writer` admitted, journalled at or after `since_us`, oldest
/// first.
pub(super) fn of_writer(
    conn: &mut dyn Sql,
    writer: &str,
    since_us: i64,
) -> DbResult<Vec<JournalEntry>> {
    conn.query_map(
        &format!(
            "SELECT {} FROM journal j JOIN receipts r ON r.call_id = j.call_id
             WHERE r.writer = ? AND j.at_us >= ? ORDER BY j.id",
            ENTRY_COLUMNS
                .split(", ")
                .map(|c| format!("j.{}", c.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        args![writer, since_us],
        entry,
    )
}

fn entry(r: &Row) -> DbResult<JournalEntry> {
    let op: String = r.get(6)?;
    Ok(JournalEntry {
        id: r.get(0)?,
        at_us: r.get(1)?,
        call_id: r.get(2)?,
        session: r.get(3)?,
        agent: r.get(4)?,
        tool: r.get(5)?,
        op: JournalOp::parse(&op)
            .ok_or_else(|| DbError::decode(6, format!("unknown journal op {op:?}")))?,
        root: r.get(7)?,
        path: r.get(8)?,
        dest: r.get(9)?,
        before_hash: r.get(10)?,
        before_mode: r.get(11)?,
        after_hash: r.get(12)?,
        undoes: r.get(13)?,
        reverted_by: r.get(14)?,
    })
}

impl SqlStore {
    pub async fn journal_entries(&self, q: JournalQuery) -> Result<Vec<JournalEntry>> {
        self.read(move |conn| {
            let mut sql = format!("SELECT {ENTRY_COLUMNS} FROM journal WHERE 1=1");
            let mut args: Vec<Value> = Vec::new();
            for (column, value) in [
                ("session", &q.session),
                ("call_id", &q.call_id),
                ("root", &q.root),
            ] {
                if let Some(v) = value {
                    sql.push_str(&format!(" AND {column} = ?"));
                    args.push(Value::from(v.clone()));
                }
            }
            if let Some(path) = &q.path {
                sql.push_str(" AND (path = ? OR dest = ?)");
                args.push(Value::from(path.clone()));
                args.push(Value::from(path.clone()));
            }
            if q.live_only {
                sql.push_str(" AND reverted_by IS NULL");
            }
            sql.push_str(&format!(
                " ORDER BY id DESC LIMIT {}",
                q.limit.clamp(1, 100_000)
            ));
            conn.query_map(&sql, &bind(&args), entry)
                .map_err(StoreError::sql("read journal"))
        })
        .await
    }

    pub async fn journal_blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let hash = hash.to_string();
        self.read(move |conn| {
            conn.query_row(
                "SELECT bytes FROM journal_blobs WHERE hash = ?",
                args![hash],
                |r| r.get(0),
            )
            .optional()
            .map_err(StoreError::sql("read journal image"))
        })
        .await
    }

    pub async fn prune_journal(&self, before_us: i64, keep: usize) -> Result<usize> {
        self.write(move |conn| {
            let mut tx = conn.begin().map_err(StoreError::sql("prune journal"))?;
            let mut gone = tx
                .execute("DELETE FROM journal WHERE at_us < ?", args![before_us])
                .map_err(StoreError::sql("prune journal"))?;
            gone += tx
                .execute(
                    "DELETE FROM journal WHERE id <= (SELECT id FROM journal ORDER BY id DESC LIMIT 1 OFFSET ?)",
                    args![keep as i64],
                )
                .map_err(StoreError::sql("prune journal"))?;
            if gone > 0 {
                tx.execute(
                    "DELETE FROM journal_blobs WHERE hash NOT IN
                       (SELECT before_hash FROM journal WHERE before_hash IS NOT NULL
                        UNION SELECT after_hash FROM journal WHERE after_hash IS NOT NULL)",
                    &[],
                )
                .map_err(StoreError::sql("prune journal"))?;
            }
            tx.commit().map_err(StoreError::sql("prune journal"))?;
            Ok(gone as usize)
        })
        .await
    }

    pub async fn seal(&self, seal: SealRecord, pins: Vec<SealPin>) -> Result<SealRecord> {
        self.write(move |conn| {
            let mut tx = conn.begin().map_err(StoreError::sql("seal"))?;
            let generation: i64 = tx
                .query_row(
                    "SELECT coalesce(max(generation), 0) + 1 FROM seals",
                    &[],
                    |r| r.get(0),
                )
                .map_err(StoreError::sql("seal"))?;
            tx.execute("DELETE FROM seal_pins WHERE root = ?", args![seal.root])
                .map_err(StoreError::sql("seal"))?;
            for p in &pins {
                tx.execute(
                    "INSERT INTO seal_pins (root, path, hash, size) VALUES (?, ?, ?, ?)",
                    args![seal.root, p.path, p.hash, p.size],
                )
                .map_err(StoreError::sql("seal"))?;
            }
            let record = SealRecord {
                files: pins.len() as i64,
                generation,
                ..seal
            };
            tx.execute(
                "INSERT INTO seals (root, root_path, at_us, by, why, files, generation)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (root) DO UPDATE SET root_path = ?2, at_us = ?3, by = ?4, why = ?5,
                   files = ?6, generation = ?7",
                args![
                    record.root,
                    record.root_path,
                    record.at_us,
                    record.by,
                    record.why,
                    record.files,
                    record.generation
                ],
            )
            .map_err(StoreError::sql("seal"))?;
            tx.commit().map_err(StoreError::sql("seal"))?;
            Ok(record)
        })
        .await
    }

    pub async fn seals(&self) -> Result<Vec<SealRecord>> {
        self.read(|conn| read_seals(conn).map_err(StoreError::sql("read seals")))
            .await
    }

    pub async fn seal_pins(&self, root: &str) -> Result<Vec<SealPin>> {
        let root = root.to_string();
        self.read(move |conn| {
            conn.query_map(
                "SELECT path, hash, size FROM seal_pins WHERE root = ? ORDER BY path",
                args![root],
                |r| {
                    Ok(SealPin {
                        path: r.get(0)?,
                        hash: r.get(1)?,
                        size: r.get(2)?,
                    })
                },
            )
            .map_err(StoreError::sql("read seal"))
        })
        .await
    }
}

fn read_seals(conn: &mut dyn Sql) -> DbResult<Vec<SealRecord>> {
    conn.query_map(
        "SELECT root, root_path, at_us, by, why, files, generation FROM seals ORDER BY root",
        &[],
        |r| {
            Ok(SealRecord {
                root: r.get(0)?,
                root_path: r.get(1)?,
                at_us: r.get(2)?,
                by: r.get(3)?,
                why: r.get(4)?,
                files: r.get(5)?,
                generation: r.get(6)?,
            })
        },
    )
}
