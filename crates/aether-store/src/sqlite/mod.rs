//! The SQLite backend: WAL mode, `synchronous=FULL`, one writer thread doing group commit.
//!
//! The writer thread owns the only write connection. Receipts and audit events queue on a
//! channel; the thread takes everything waiting, writes it in one `BEGIN IMMEDIATE`
//! transaction and commits (one fsync of the WAL), then answers every waiter. The halt flag is
//! read inside that same transaction, so a halt committed by any process stops every receipt
//! written after it. The audit chain head is also read inside the transaction, so several
//! Aether processes sharing one store still build one chain.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use tokio::sync::oneshot;

use crate::chain::{ChainBreak, ChainVerifier, GENESIS, SETTLE_US, entry_hash};
use crate::{
    AdmissionReceipt, AuditEvent, AuditQuery, AuditRecord, BuiltinDefinition, ChainReport,
    HaltState, JournalWrite, ReceiptOutcome, RegistryRow, Result, StoreError, now_us,
};

mod commands;
mod console;
mod governance;
mod idempotency;
mod journal;
mod knowledge;
mod planning;
mod sources;

const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_foundation.sql"),
    include_str!("../../migrations/sqlite/0002_journal_seals.sql"),
    include_str!("../../migrations/sqlite/0003_journal_blobs_rowid.sql"),
    include_str!("../../migrations/sqlite/0004_governance.sql"),
    include_str!("../../migrations/sqlite/0005_command_log.sql"),
    include_str!("../../migrations/sqlite/0006_sources.sql"),
    include_str!("../../migrations/sqlite/0007_console.sql"),
    include_str!("../../migrations/sqlite/0008_planning.sql"),
    include_str!("../../migrations/sqlite/0009_knowledge.sql"),
    include_str!("../../migrations/sqlite/0010_idempotency.sql"),
];

/// How many queued writes one transaction takes at most.
const MAX_BATCH: usize = 512;

type Reply<T> = oneshot::Sender<Result<T>>;

enum Job {
    Receipt(AdmissionReceipt, Reply<ReceiptOutcome>),
    Audit(AuditEvent, Reply<i64>),
    Journal(JournalWrite, Reply<Vec<i64>>),
    Other(Box<dyn FnOnce(&mut Connection) + Send>),
}

#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    jobs: Mutex<mpsc::Sender<Job>>,
    /// The write connection. The writer thread holds it for each batch; a caller writing
    /// alone may take it directly (see [`SqliteStore::admit_alone`]).
    writer: Arc<Mutex<Connection>>,
    reader: Mutex<Connection>,
}

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.exists()
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(open_err)?;
        }
        // Owner-only: the store holds summaries of every file an agent read. SQLite gives the
        // -wal and -shm files the main file's permissions.
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        Ok(std::fs::File::open(path)?)
                    } else {
                        Err(e)
                    }
                })
                .map_err(open_err)?;
        }
        let mut writer = connect(path)?;
        migrate(&mut writer, path)?;
        let reader = connect(path)?;
        let writer = Arc::new(Mutex::new(writer));
        let (tx, rx) = mpsc::channel();
        let thread_writer = writer.clone();
        std::thread::Builder::new()
            .name("aether-store-writer".into())
            .spawn(move || run_writer(thread_writer, rx))
            .map_err(open_err)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                jobs: Mutex::new(tx),
                writer,
                reader: Mutex::new(reader),
            }),
        })
    }

    /// Commits `receipt` on the calling thread if the write connection is free, skipping the
    /// hand-off to the writer thread and back (two cross-thread wake-ups, which on a virtual
    /// machine cost about as much as the commit itself). Meant for a caller that knows it is
    /// the only one writing; under concurrency, [`SqliteStore::admit`]'s group commit is better.
    /// Blocks the calling thread for one commit.
    pub async fn admit_alone(&self, receipt: AdmissionReceipt) -> Result<ReceiptOutcome> {
        let direct = self.inner.writer.try_lock().ok().map(|mut conn| {
            write_batch(&mut conn, &[&receipt], &[], &[])
                .map_err(|e| StoreError::Write(e.to_string()))
        });
        match direct {
            Some(written) => written.map(|b| receipt_outcome(&b.halt)),
            None => self.admit(receipt).await,
        }
    }

    /// [`SqliteStore::audit`] on the calling thread, as [`SqliteStore::admit_alone`].
    pub async fn audit_alone(&self, event: AuditEvent) -> Result<i64> {
        let direct = self.inner.writer.try_lock().ok().map(|mut conn| {
            write_batch(&mut conn, &[], &[&event], &[])
                .map_err(|e| StoreError::Write(e.to_string()))
        });
        match direct {
            Some(written) => written.map(|b| b.seqs[0]),
            None => self.audit(event).await,
        }
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn send(&self, job: Job) -> Result<()> {
        let jobs = self.inner.jobs.lock().map_err(|_| StoreError::WriterGone)?;
        jobs.send(job).map_err(|_| StoreError::WriterGone)
    }

    pub async fn admit(&self, receipt: AdmissionReceipt) -> Result<ReceiptOutcome> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Receipt(receipt, tx))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    pub async fn audit(&self, event: AuditEvent) -> Result<i64> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Audit(event, tx))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Makes a journal write durable, grouped with whatever else is waiting.
    /// An undo (a write with `reverts`) commits on its own: it may fail because another undo
    /// got there first, and that must not fail the receipts it would have been grouped with.
    pub async fn journal(&self, write: JournalWrite) -> Result<Vec<i64>> {
        if !write.reverts.is_empty() {
            return self
                .write(move |conn| {
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(StoreError::sql("write journal"))?;
                    let ids = journal::write(&tx, &write).map_err(|e| match e {
                        rusqlite::Error::SqliteFailure(_, Some(msg)) => StoreError::Invalid(msg),
                        e => StoreError::Sql {
                            context: "write journal",
                            source: e,
                        },
                    })?;
                    tx.commit().map_err(StoreError::sql("write journal"))?;
                    Ok(ids)
                })
                .await;
        }
        let (tx, rx) = oneshot::channel();
        self.send(Job::Journal(write, tx))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    pub async fn admit_operator(&self, receipt: AdmissionReceipt) -> Result<()> {
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::sql("write operator receipt"))?;
            tx.execute(
                "INSERT INTO receipts (call_id, at_us, session, transport, agent, tool, definition, arguments, decision)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params![
                    receipt.call_id,
                    receipt.at_us,
                    receipt.session,
                    receipt.transport,
                    receipt.agent,
                    receipt.tool,
                    receipt.definition,
                    receipt.arguments,
                    receipt.decision
                ],
            )
            .map_err(StoreError::sql("write operator receipt"))?;
            tx.commit().map_err(StoreError::sql("write operator receipt"))
        })
        .await
    }

    /// Runs `f` on the writer thread, between batches.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Other(Box::new(move |conn| {
            let _ = tx.send(f(conn));
        })))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Runs `f` on the read connection, off the async threads.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let conn = inner
                .reader
                .lock()
                .map_err(|_| StoreError::Invalid("reader poisoned".into()))?;
            f(&conn)
        })
        .await
        .map_err(|e| StoreError::Invalid(format!("read task failed: {e}")))?
    }

    pub async fn audit_query(&self, q: AuditQuery) -> Result<Vec<AuditRecord>> {
        self.read(move |conn| {
            let mut sql = format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE 1=1");
            let mut args: Vec<rusqlite::types::Value> = Vec::new();
            if let Some(after) = q.after {
                sql.push_str(" AND seq > ?");
                args.push(after.into());
            }
            if let Some(since) = q.since_us {
                sql.push_str(" AND at_us >= ?");
                args.push(since.into());
            }
            if let Some(until) = q.until_us {
                sql.push_str(" AND at_us < ?");
                args.push(until.into());
            }
            for (col, val) in [
                ("agent", &q.agent),
                ("tool", &q.tool),
                ("outcome", &q.outcome),
                ("call_id", &q.call_id),
            ] {
                if let Some(v) = val {
                    sql.push_str(&format!(" AND {col} = ?"));
                    args.push(v.clone().into());
                }
            }
            sql.push_str(if q.newest_first {
                " ORDER BY seq DESC"
            } else {
                " ORDER BY seq ASC"
            });
            sql.push_str(" LIMIT ?");
            args.push((q.limit.clamp(1, 10_000) as i64).into());
            let mut stmt = conn.prepare(&sql).map_err(StoreError::sql("audit query"))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), audit_record)
                .map_err(StoreError::sql("audit query"))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(StoreError::sql("audit query"))
        })
        .await
    }

    pub async fn verify_audit(&self, expect_head: Option<(i64, String)>) -> Result<ChainReport> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit ORDER BY seq ASC"
                ))
                .map_err(StoreError::sql("audit verify"))?;
            let mut rows = stmt.query([]).map_err(StoreError::sql("audit verify"))?;
            let mut verifier = ChainVerifier::default();
            while let Some(row) = rows.next().map_err(StoreError::sql("audit verify"))? {
                verifier.push(&audit_record(row).map_err(StoreError::sql("audit verify"))?);
            }
            let mut report = verifier.finish();
            check_receipts(conn, &mut report).map_err(StoreError::sql("audit verify"))?;
            if let Some((seq, hash)) = expect_head {
                let found: Option<String> = conn
                    .query_row("SELECT hash FROM audit WHERE seq = ?", [seq], |r| r.get(0))
                    .optional()
                    .map_err(StoreError::sql("audit verify"))?;
                if found.as_deref() != Some(hash.as_str()) {
                    report.breaks.push(ChainBreak {
                        seq,
                        problem: match found {
                            None => "the expected head row is gone".into(),
                            Some(h) => format!("the expected head was {hash}, the row now hashes to {h} (rewritten)"),
                        },
                    });
                }
            }
            Ok(report)
        })
        .await
    }

    pub async fn receipt(&self, call_id: &str) -> Result<Option<AdmissionReceipt>> {
        let call_id = call_id.to_string();
        self.read(move |conn| {
            conn.query_row(
                "SELECT call_id, at_us, session, transport, agent, tool, definition, arguments, decision
                 FROM receipts WHERE call_id = ?",
                [call_id],
                |r| {
                    Ok(AdmissionReceipt {
                        call_id: r.get(0)?,
                        at_us: r.get(1)?,
                        session: r.get(2)?,
                        transport: r.get(3)?,
                        agent: r.get(4)?,
                        tool: r.get(5)?,
                        definition: r.get(6)?,
                        arguments: r.get(7)?,
                        decision: r.get(8)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::sql("read receipt"))
        })
        .await
    }

    pub async fn halt_state(&self) -> Result<HaltState> {
        self.read(read_halt).await
    }

    pub async fn set_halt(
        &self,
        halted: bool,
        by: &str,
        why: &str,
        audit: Option<AuditEvent>,
    ) -> Result<HaltState> {
        let (by, why) = (by.to_string(), why.to_string());
        self.write(move |conn| {
            let context = "set halt";
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::sql(context))?;
            let now = now_us();
            tx.execute(
                "UPDATE halt SET halted = ?, by = ?, why = ?, at_us = ? WHERE id = 1",
                params![halted, by, why, now],
            )
            .map_err(StoreError::sql(context))?;
            governance::changed(&tx, "halt", audit.as_ref()).map_err(StoreError::sql(context))?;
            if halted {
                // A halt denies every call still waiting for a person, in the same commit.
                let denied = tx
                    .execute(
                        "UPDATE approvals SET state = 'denied', decided_at_us = ?, decided_by = ?,
                             why = ? WHERE state = 'pending'",
                        params![now, by, format!("halted: {why}")],
                    )
                    .map_err(StoreError::sql(context))?;
                if denied > 0 {
                    governance::bump(&tx, "approvals").map_err(StoreError::sql(context))?;
                }
            }
            let state = query_halt(&tx).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(state)
        })
        .await
    }

    pub async fn registry(&self) -> Result<Vec<RegistryRow>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT name, state, approved_digest, definition, origin, updated_at_us, updated_by, why,
                         seen_digest, approved_definition
                     FROM registry ORDER BY name",
                )
                .map_err(StoreError::sql("read registry"))?;
            let rows = stmt
                .query_map([], governance::registry_row)
                .map_err(StoreError::sql("read registry"))?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(StoreError::sql("read registry"))
        })
        .await
    }

    pub async fn sync_builtins(&self, builtins: Vec<BuiltinDefinition>) -> Result<Vec<String>> {
        self.write(move |conn| {
            let context = "sync built-ins";
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::sql(context))?;
            let mut changed = Vec::new();
            let now = now_us();
            for b in builtins {
                let current: Option<(String, Option<String>, Option<String>)> = tx
                    .query_row(
                        "SELECT state, approved_digest, seen_digest FROM registry WHERE name = ?",
                        [&b.name],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()
                    .map_err(StoreError::sql(context))?;
                let why = match &current {
                    None => "built-in, approved from source",
                    Some((state, digest, _)) if state == "approved" && digest.as_deref() != Some(&b.digest) => {
                        "built-in definition changed with this release; approved from source"
                    }
                    // Withdrawn or unapproved by an operator: stays so, but the registry keeps
                    // the definition this release serves, for the operator to approve.
                    Some((_, _, seen)) => {
                        if seen.as_deref() != Some(&b.digest) {
                            tx.execute(
                                "UPDATE registry SET seen_digest = ?, definition = ? WHERE name = ?",
                                params![b.digest, b.definition, b.name],
                            )
                            .map_err(StoreError::sql(context))?;
                        }
                        continue;
                    }
                };
                tx.execute(
                    "INSERT INTO registry (name, state, approved_digest, definition, origin, updated_at_us,
                         updated_by, why, seen_digest, approved_definition)
                     VALUES (?1, 'approved', ?2, ?3, 'builtin', ?4, 'aether', ?5, ?2, ?3)
                     ON CONFLICT (name) DO UPDATE SET state = 'approved', approved_digest = ?2,
                       definition = ?3, updated_at_us = ?4, updated_by = 'aether', why = ?5,
                       seen_digest = ?2, approved_definition = ?3",
                    params![b.name, b.digest, b.definition, now, why],
                )
                .map_err(StoreError::sql(context))?;
                tx.execute(
                    "INSERT INTO registry_history (at_us, name, from_state, to_state, digest, by, why,
                         approved_definition)
                     VALUES (?, ?, ?, 'approved', ?, 'aether', ?, ?)",
                    params![now, b.name, current.map(|c| c.0), b.digest, why, b.definition],
                )
                .map_err(StoreError::sql(context))?;
                changed.push(b.name);
            }
            if !changed.is_empty() {
                governance::bump(&tx, "registry").map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(changed)
        })
        .await
    }
}

fn connect(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).map_err(StoreError::sql("open"))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(StoreError::sql("open"))?;
    // FULL: in WAL mode every commit fsyncs the log, so a committed receipt survives a crash.
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
    )
    .map_err(StoreError::sql("configure"))?;
    Ok(conn)
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::sql("migrate"))?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(StoreError::sql("migrate"))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew {
            path: path.display().to_string(),
            found: version,
            known,
        });
    }
    for sql in &MIGRATIONS[version as usize..] {
        tx.execute_batch(sql).map_err(StoreError::sql("migrate"))?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {known}"))
        .map_err(StoreError::sql("migrate"))?;
    tx.commit().map_err(StoreError::sql("migrate"))
}

fn read_halt(conn: &Connection) -> Result<HaltState> {
    query_halt(conn).map_err(StoreError::sql("read halt"))
}

/// Every receipt against the audit (a join the query planner indexes on the fly).
fn check_receipts(conn: &Connection, report: &mut ChainReport) -> rusqlite::Result<()> {
    let settled_before = now_us() - SETTLE_US;
    // The other way round: a row of an admitted call (a call's row with no refusing step) must
    // have its receipt, or someone removed the receipt, or wrote the row.
    let mut orphans = conn.prepare(
        "SELECT a.seq, a.call_id FROM audit a LEFT JOIN receipts r ON r.call_id = a.call_id
         WHERE a.step IS NULL AND a.transport <> 'operator' AND r.call_id IS NULL
           AND a.seq > coalesce((SELECT value FROM store_meta
                                 WHERE key = 'receipts_checked_after_seq'), 0)
         ORDER BY a.seq LIMIT 100",
    )?;
    let mut rows = orphans.query([])?;
    while let Some(r) = rows.next()? {
        let (seq, call_id): (i64, String) = (r.get(0)?, r.get(1)?);
        report.mismatched.push(ChainBreak {
            seq,
            problem: format!("call {call_id} is audited as admitted but has no receipt"),
        });
    }
    drop(rows);
    let mut stmt = conn.prepare(
        "SELECT r.call_id, r.at_us, r.tool, r.definition, r.arguments,
                count(a.seq), min(a.tool), min(a.definition), min(a.arguments_digest)
         FROM receipts r LEFT JOIN audit a ON a.call_id = r.call_id
         GROUP BY r.call_id",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        report.receipts += 1;
        let call_id: String = r.get(0)?;
        let audited: i64 = r.get(5)?;
        if audited == 0 {
            if r.get::<_, i64>(1)? < settled_before {
                if report.unaudited.len() < 100 {
                    report.unaudited.push(call_id);
                }
            } else {
                report.in_flight += 1;
            }
            continue;
        }
        let same = r.get::<_, String>(2)? == r.get::<_, String>(6)?
            && Some(r.get::<_, String>(3)?) == r.get::<_, Option<String>>(7)?
            && r.get::<_, String>(4)? == r.get::<_, String>(8)?;
        if (audited > 1 || !same) && report.mismatched.len() < 100 {
            report.mismatched.push(ChainBreak {
                seq: 0,
                problem: if audited > 1 {
                    format!("call {call_id} has {audited} audit rows")
                } else {
                    format!("call {call_id}: its audit row names another tool, definition or arguments than its receipt")
                },
            });
        }
    }
    Ok(())
}

pub(super) fn query_halt(conn: &Connection) -> rusqlite::Result<HaltState> {
    conn.query_row(
        "SELECT halted, by, why, at_us FROM halt WHERE id = 1",
        [],
        |r| {
            Ok(HaltState {
                halted: r.get(0)?,
                by: r.get(1)?,
                why: r.get(2)?,
                at_us: r.get(3)?,
            })
        },
    )
}

const AUDIT_COLUMNS: &str = "seq, at_us, call_id, session, transport, agent, team, project, tool, tier, \
     outcome, step, rule, reason, definition, arguments_digest, arguments, result, duration_us, prev_hash, hash";

fn audit_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRecord> {
    Ok(AuditRecord {
        seq: r.get(0)?,
        event: AuditEvent {
            at_us: r.get(1)?,
            call_id: r.get(2)?,
            session: r.get(3)?,
            transport: r.get(4)?,
            agent: r.get(5)?,
            team: r.get(6)?,
            project: r.get(7)?,
            tool: r.get(8)?,
            tier: r.get(9)?,
            outcome: r.get(10)?,
            step: r.get(11)?,
            rule: r.get(12)?,
            reason: r.get(13)?,
            definition: r.get(14)?,
            arguments_digest: r.get(15)?,
            arguments: r.get(16)?,
            result: r.get(17)?,
            duration_us: r.get(18)?,
        },
        prev_hash: r.get(19)?,
        hash: r.get(20)?,
    })
}

fn run_writer(conn: Arc<Mutex<Connection>>, jobs: mpsc::Receiver<Job>) {
    while let Ok(first) = jobs.recv() {
        // A poisoned lock means a direct commit panicked mid-write; SQLite rolled the
        // transaction back, so the connection itself is fine to keep using.
        let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut receipts = Vec::new();
        let mut audits = Vec::new();
        let mut journals = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Receipt(r, reply) => receipts.push((r, reply)),
                Job::Audit(e, reply) => audits.push((e, reply)),
                Job::Journal(j, reply) => journals.push((j, reply)),
                // Not batched: runs now, in its own transaction, before the batch it
                // interrupted is committed.
                Job::Other(f) => f(&mut conn),
            }
            if receipts.len() + audits.len() + journals.len() < MAX_BATCH {
                next = jobs.try_recv().ok();
            }
        }
        if !receipts.is_empty() || !audits.is_empty() || !journals.is_empty() {
            commit_batch(&mut conn, receipts, audits, journals);
        }
    }
}

/// What one committed batch produced.
struct Batch {
    /// The halt state met, if halted (no receipt was written).
    halt: Option<HaltState>,
    /// The audit rows' sequence numbers.
    seqs: Vec<i64>,
    /// Each journal write's entry ids.
    journal_ids: Vec<Vec<i64>>,
}

/// Writes one transaction: the halt check and `receipts` (unless halted), `journals`, then
/// `audits` after the chain head, and commits.
/// Appends `events` to the audit chain inside `tx`, reading the chain's head there (so any
/// number of writers, in any processes, build one chain). Returns their sequence numbers.
pub(super) fn append_audit(
    tx: &rusqlite::Transaction<'_>,
    events: &[&AuditEvent],
) -> rusqlite::Result<Vec<i64>> {
    let mut seqs = Vec::with_capacity(events.len());
    if events.is_empty() {
        return Ok(seqs);
    }
    let (mut seq, mut prev): (i64, String) = tx
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, GENESIS.to_string()));
    let mut insert = tx.prepare_cached(&format!(
        "INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))?;
    for e in events {
        seq += 1;
        let hash = entry_hash(&prev, seq, e);
        insert.execute(params![
            seq,
            e.at_us,
            e.call_id,
            e.session,
            e.transport,
            e.agent,
            e.team,
            e.project,
            e.tool,
            e.tier,
            e.outcome,
            e.step,
            e.rule,
            e.reason,
            e.definition,
            e.arguments_digest,
            e.arguments,
            e.result,
            e.duration_us,
            prev,
            hash
        ])?;
        seqs.push(seq);
        prev = hash;
    }
    Ok(seqs)
}

fn write_batch(
    conn: &mut Connection,
    receipts: &[&AdmissionReceipt],
    audits: &[&AuditEvent],
    journals: &[&JournalWrite],
) -> rusqlite::Result<Batch> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut journal_ids = Vec::with_capacity(journals.len());
    for j in journals {
        journal_ids.push(journal::write(&tx, j)?);
    }
    let mut halt = None;
    if !receipts.is_empty() {
        let state = query_halt(&tx)?;
        if state.halted {
            halt = Some(state);
        } else {
            let mut insert = tx.prepare_cached(
                "INSERT INTO receipts (call_id, at_us, session, transport, agent, tool, definition, arguments, decision)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )?;
            for r in receipts {
                insert.execute(params![
                    r.call_id,
                    r.at_us,
                    r.session,
                    r.transport,
                    r.agent,
                    r.tool,
                    r.definition,
                    r.arguments,
                    r.decision
                ])?;
            }
        }
    }
    let seqs = append_audit(&tx, audits)?;
    tx.commit()?;
    Ok(Batch {
        halt,
        seqs,
        journal_ids,
    })
}

fn receipt_outcome(halt: &Option<HaltState>) -> ReceiptOutcome {
    match halt {
        Some(state) => ReceiptOutcome::Halted(state.clone()),
        None => ReceiptOutcome::Durable,
    }
}

fn commit_batch(
    conn: &mut Connection,
    receipts: Vec<(AdmissionReceipt, Reply<ReceiptOutcome>)>,
    audits: Vec<(AuditEvent, Reply<i64>)>,
    journals: Vec<(JournalWrite, Reply<Vec<i64>>)>,
) {
    let written = {
        let r: Vec<&AdmissionReceipt> = receipts.iter().map(|(r, _)| r).collect();
        let a: Vec<&AuditEvent> = audits.iter().map(|(a, _)| a).collect();
        let j: Vec<&JournalWrite> = journals.iter().map(|(j, _)| j).collect();
        write_batch(conn, &r, &a, &j)
    };
    match written {
        Ok(batch) => {
            for (_, reply) in receipts {
                let _ = reply.send(Ok(receipt_outcome(&batch.halt)));
            }
            for ((_, reply), seq) in audits.into_iter().zip(batch.seqs) {
                let _ = reply.send(Ok(seq));
            }
            for ((_, reply), ids) in journals.into_iter().zip(batch.journal_ids) {
                let _ = reply.send(Ok(ids));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "store write failed");
            let msg = e.to_string();
            for (_, reply) in receipts {
                let _ = reply.send(Err(StoreError::Write(msg.clone())));
            }
            for (_, reply) in audits {
                let _ = reply.send(Err(StoreError::Write(msg.clone())));
            }
            for (_, reply) in journals {
                let _ = reply.send(Err(StoreError::Write(msg.clone())));
            }
        }
    }
}
