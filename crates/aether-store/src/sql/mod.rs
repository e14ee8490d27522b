//! The store's logic, once for both databases: one writer thread per store doing group
//! commit, a read connection, and every query written against [`crate::db::Sql`].
//!
//! The writer thread owns the write connection. Receipts and audit events queue on a
//! channel; the thread takes everything waiting, writes it in one write transaction and
//! commits (one fsync of SQLite's WAL, or one PostgreSQL commit), then answers every waiter.
//! The halt flag is read inside that same transaction, so a halt committed by any process
//! stops every receipt written after it. The audit chain head is also read inside the
//! transaction, under the store's write lock, so several Aether processes sharing one store
//! still build one chain.

use aether_vocab::RegistryState;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use tokio::sync::{oneshot, watch};

use crate::chain::{ChainBreak, ChainVerifier, Checkpoint, GENESIS, Hashing, Keying, SETTLE_US};
use crate::db::{
    self, Arg, Conn, DbError, DbResult, Dialect, Optional, Row, Sql, SqlExt, Value, args, bind,
};
use crate::{
    AdmissionReceipt, AuditEvent, AuditKey, AuditQuery, AuditRecord, BuiltinDefinition,
    ChainReport, HaltState, JournalWrite, ReceiptOutcome, RegistryRow, Result, StoreError, now_us,
};
use ledger::{Ledger, Liveness};

mod commands;
mod console;
mod governance;
mod idempotency;
mod journal;
mod knowledge;
pub(crate) mod ledger;
mod mcp_sessions;
mod oauth;
mod planning;
mod rates;
mod retention;
mod runs;
mod sources;
pub(crate) mod stats;

/// How many queued writes one transaction takes at most.
const MAX_BATCH: usize = 512;

/// Writers of receipts and audit rows on PostgreSQL besides the one writer, each with its own
/// connection and audit chain: a group commit across a network is a few round trips, and
/// while one lane waits for them the next takes the calls arriving meanwhile. (SQLite has
/// one writer at a time: its one writer takes everything.) `AETHER_PG_LANES` (0 to 16)
/// overrides it.
const RECORD_LANES: usize = 4;

fn record_lanes() -> usize {
    std::env::var("AETHER_PG_LANES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n <= 16)
        .unwrap_or(RECORD_LANES)
}

type Reply<T> = oneshot::Sender<Result<T>>;

/// An audit row's sequence number, and the halt that withheld its result (see
/// [`SqlStore::audit`]).
type Audited = (i64, Option<HaltState>);

/// Work for the writer thread that is not a receipt, audit row or journal write.
type WriterTask = Box<dyn FnOnce(&mut dyn Conn) + Send>;

enum Job {
    Receipt(AdmissionReceipt, Reply<ReceiptOutcome>),
    Audit(Box<AuditEvent>, Reply<Audited>),
    Journal(JournalWrite, Reply<Vec<i64>>),
    Other(WriterTask),
}

/// Where a store lives.
#[derive(Clone, Debug)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by its URL with any password hidden.
    Postgres(String),
}

#[derive(Clone)]
pub struct SqlStore {
    inner: Arc<Inner>,
}

struct Inner {
    location: Location,
    jobs: Mutex<mpsc::Sender<Job>>,
    /// Receipts and audit rows, where writers of their own take them ([`RECORD_LANES`] on
    /// PostgreSQL); `None`: the writer takes them with everything else.
    records: Option<Mutex<mpsc::Sender<Job>>>,
    /// The audit chains this process appends to: its writer's id, then one per lane.
    chains: Vec<String>,
    /// The write connection. The writer thread holds it for each batch; a caller writing
    /// alone may take it directly (see [`SqlStore::admit_alone`]).
    writer: Arc<Mutex<Box<dyn Conn>>>,
    reader: Mutex<Box<dyn Conn>>,
    /// Bumped when another process changes the store (PostgreSQL's notifications); `None`
    /// where changes are only seen by polling.
    changes: Option<watch::Receiver<u64>>,
    /// Audit rows that met an unreachable database, written when it answers again.
    late: Mutex<LateAudits>,
    /// How the audit is keyed, and this process as a writer.
    ledger: Arc<Ledger>,
}

/// Audit rows waiting for the database ([`SqlStore::audit_when_back`]).
#[derive(Default)]
struct LateAudits {
    rows: Vec<AuditEvent>,
    /// Whether a task is writing them.
    flushing: bool,
}

/// Rows [`SqlStore::audit_when_back`] keeps at most; beyond, a row is dropped (its receipt
/// without an audit row is then what `audit verify` reports).
const LATE_ROWS: usize = 100_000;

impl SqlStore {
    /// Opens (creating if needed) the SQLite store at `path`; with `key`, its audit is keyed
    /// under it (see [`crate::Keying`]).
    pub fn open_sqlite(path: &Path, key: Option<AuditKey>) -> Result<SqlStore> {
        db::sqlite::create(path)?;
        let mut writer = db::sqlite::connect(path)?;
        db::sqlite::migrate(&mut writer, path)?;
        let reader = db::sqlite::connect(path)?;
        let mut writer: Box<dyn Conn> = Box::new(writer);
        let ledger = open_ledger(&mut *writer, key, &path.display().to_string())?;
        SqlStore::start(
            Location::Sqlite(path.to_path_buf()),
            writer,
            Box::new(reader),
            None,
            ledger,
            Vec::new(),
        )
    }

    /// Opens the SQLite store at `path` for reading only: no migration, no writer, no lock
    /// (a copy on read-only media opens too). Writes fail.
    pub fn open_sqlite_readonly(path: &Path) -> Result<SqlStore> {
        let reader = db::sqlite::connect_readonly(path)?;
        let writer = db::sqlite::connect_readonly(path)?;
        let mut reader: Box<dyn Conn> = Box::new(reader);
        let keying = ledger::read_keying(&mut *reader).map_err(StoreError::sql("open"))?;
        SqlStore::start(
            Location::Sqlite(path.to_path_buf()),
            Box::new(writer),
            reader,
            None,
            Ledger::new(
                Hashing::Plain,
                keying,
                Some("the store was opened read-only".into()),
            ),
            Vec::new(),
        )
    }

    /// Opens the PostgreSQL store at `url` (`postgres://…`), bringing its schema up to date.
    pub fn open_postgres(url: &str, key: Option<AuditKey>) -> Result<SqlStore> {
        // The client blocks on a runtime of its own: never on a thread driving async tasks.
        std::thread::scope(|s| {
            s.spawn(|| SqlStore::connect_postgres(url, key))
                .join()
                .unwrap_or_else(|_| Err(StoreError::Invalid("opening the store panicked".into())))
        })
    }

    /// Opens the PostgreSQL store at `url` for reading only (read-only transactions, no
    /// migration, no listener).
    pub fn open_postgres_readonly(url: &str) -> Result<SqlStore> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let shown = db::postgres::redact(url);
                let config = db::postgres::config(url)?;
                let connect = || {
                    let mut conn = db::postgres::PgConn::connect(&config).map_err(|e| {
                        StoreError::Unreachable {
                            location: shown.clone(),
                            detail: e.to_string(),
                        }
                    })?;
                    conn.batch("SET default_transaction_read_only = on")
                        .map_err(StoreError::sql("open"))?;
                    Ok::<_, StoreError>(conn)
                };
                let mut reader: Box<dyn Conn> = Box::new(connect()?);
                let writer: Box<dyn Conn> = Box::new(connect()?);
                let keying = ledger::read_keying(&mut *reader).map_err(StoreError::sql("open"))?;
                SqlStore::start(
                    Location::Postgres(shown.clone()),
                    writer,
                    reader,
                    None,
                    Ledger::new(
                        Hashing::Plain,
                        keying,
                        Some("the store was opened read-only".into()),
                    ),
                    Vec::new(),
                )
            })
            .join()
            .unwrap_or_else(|_| Err(StoreError::Invalid("opening the store panicked".into())))
        })
    }

    fn connect_postgres(url: &str, key: Option<AuditKey>) -> Result<SqlStore> {
        let shown = db::postgres::redact(url);
        let config = db::postgres::config(url)?;
        let connect = || {
            db::postgres::PgConn::connect(&config).map_err(|e| StoreError::Unreachable {
                location: shown.clone(),
                detail: e.to_string(),
            })
        };
        let mut writer = connect()?;
        db::postgres::migrate(&mut writer, &shown)?;
        let mut writer: Box<dyn Conn> = Box::new(writer);
        let ledger = open_ledger(&mut *writer, key, &shown)?;
        let reader = connect()?;
        let (tx, rx) = watch::channel(0);
        let listen = config.clone();
        std::thread::Builder::new()
            .name("aether-store-listen".into())
            .spawn(move || db::postgres::listen(listen, tx))
            .map_err(|source| StoreError::Open {
                path: shown.clone(),
                source,
            })?;
        let flight_config = db::postgres::flight_config(url)?;
        let lanes = (0..record_lanes())
            .map(|_| {
                let conn = connect()?;
                let flight = db::postgres::PgFlight::connect(&flight_config).map_err(|e| {
                    StoreError::Unreachable {
                        location: shown.clone(),
                        detail: e.to_string(),
                    }
                })?;
                Ok((Box::new(conn) as Box<dyn Conn>, Some(flight)))
            })
            .collect::<Result<Vec<_>>>()?;
        SqlStore::start(
            Location::Postgres(shown),
            writer,
            Box::new(reader),
            Some(rx),
            ledger,
            lanes,
        )
    }

    fn start(
        location: Location,
        writer: Box<dyn Conn>,
        reader: Box<dyn Conn>,
        changes: Option<watch::Receiver<u64>>,
        ledger: Ledger,
        lanes: Vec<(Box<dyn Conn>, Option<db::postgres::PgFlight>)>,
    ) -> Result<SqlStore> {
        let writer = Arc::new(Mutex::new(writer));
        let ledger = Arc::new(ledger);
        let spawn = |name: String,
                     conn: Arc<Mutex<Box<dyn Conn>>>,
                     jobs,
                     chain: String,
                     flight: Option<db::postgres::PgFlight>| {
            let ledger = ledger.clone();
            let shown = location.to_string();
            std::thread::Builder::new()
                .name(name)
                .spawn(move || run_writer(conn, jobs, &shown, &ledger, &chain, flight))
                .map_err(|source| StoreError::Open {
                    path: format!("{location:?}"),
                    source,
                })
        };
        let (tx, rx) = mpsc::channel();
        let mut chains = vec![ledger.writer.id.clone()];
        spawn(
            "aether-store-writer".into(),
            writer.clone(),
            Arc::new(Mutex::new(rx)),
            chains[0].clone(),
            None,
        )?;
        let records = match lanes.is_empty() {
            true => None,
            false => {
                let (tx, rx) = mpsc::channel();
                let rx = Arc::new(Mutex::new(rx));
                for (k, (conn, flight)) in lanes.into_iter().enumerate() {
                    let chain = format!("{}/{}", ledger.writer.id, k + 1);
                    chains.push(chain.clone());
                    spawn(
                        format!("aether-store-lane-{}", k + 1),
                        Arc::new(Mutex::new(conn)),
                        rx.clone(),
                        chain,
                        flight,
                    )?;
                }
                Some(Mutex::new(tx))
            }
        };
        Ok(SqlStore {
            inner: Arc::new(Inner {
                location,
                jobs: Mutex::new(tx),
                records,
                chains,
                writer,
                reader: Mutex::new(reader),
                changes,
                late: Mutex::new(LateAudits::default()),
                ledger,
            }),
        })
    }

    /// Whether a caller may commit on its own thread: SQLite only (PostgreSQL's client must
    /// not block a thread driving async tasks, and a network round trip outweighs the
    /// hand-off anyway).
    fn direct(&self) -> bool {
        matches!(self.inner.location, Location::Sqlite(_))
    }

    pub fn location(&self) -> &Location {
        &self.inner.location
    }

    /// The key the audit is keyed under, if it is.
    pub fn audit_key(&self) -> Option<&crate::AuditKey> {
        self.inner.ledger.hashing.key()
    }

    /// A receiver bumped whenever another process changes the store, where the database
    /// tells (PostgreSQL); `None` for SQLite, which is polled.
    pub fn changes(&self) -> Option<watch::Receiver<u64>> {
        self.inner.changes.clone()
    }

    /// Commits `receipt` on the calling thread if the write connection is free, skipping the
    /// hand-off to the writer thread and back (two cross-thread wake-ups, which on a virtual
    /// machine cost about as much as the commit itself). Meant for a caller that knows it is
    /// the only one writing; under concurrency, [`SqlStore::admit`]'s group commit is better.
    /// Blocks the calling thread for one commit.
    pub async fn admit_alone(&self, receipt: AdmissionReceipt) -> Result<ReceiptOutcome> {
        match self.commit_here(&[&receipt], &[], &[]) {
            Some(written) => written.map(|b| receipt_outcome(&b.halt)),
            None => self.admit(receipt).await,
        }
    }

    /// [`SqlStore::audit`] on the calling thread, as [`SqlStore::admit_alone`].
    pub async fn audit_alone(&self, event: AuditEvent) -> Result<Audited> {
        match self.commit_here(&[], &[&event], &[]) {
            Some(written) => {
                written.map(|b| (b.seqs[0], b.withheld[0].then_some(b.halt).flatten()))
            }
            None => self.audit(event).await,
        }
    }

    /// Commits one batch on the calling thread, if this store may (SQLite) and its write
    /// connection is free; `None` otherwise (the caller hands it to the writer instead).
    fn commit_here(
        &self,
        receipts: &[&AdmissionReceipt],
        audits: &[&AuditEvent],
        journals: &[&JournalWrite],
    ) -> Option<Result<Batch>> {
        if !self.direct() {
            return None;
        }
        let mut conn = self.inner.writer.try_lock().ok()?;
        Some(
            write_batch(
                &mut **conn,
                &self.inner.ledger,
                &self.inner.chains[0],
                receipts,
                audits,
                journals,
            )
            .map_err(|e| StoreError::Write(e.to_string())),
        )
    }

    fn send(&self, job: Job) -> Result<()> {
        // Receipts and audit rows go to the lanes where there are some; journal writes (whose
        // ids order a file's changes) and everything else to the one writer.
        let jobs = match (&job, &self.inner.records) {
            (Job::Receipt(..) | Job::Audit(..), Some(records)) => records,
            _ => &self.inner.jobs,
        };
        let jobs = jobs.lock().map_err(|_| StoreError::WriterGone)?;
        jobs.send(job).map_err(|_| StoreError::WriterGone)
    }

    pub async fn admit(&self, receipt: AdmissionReceipt) -> Result<ReceiptOutcome> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Receipt(receipt, tx))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Appends `event`; a side-effect-free call's only record (`single`) that would hand the
    /// caller a result meets the halt flag in the same transaction: if halted, the row is
    /// written as refused at the halt and the halt state returned (the result is withheld).
    pub async fn audit(&self, event: AuditEvent) -> Result<Audited> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Audit(Box::new(event), tx))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Keeps `event`, whose write met an unreachable database, and writes it once the
    /// database answers (one task per store, retrying with backoff up to every 5 s). A row
    /// the first attempt committed after all (the connection died on its commit) is not
    /// written twice. Needs a Tokio runtime.
    pub fn audit_when_back(&self, event: AuditEvent) {
        let mut late = self.inner.late.lock().unwrap_or_else(|e| e.into_inner());
        if late.rows.len() >= LATE_ROWS {
            tracing::error!(call = %event.call_id, "too many audit rows waiting for the store; this one is lost");
            return;
        }
        late.rows.push(event);
        if std::mem::replace(&mut late.flushing, true) {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move { store.flush_late().await });
    }

    async fn flush_late(self) {
        let mut wait = Duration::from_millis(250);
        loop {
            tokio::time::sleep(wait).await;
            let rows = {
                let mut late = self.inner.late.lock().unwrap_or_else(|e| e.into_inner());
                if late.rows.is_empty() {
                    late.flushing = false;
                    return;
                }
                std::mem::take(&mut late.rows)
            };
            let mut rows = rows.into_iter();
            while let Some(event) = rows.next() {
                let row = event.clone();
                let ledger = self.inner.ledger.clone();
                let written = self
                    .write(move |conn| {
                        let context = StoreError::sql("late audit");
                        let mut tx = conn.begin().map_err(context)?;
                        let there: Option<i64> = tx
                            .query_row(
                                "SELECT seq FROM audit WHERE call_id = ? LIMIT 1",
                                args![row.call_id],
                                |r| r.get(0),
                            )
                            .optional()
                            .map_err(StoreError::sql("late audit"))?;
                        if there.is_none() {
                            append_audit(&mut *tx, &ledger, &[&row])
                                .map_err(StoreError::sql("late audit"))?;
                        }
                        tx.commit().map_err(StoreError::sql("late audit"))
                    })
                    .await;
                match written {
                    Ok(()) => {
                        tracing::info!(call = %event.call_id, "audit row written late");
                        wait = Duration::from_millis(250);
                    }
                    Err(e) if e.is_unreachable() => {
                        // Back in the queue, in order, ahead of rows that came since.
                        let mut late = self.inner.late.lock().unwrap_or_else(|e| e.into_inner());
                        let newer = std::mem::take(&mut late.rows);
                        late.rows = std::iter::once(event).chain(rows).collect();
                        late.rows.extend(newer);
                        wait = (wait * 2).min(Duration::from_secs(5));
                        break;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "an audit row written late failed; it is lost")
                    }
                }
            }
        }
    }

    /// Makes a journal write durable, grouped with whatever else is waiting.
    /// An undo (a write with `reverts`) commits on its own: it may fail because another undo
    /// got there first, and that must not fail the receipts it would have been grouped with.
    pub async fn journal(&self, write: JournalWrite) -> Result<Vec<i64>> {
        if !write.reverts.is_empty() {
            let ledger = self.inner.ledger.clone();
            return self
                .write(move |conn| {
                    let mut tx = conn.begin().map_err(StoreError::sql("write journal"))?;
                    // A receipt riding it meets the halt here too.
                    if !write.receipts.is_empty() {
                        let state =
                            query_halt(&mut *tx).map_err(StoreError::sql("write journal"))?;
                        if state.halted {
                            return Err(StoreError::Halted(state));
                        }
                        insert_receipts(
                            &mut *tx,
                            &ledger,
                            &write.receipts.iter().collect::<Vec<_>>(),
                        )
                        .map_err(StoreError::sql("write journal"))?;
                    }
                    let ids = journal::write(&mut *tx, &write).map_err(|e| match e {
                        DbError::Refused(msg) => StoreError::Invalid(msg),
                        e => StoreError::sql("write journal")(e),
                    })?;
                    tx.commit().map_err(StoreError::sql("write journal"))?;
                    if !write.receipts.is_empty() {
                        ledger.registered();
                    }
                    Ok(ids)
                })
                .await;
        }
        let (tx, rx) = oneshot::channel();
        self.send(Job::Journal(write, tx))?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// [`SqlStore::journal`] on the calling thread when the write connection is free, as
    /// [`SqlStore::admit_alone`]; grouped with the writer's batch otherwise.
    pub async fn journal_alone(&self, write: JournalWrite) -> Result<Vec<i64>> {
        // An undo commits on its own (see `journal`).
        let here = match write.reverts.is_empty() {
            true => self.commit_here(&[], &[], &[&write]),
            false => None,
        };
        match here {
            Some(written) => written.and_then(|mut b| match b.journal_ids.remove(0) {
                Some(ids) => Ok(ids),
                None => Err(StoreError::Halted(b.halt.unwrap_or_else(unknown_halt))),
            }),
            None => self.journal(write).await,
        }
    }

    pub async fn admit_operator(&self, receipt: AdmissionReceipt) -> Result<()> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "write operator receipt";
            let mut tx = conn.begin().map_err(StoreError::sql(context))?;
            insert_receipts(&mut *tx, &ledger, &[&receipt]).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            ledger.registered();
            Ok(())
        })
        .await
    }

    /// Runs `f` on the writer thread, between batches.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Conn) -> Result<T> + Send + 'static,
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
        f: impl FnOnce(&mut dyn Conn) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = inner
                .reader
                .lock()
                .map_err(|_| StoreError::Invalid("reader poisoned".into()))?;
            f(&mut **conn)
        })
        .await
        .map_err(|e| StoreError::Invalid(format!("read task failed: {e}")))?
    }

    pub async fn audit_query(&self, q: AuditQuery) -> Result<Vec<AuditRecord>> {
        self.read(move |conn| {
            let mut sql = format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE 1=1");
            let mut args: Vec<Value> = Vec::new();
            if let Some(after) = q.after {
                sql.push_str(" AND seq > ?");
                args.push(after.into());
            }
            // No row past one that may still commit: a reader paging on from the newest row
            // it was given would step past that one for good.
            if let Some(horizon) = settled_horizon(conn)? {
                sql.push_str(" AND seq <= ?");
                args.push(horizon.into());
            }
            if let Some(before) = q.before {
                sql.push_str(" AND seq < ?");
                args.push(before.into());
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
                ("subject", &q.subject),
                ("session", &q.session),
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
            conn.query_map(&sql, &bind(&args), audit_record)
                .map_err(StoreError::sql("audit query"))
        })
        .await
    }

    pub async fn verify_audit(&self, mut options: crate::VerifyOptions) -> Result<ChainReport> {
        // A store opened with its key verifies with it unless told otherwise.
        if options.key.is_none()
            && let Hashing::Keyed(key) = &self.inner.ledger.hashing
        {
            options.key = Some(key.clone());
        }
        self.read(move |conn| verify(conn, options)).await
    }

    pub async fn receipt(&self, call_id: &str) -> Result<Option<AdmissionReceipt>> {
        let call_id = call_id.to_string();
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {} FROM receipts WHERE call_id = ?",
                    ledger::RECEIPT_COLUMNS
                ),
                args![call_id],
                |r| ledger::receipt_row(r).map(|(receipt, _)| receipt),
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
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "set halt";
            let mut tx = conn.begin().map_err(StoreError::sql(context))?;
            let now = now_us();
            tx.execute(
                "UPDATE halt SET halted = ?, by = ?, why = ?, at_us = ? WHERE id = 1",
                args![halted, by, why, now],
            )
            .map_err(StoreError::sql(context))?;
            governance::changed(&mut *tx, &ledger, "halt", audit.as_ref())
                .map_err(StoreError::sql(context))?;
            if halted {
                // A halt denies every call still waiting for a person, in the same commit.
                let denied = tx
                    .execute(
                        "UPDATE approvals SET state = 'denied', decided_at_us = ?, decided_by = ?,
                             why = ? WHERE state = 'pending'",
                        args![now, by, format!("halted: {why}")],
                    )
                    .map_err(StoreError::sql(context))?;
                if denied > 0 {
                    governance::bump(&mut *tx, "approvals").map_err(StoreError::sql(context))?;
                }
            }
            let state = query_halt(&mut *tx).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(state)
        })
        .await
    }

    pub async fn registry(&self) -> Result<Vec<RegistryRow>> {
        self.read(|conn| {
            conn.query_map(
                "SELECT name, state, approved_digest, definition, origin, updated_at_us, updated_by, why,
                     seen_digest, approved_definition
                 FROM registry ORDER BY name",
                &[],
                governance::registry_row,
            )
            .map_err(StoreError::sql("read registry"))
        })
        .await
    }

    pub async fn sync_builtins(&self, builtins: Vec<BuiltinDefinition>) -> Result<Vec<String>> {
        self.write(move |conn| {
            let context = "sync built-ins";
            let mut tx = conn.begin().map_err(StoreError::sql(context))?;
            let mut changed = Vec::new();
            let now = now_us();
            for b in builtins {
                let current: Option<(String, Option<String>, Option<String>)> = tx
                    .query_row(
                        "SELECT state, approved_digest, seen_digest FROM registry WHERE name = ?",
                        args![b.name],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()
                    .map_err(StoreError::sql(context))?;
                let why = match &current {
                    None => "built-in, approved from source",
                    Some((state, digest, _)) if state == RegistryState::Approved.as_str() && digest.as_deref() != Some(&b.digest) => {
                        "built-in definition changed with this release; approved from source"
                    }
                    // Withdrawn or unapproved by an operator: stays so, but the registry keeps
                    // the definition this release serves, for the operator to approve.
                    Some((_, _, seen)) => {
                        if seen.as_deref() != Some(&b.digest) {
                            tx.execute(
                                "UPDATE registry SET seen_digest = ?, definition = ? WHERE name = ?",
                                args![b.digest, b.definition, b.name],
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
                    args![b.name, b.digest, b.definition, now, why],
                )
                .map_err(StoreError::sql(context))?;
                tx.execute(
                    "INSERT INTO registry_history (at_us, name, from_state, to_state, digest, by, why,
                         approved_definition)
                     VALUES (?, ?, ?, 'approved', ?, 'aether', ?, ?)",
                    args![now, b.name, current.map(|c| c.0), b.digest, why, b.definition],
                )
                .map_err(StoreError::sql(context))?;
                changed.push(b.name);
            }
            if !changed.is_empty() {
                governance::bump(&mut *tx, "registry").map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(changed)
        })
        .await
    }
}

fn read_halt(conn: &mut dyn Conn) -> Result<HaltState> {
    query_halt(conn).map_err(StoreError::sql("read halt"))
}

/// Checks the store's audit: the chain (keyed under `options.key` where the store is keyed),
/// the witness's checkpoints, every receipt against its row. Reads only.
/// Verifies the audit in one snapshot of the store, so that rows appended or pruned while it
/// reads cannot show as a gap or a cut.
fn verify(conn: &mut dyn Conn, options: crate::VerifyOptions) -> Result<ChainReport> {
    let begin = match conn.dialect() {
        Dialect::Sqlite => "BEGIN DEFERRED",
        Dialect::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    };
    conn.batch(begin)
        .map_err(StoreError::sql("audit verify snapshot"))?;
    let report = verify_snapshot(conn, options);
    let ended = conn
        .batch("ROLLBACK")
        .map_err(StoreError::sql("audit verify snapshot"));
    let report = report?;
    ended?;
    Ok(report)
}

fn verify_snapshot(conn: &mut dyn Conn, options: crate::VerifyOptions) -> Result<ChainReport> {
    let context = "audit verify";
    let sql = StoreError::sql(context);
    let keying = ledger::read_keying(conn).map_err(sql)?;
    // Rows pruned by retention end at each chain's newest checkpoint: it goes on from there.
    let checkpoints = retention::latest_checkpoints(conn).map_err(StoreError::sql(context))?;
    let mut marker_problems = Vec::new();
    let mut keyed = None;
    match (&keying, &options.key) {
        (Some(k), Some(key)) => {
            if k.key_id != key.id() {
                return Err(StoreError::Invalid(format!(
                    "the audit is keyed under another vault key (key id {}, and the key given is {}): verify with the key file the store's Aether uses",
                    k.key_id,
                    key.id()
                )));
            }
            if !key.verify(&k.signed_text(), &k.mac) {
                marker_problems.push(ChainBreak {
                    seq: k.keyed_after_seq,
                    problem: "the audit's keying marker is not signed by the audit key (it was forged or changed)".into(),
                });
            }
            keyed = Some((k, key.clone()));
        }
        (Some(_), None) => {
            return Err(StoreError::Invalid(
                "the audit is keyed: verifying it needs the vault key (`vault.key_file`)".into(),
            ));
        }
        (None, Some(_)) => {
            let rows: i64 = conn
                .query_row("SELECT count(*) FROM audit", &[], |r| r.get(0))
                .map_err(StoreError::sql(context))?;
            if rows > 0 {
                marker_problems.push(ChainBreak {
                    seq: 0,
                    problem: "the audit has rows but no keying marker, and a key was given: the marker was removed (and the rows perhaps rewritten), or no Aether with the key has written here yet (any command that writes, e.g. `aether serve`, keys it)".into(),
                });
            }
        }
        (None, None) => {}
    }
    let mut witnessed: BTreeMap<String, Vec<crate::WitnessLine>> = BTreeMap::new();
    if let (Some(path), Some(key)) = (&options.witness, &options.key) {
        let store_id = keying.as_ref().map_or("", |k| k.store_id.as_str());
        let read = crate::Witness::read(path, key, store_id).map_err(|e| {
            StoreError::Invalid(format!("cannot read the witness {}: {e}", path.display()))
        })?;
        if let Some((lines, problems)) = read {
            if keying.is_none() && (!lines.is_empty() || !problems.is_empty()) {
                marker_problems.push(ChainBreak {
                    seq: 0,
                    problem: format!(
                        "the witness {} holds checkpoints, but the store's audit has no keying marker (it was removed, or the store replaced)",
                        path.display()
                    ),
                });
            } else {
                marker_problems.extend(
                    problems
                        .into_iter()
                        .map(|problem| ChainBreak { seq: 0, problem }),
                );
                // A marker older than one the witness saw was put back (a v1 marker's
                // signature from a backup would bring back the weaker v1 checks).
                let seen = lines.iter().map(|l| l.marker).max().unwrap_or(0);
                if keying.as_ref().is_some_and(|k| k.heads.is_none()) && seen >= 2 {
                    marker_problems.push(ChainBreak {
                        seq: 0,
                        problem: format!(
                            "the keying marker is a v1 marker, and the witness saw v{seen}: an older marker was put back"
                        ),
                    });
                }
                for line in lines {
                    witnessed.entry(line.chain.clone()).or_default().push(line);
                }
            }
        }
    }
    // One verifier per chain: every chain with rows, a checkpoint, or a witnessed head (a
    // chain the witness saw and the store lacks was removed whole).
    let mut verifiers: BTreeMap<String, ChainVerifier> = BTreeMap::new();
    let open = |chain: &str| -> ChainVerifier {
        let mut v = match checkpoints.iter().find(|c| c.chain == chain) {
            Some(c) => ChainVerifier::after(c),
            None => ChainVerifier::new(chain),
        };
        if let Some((k, key)) = &keyed {
            v.keyed(k, key.clone());
        }
        if let Some(lines) = witnessed.get(chain) {
            v.witness(&lines.iter().collect::<Vec<_>>());
        }
        v
    };
    // And every chain the keying marker names (a chain removed whole since is named gone).
    let marked = keyed
        .as_ref()
        .and_then(|(k, _)| k.heads.as_ref())
        .into_iter()
        .flatten()
        .map(|h| h.chain.clone());
    for chain in checkpoints
        .iter()
        .map(|c| c.chain.clone())
        .chain(witnessed.keys().cloned())
        .chain(marked)
    {
        verifiers.entry(chain).or_insert_with_key(|c| open(c));
    }
    conn.each(
        &format!("SELECT {AUDIT_COLUMNS} FROM audit ORDER BY chain, link"),
        &[],
        &mut |row| {
            let r = audit_record(row)?;
            verifiers
                .entry(r.chain.clone())
                .or_insert_with(|| open(&r.chain))
                .push(&r);
            Ok(())
        },
    )
    .map_err(StoreError::sql(context))?;
    let mut report = ChainReport::merge(verifiers.into_values().map(ChainVerifier::finish));
    if let Some((k, _)) = &keyed {
        report.keyed = Some(k.keyed_after_seq);
        // A v2 marker's heads are checked along their chains.
        if k.heads.is_none() {
            marker_problems.extend(
                keyed_row_problems(conn, k, &checkpoints).map_err(StoreError::sql(context))?,
            );
        }
    }
    report.breaks.splice(0..0, marker_problems);
    report.checkpoint = checkpoints.iter().max_by_key(|c| c.seq).cloned();
    report.checkpoints = checkpoints;
    let checked_after = match &keying {
        Some(k) => k.receipts_checked_after_seq,
        None => conn
            .query_row(
                "SELECT value FROM store_meta WHERE key = 'receipts_checked_after_seq'",
                &[],
                |r| r.get(0),
            )
            .optional()
            .map_err(StoreError::sql(context))?
            .unwrap_or(0),
    };
    check_receipts(conn, &mut report, checked_after).map_err(StoreError::sql(context))?;
    if let Some((seq, hash)) = options.expect_head {
        let found: Option<String> = conn
            .query_row("SELECT hash FROM audit WHERE seq = ?", args![seq], |r| {
                r.get(0)
            })
            .optional()
            .map_err(StoreError::sql(context))?;
        // A row still there must be the one expected, whatever any chain's retention passed;
        // a row gone is excused only where retention cut a chain at or past it.
        let pruned = || report.checkpoints.iter().any(|c| c.seq >= seq);
        let problem = match found {
            Some(h) if h != hash => Some(format!(
                "the expected head was {hash}, the row now hashes to {h} (rewritten)"
            )),
            Some(_) => None,
            None if pruned() => None,
            None => Some("the expected head row is gone".to_string()),
        };
        if let Some(problem) = problem {
            report.breaks.push(ChainBreak { seq, problem });
        }
    }
    Ok(report)
}

/// How long a paging reader waits for the commits in flight when it asked. A commit holds the
/// writers' lock for a few round trips; one held longer is a database that stalled.
const SETTLE_WAIT: Duration = Duration::from_secs(5);

/// The sequence number at or below which every audit row is committed or never will be, for a
/// reader paging on with `seq > cursor` (`None`: every committed row is settled).
///
/// SQLite's writers take turns, so numbers follow commit order. PostgreSQL's commits run side
/// by side (lanes and replicas hold the writers' lock shared) and draw numbers inside, so a row
/// can commit after one with a higher number, and a cursor moved past the later one would skip
/// it for good. Every number is drawn while its commit holds the writers' lock, so: read the
/// highest number drawn, then the transactions holding the lock, and wait for those to end.
/// Whatever they drew is then committed or rolled back, and what is drawn later is higher.
pub(super) fn settled_horizon(conn: &mut dyn Sql) -> Result<Option<i64>> {
    let context = "audit settled horizon";
    if conn.dialect() != Dialect::Postgres {
        return Ok(None);
    }
    let drawn: i64 = conn
        .query_row(
            "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM audit_seq",
            &[],
            |r| r.get(0),
        )
        .map_err(StoreError::sql(context))?;
    let holders: String = conn
        .query_row(
            &format!(
                "SELECT coalesce(string_agg(virtualtransaction, ','), '') FROM pg_locks
                 WHERE locktype = 'advisory' AND granted AND objsubid = 2
                   AND classid = {}::oid AND objid = hashtext(current_schema())::oid
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND pid <> pg_backend_pid()",
                crate::db::postgres::WRITE_LOCK
            ),
            &[],
            |r| r.get(0),
        )
        .map_err(StoreError::sql(context))?;
    if holders.is_empty() {
        return Ok(Some(drawn));
    }
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        // Each transaction holds the lock on its own virtual id until it ends.
        let open: i64 = conn
            .query_row(
                "SELECT count(*) FROM pg_locks
                 WHERE locktype = 'virtualxid' AND virtualxid = ANY(string_to_array(?, ','))",
                args![holders],
                |r| r.get(0),
            )
            .map_err(StoreError::sql(context))?;
        if open == 0 {
            return Ok(Some(drawn));
        }
        if started.elapsed() > SETTLE_WAIT {
            return Err(StoreError::Invalid(format!(
                "a commit to the audit has been open for over {} s, so rows after the cursor may still be coming; try again",
                SETTLE_WAIT.as_secs()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Marker v1: the row the store was keyed after must be where its signed marker says: in the table
/// with the marker's hash, or pruned behind a checkpoint (one cut exactly there names that
/// hash).
fn keyed_row_problems(
    conn: &mut dyn Sql,
    k: &Keying,
    checkpoints: &[Checkpoint],
) -> DbResult<Vec<ChainBreak>> {
    if k.keyed_after_seq == 0 {
        return Ok(Vec::new());
    }
    let found: Option<String> = conn
        .query_row(
            "SELECT hash FROM audit WHERE seq = ?",
            args![k.keyed_after_seq],
            |r| r.get(0),
        )
        .optional()?;
    let cut: Option<String> = conn
        .query_row(
            "SELECT hash FROM audit_checkpoints WHERE seq = ?",
            args![k.keyed_after_seq],
            |r| r.get(0),
        )
        .optional()?;
    let pruned_past = checkpoints.iter().any(|c| c.seq >= k.keyed_after_seq);
    let problem = match (found, cut) {
        // A row there is checked by its chain's verifier.
        (Some(_), _) => None,
        (None, Some(hash)) if hash != k.keyed_after_hash => Some(
            "the chain before the audit was keyed does not end where its signed marker says"
                .to_string(),
        ),
        (None, Some(_)) => None,
        (None, None) if pruned_past => None,
        (None, None) => Some(format!(
            "row {} (the last before the audit was keyed) is gone: rows were cut",
            k.keyed_after_seq
        )),
    };
    Ok(problem
        .into_iter()
        .map(|problem| ChainBreak {
            seq: k.keyed_after_seq,
            problem,
        })
        .collect())
}

/// Every receipt against the audit (a join the query planner indexes on the fly).
fn check_receipts(
    conn: &mut dyn Sql,
    report: &mut ChainReport,
    checked_after: i64,
) -> DbResult<()> {
    let settled_before = now_us() - SETTLE_US;
    let liveness = Liveness::read(conn)?;
    // The other way round: a row of an admitted call (a call's row with no refusing step) must
    // have its receipt, or someone removed the receipt, or wrote the row. A side-effect-free
    // call's row is its only record (`single`, covered by the row's keyed hash). Every writer
    // chain's row is checked whatever its number (chains came after receipts, and a row hashed
    // without its number could be renumbered below the mark).
    conn.each(
        "SELECT a.seq, a.call_id FROM audit a LEFT JOIN receipts r ON r.call_id = a.call_id
         WHERE a.step IS NULL AND a.transport <> 'operator' AND a.single = 0 AND r.call_id IS NULL
           AND (a.seq > ? OR a.chain <> '')
         ORDER BY a.seq LIMIT 100",
        args![checked_after],
        &mut |r| {
            let (seq, call_id): (i64, String) = (r.get(0)?, r.get(1)?);
            report.mismatched.push(ChainBreak {
                seq,
                problem: format!("call {call_id} is audited as admitted but has no receipt"),
            });
            Ok(())
        },
    )?;
    conn.each(
        "SELECT r.call_id, r.at_us, r.tool, r.definition, r.arguments,
                count(a.seq), min(a.tool), min(a.definition), min(a.arguments_digest), r.writer
         FROM receipts r LEFT JOIN audit a ON a.call_id = r.call_id
         GROUP BY r.call_id ORDER BY r.call_id",
        &[],
        &mut |r| receipt_against_audit(r, settled_before, &liveness, report),
    )
}

/// One receipt (with its audit rows' count and fields) checked into `report`.
fn receipt_against_audit(
    r: &Row,
    settled_before: i64,
    liveness: &Liveness,
    report: &mut ChainReport,
) -> DbResult<()> {
    report.receipts += 1;
    let call_id: String = r.get(0)?;
    let audited: i64 = r.get(5)?;
    if audited == 0 {
        let writer: Option<String> = r.get(9)?;
        let missing = match liveness.class(writer.as_deref()) {
            ledger::Unaudited::Running => {
                report.in_flight += 1;
                false
            }
            ledger::Unaudited::Interrupted => {
                report.interrupted += 1;
                false
            }
            ledger::Unaudited::Missing => true,
            ledger::Unaudited::Unknown => r.get::<i64>(1)? < settled_before,
        };
        if missing && report.unaudited.len() < 100 {
            report.unaudited.push(call_id);
        } else if !missing && writer.is_none() {
            report.in_flight += 1;
        }
        return Ok(());
    }
    let same = r.get::<String>(2)? == r.get::<String>(6)?
        && Some(r.get::<String>(3)?) == r.get::<Option<String>>(7)?
        && r.get::<String>(4)? == r.get::<String>(8)?;
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
    Ok(())
}

/// The ledger of a store opened for writing: keyed under `key` (keying it now if it is not
/// yet), or plain for a store never keyed; a keyed store opened without its key may not
/// append audit rows.
fn open_ledger(conn: &mut dyn Conn, key: Option<AuditKey>, shown: &str) -> Result<Ledger> {
    match key {
        Some(key) => {
            let keying = ledger::key_store(conn, &key, shown)?;
            Ok(Ledger::new(Hashing::Keyed(key), Some(keying), None))
        }
        None => {
            let keying = ledger::read_keying(conn).map_err(StoreError::sql("open"))?;
            let foreign = keying.as_ref().map(|_| {
                format!("the audit of {shown} is keyed: this process was opened without the vault key, so it may not write audit rows")
            });
            Ok(Ledger::new(Hashing::Plain, keying, foreign))
        }
    }
}

/// The audit's newest row, of any chain: its sequence number and hash.
pub(super) fn newest_row(conn: &mut dyn Sql) -> DbResult<Option<(i64, String)>> {
    conn.query_row(
        "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
        &[],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Where chain `chain` goes on from (link and hash): its `newest` row, else (every row of
/// it pruned) its newest checkpoint, else its start.
fn chain_tip(
    conn: &mut dyn Sql,
    chain: &str,
    newest: Option<(i64, String)>,
) -> DbResult<(i64, String)> {
    Ok(match newest {
        Some(tip) => tip,
        None => retention::latest_checkpoint_of(conn, chain)?
            .map(|c| (c.link, c.hash))
            .unwrap_or((0, GENESIS.to_string())),
    })
}

/// Where a batch's audit rows go: their chain's newest row (`None`: none yet) and a sequence
/// number for each.
struct Place {
    newest: Option<(i64, String)>,
    seqs: Vec<i64>,
}

/// The SQL of the sequence numbers of `n` rows: PostgreSQL draws them from a sequence (no
/// writer waits for another's), as text `a,b,c`; SQLite, whose writers take turns, gives the
/// highest so far.
fn seqs_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => {
            "(SELECT string_agg(v::text, ',') FROM
                (SELECT nextval('audit_seq') AS v FROM generate_series(1, CAST(? AS BIGINT))) s)"
        }
        Dialect::Sqlite => {
            "max(coalesce((SELECT max(seq) FROM audit), 0),
                 coalesce((SELECT max(seq) FROM audit_checkpoints), 0))"
        }
    }
}

fn seqs_args(dialect: Dialect, n: usize) -> Vec<Arg<'static>> {
    match dialect {
        Dialect::Postgres => vec![Arg::Int(n as i64)],
        Dialect::Sqlite => Vec::new(),
    }
}

/// PostgreSQL's sequence numbers as [`seqs_sql`] answers them (`a,b,c`), in order: `n` of them.
fn parse_seqs(text: Option<String>, n: usize) -> DbResult<Vec<i64>> {
    let mut seqs: Vec<i64> = text
        .unwrap_or_default()
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    seqs.sort_unstable();
    if seqs.len() != n {
        return Err(DbError::Refused(format!(
            "the audit sequence gave {} numbers for {n} rows",
            seqs.len()
        )));
    }
    Ok(seqs)
}

fn read_seqs(dialect: Dialect, r: &Row, i: usize, n: usize) -> DbResult<Vec<i64>> {
    Ok(match dialect {
        Dialect::Postgres => parse_seqs(r.get(i)?, n)?,
        Dialect::Sqlite => {
            let highest: i64 = r.get(i)?;
            (highest + 1..=highest + n as i64).collect()
        }
    })
}

/// [`Place`] for `n` rows of chain `chain`, in one statement.
fn place(conn: &mut dyn Sql, chain: &str, n: usize) -> DbResult<Place> {
    let dialect = conn.dialect();
    let mut bound = args![chain, chain].to_vec();
    bound.extend(seqs_args(dialect, n));
    conn.query_row(
        &format!(
            "SELECT (SELECT link FROM audit WHERE chain = ? ORDER BY link DESC LIMIT 1),
                    (SELECT hash FROM audit WHERE chain = ? ORDER BY link DESC LIMIT 1),
                    {}",
            seqs_sql(dialect)
        ),
        &bound,
        |r| {
            Ok(Place {
                newest: newest_of(r, 0)?,
                seqs: read_seqs(dialect, r, 2, n)?,
            })
        },
    )
}

fn newest_of(r: &Row, i: usize) -> DbResult<Option<(i64, String)>> {
    Ok(
        match (r.get::<Option<i64>>(i)?, r.get::<Option<String>>(i + 1)?) {
            (Some(link), Some(hash)) => Some((link, hash)),
            _ => None,
        },
    )
}

/// The halt read (`halt`) and the [`Place`] of `n` rows of chain `chain`, as one PostgreSQL
/// statement with every value inline and every column text (for
/// [`Conn::begin_shared_then`]); `None` when neither is needed, or the chain's name is not
/// one Aether makes (a writer id: hex digits, dashes, a slash).
fn inline_halt_and_place(chain: &str, halt: bool, n: usize) -> Option<String> {
    let safe = !chain.is_empty()
        && chain
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == '-' || c == '/');
    if !safe || (!halt && n == 0) {
        return None;
    }
    let mut columns = Vec::new();
    if halt {
        columns.push("CAST(h.halted AS TEXT), h.by, h.why, CAST(h.at_us AS TEXT)".to_string());
    }
    if n > 0 {
        columns.push(format!(
            "CAST((SELECT link FROM audit WHERE chain = '{chain}' ORDER BY link DESC LIMIT 1) AS TEXT),
             (SELECT hash FROM audit WHERE chain = '{chain}' ORDER BY link DESC LIMIT 1),
             (SELECT string_agg(v::text, ',') FROM
                (SELECT nextval('audit_seq') AS v FROM generate_series(1, {n})) s)"
        ));
    }
    let from = if halt {
        " FROM halt h WHERE h.id = 1"
    } else {
        ""
    };
    Some(format!("SELECT {}{from}", columns.join(", ")))
}

/// What [`inline_halt_and_place`]'s statement answered.
fn parse_halt_and_place(
    cols: &[Option<String>],
    halt: bool,
    n: usize,
) -> DbResult<(Option<HaltState>, Option<Place>)> {
    let bad = || DbError::Refused("the halt and audit place read answered in another shape".into());
    let int = |i: usize| -> DbResult<Option<i64>> {
        match cols.get(i).ok_or_else(bad)? {
            Some(v) => v.parse().map(Some).map_err(|_| bad()),
            None => Ok(None),
        }
    };
    let text = |i: usize| -> DbResult<Option<String>> { Ok(cols.get(i).ok_or_else(bad)?.clone()) };
    let mut at = 0;
    let state = if halt {
        at = 4;
        Some(HaltState {
            halted: int(0)?.ok_or_else(bad)? != 0,
            by: text(1)?,
            why: text(2)?,
            at_us: int(3)?,
        })
    } else {
        None
    };
    let place = if n > 0 {
        let newest = match (int(at)?, text(at + 1)?) {
            (Some(link), Some(hash)) => Some((link, hash)),
            _ => None,
        };
        Some(Place {
            newest,
            seqs: parse_seqs(text(at + 2)?, n)?,
        })
    } else {
        None
    };
    Ok((state, place))
}

/// The halt flag and, for `n` audit rows of chain `chain`, their [`Place`], in one
/// statement: with a database across a network, each statement is a round trip.
fn query_halt_and_place(conn: &mut dyn Sql, chain: &str, n: usize) -> DbResult<(HaltState, Place)> {
    let dialect = conn.dialect();
    conn.query_row(
        &halt_and_place_sql(dialect),
        &halt_and_place_args(dialect, chain, n),
        |r| halt_and_place(dialect, r, n),
    )
}

fn halt_and_place_sql(dialect: Dialect) -> String {
    format!(
        "SELECT h.halted, h.by, h.why, h.at_us,
                (SELECT link FROM audit WHERE chain = ? ORDER BY link DESC LIMIT 1),
                (SELECT hash FROM audit WHERE chain = ? ORDER BY link DESC LIMIT 1),
                {}
         FROM halt h WHERE h.id = 1",
        seqs_sql(dialect)
    )
}

fn halt_and_place_args(dialect: Dialect, chain: &str, n: usize) -> Vec<Arg<'_>> {
    let mut bound = vec![Arg::Text(chain), Arg::Text(chain)];
    bound.extend(seqs_args(dialect, n));
    bound
}

fn halt_and_place(dialect: Dialect, r: &Row, n: usize) -> DbResult<(HaltState, Place)> {
    Ok((
        HaltState {
            halted: r.get(0)?,
            by: r.get(1)?,
            why: r.get(2)?,
            at_us: r.get(3)?,
        },
        Place {
            newest: newest_of(r, 4)?,
            seqs: read_seqs(dialect, r, 6, n)?,
        },
    ))
}

pub(super) fn query_halt(conn: &mut dyn Sql) -> DbResult<HaltState> {
    conn.query_row(
        "SELECT halted, by, why, at_us FROM halt WHERE id = 1",
        &[],
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
     outcome, step, rule, reason, definition, arguments_digest, arguments, result, duration_us, prev_hash, hash, single, \
     chain, link, trace, subject";

/// How many columns [`AUDIT_COLUMNS`] names (and [`bind_audit`] binds).
const AUDIT_ARITY: usize = 26;

fn audit_record(r: &Row) -> DbResult<AuditRecord> {
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
            single: r.get(21)?,
            trace: r.get(24)?,
            subject: r.get(25)?,
        },
        prev_hash: r.get(19)?,
        hash: r.get(20)?,
        chain: r.get(22)?,
        link: r.get(23)?,
    })
}

/// A writer: commits the jobs waiting in `jobs` as one transaction at a time, its audit rows
/// appended to chain `chain`. Several writers may share `jobs` (each takes what is waiting
/// when it is free).
fn run_writer(
    conn: Arc<Mutex<Box<dyn Conn>>>,
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    location: &str,
    ledger: &Ledger,
    chain: &str,
    mut flight: Option<db::postgres::PgFlight>,
) {
    // Not known until the lane's first commit reads it.
    let mut tip: Tip = None;
    loop {
        let queue = jobs.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(first) = queue.recv() else {
            return;
        };
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
                // interrupted is committed (and might write the lane's chain).
                Job::Other(f) => {
                    tip = None;
                    f(&mut **conn)
                }
            }
            if receipts.len() + audits.len() + journals.len() < MAX_BATCH {
                next = queue.try_recv().ok();
            }
        }
        // The next writer sharing the queue takes what arrives while this one commits.
        drop(queue);
        if !receipts.is_empty() || !audits.is_empty() || !journals.is_empty() {
            commit_batch(
                &mut **conn,
                flight.as_mut(),
                &mut tip,
                ledger,
                chain,
                receipts,
                audits,
                journals,
                location,
            );
        }
    }
}

/// What one committed batch produced.
struct Batch {
    /// The halt state met, if halted (no receipt was written).
    halt: Option<HaltState>,
    /// The audit rows' sequence numbers.
    seqs: Vec<i64>,
    /// For each audit row, whether it was a result withheld because of the halt.
    withheld: Vec<bool>,
    /// Each journal write's entry ids.
    /// Each journal write's entry ids; `None` for one whose receipt met a halt (not written).
    journal_ids: Vec<Option<Vec<i64>>>,
}

/// Appends `events` to this process's audit chain inside `tx` (its tip read there: only this
/// process writes it, one transaction at a time). Returns their sequence numbers.
pub(super) fn append_audit(
    tx: &mut dyn Sql,
    ledger: &Ledger,
    events: &[&AuditEvent],
) -> DbResult<Vec<i64>> {
    append_audit_at(tx, ledger, &ledger.writer.id, events, None)
}

/// [`append_audit`] with the rows' [`Place`] already read in this transaction, saving a
/// round trip.
fn append_audit_at(
    tx: &mut dyn Sql,
    ledger: &Ledger,
    chain: &str,
    events: &[&AuditEvent],
    place: Option<Place>,
) -> DbResult<Vec<i64>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    ledger.check_writable()?;
    let Place { newest, seqs } = match place {
        Some(place) => place,
        None => self::place(tx, chain, events.len())?,
    };
    let tip = chain_tip(tx, chain, newest)?;
    // Each row's place in the chain, then the rows in as few statements as the database
    // takes: with replicas, every statement is a round trip.
    let links = link_rows(ledger, chain, tip, events, Some(&seqs));
    let rows: Vec<_> = events.iter().zip(&links).collect();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut bound = Vec::with_capacity(chunk.len() * AUDIT_ARITY);
        for (e, link) in chunk {
            bind_audit(&mut bound, chain, e, link);
        }
        tx.execute(
            &format!(
                "INSERT INTO audit ({AUDIT_COLUMNS}) VALUES {}",
                tuples(chunk.len(), AUDIT_ARITY)
            ),
            &bound,
        )?;
    }
    Ok(seqs)
}

/// One audit row's place in its chain: sequence number, link, the hash before it, its hash.
type Link = (i64, i64, String, String);

/// Where a chain ends once `links` are appended after `before` (link and hash).
fn tip_after(links: &[Link], before: (i64, String)) -> (i64, String) {
    links
        .last()
        .map(|(_, link, _, hash)| (*link, hash.clone()))
        .unwrap_or(before)
}

/// The places of `events` in chain `chain` after its tip `(link, hash)`, with sequence
/// numbers `seqs`, each hashed the way `ledger` hashes; `seqs` `None`: hashed without their
/// numbers, which the INSERT draws (each [`Link`]'s number is then 0).
fn link_rows(
    ledger: &Ledger,
    chain: &str,
    (mut link, mut prev): (i64, String),
    events: &[&AuditEvent],
    seqs: Option<&[i64]>,
) -> Vec<Link> {
    let key = ledger.hashing.key();
    let mut links = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        link += 1;
        let seq = seqs.map(|seqs| seqs[i]);
        let hash = crate::chain::link_hash(key, chain, link, seq, &prev, e);
        links.push((
            seq.unwrap_or(0),
            link,
            std::mem::replace(&mut prev, hash.clone()),
            hash,
        ));
    }
    links
}

/// Binds audit row `e` of chain `chain` at `link`, in [`AUDIT_COLUMNS`]' order.
fn bind_audit<'a>(bound: &mut Vec<Arg<'a>>, chain: &'a str, e: &'a AuditEvent, link: &'a Link) {
    bound.push(Arg::Int(link.0));
    bind_audit_unnumbered(bound, chain, e, link);
}

/// [`bind_audit`] without the sequence number (drawn by the INSERT).
fn bind_audit_unnumbered<'a>(
    bound: &mut Vec<Arg<'a>>,
    chain: &'a str,
    e: &'a AuditEvent,
    link: &'a Link,
) {
    let (_, link, prev, hash) = link;
    bound.extend_from_slice(args![
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
        *prev,
        *hash,
        e.single,
        *chain,
        *link,
        e.trace,
        e.subject
    ]);
}

/// Binds receipt `r` admitted by `writer`, in [`ledger::RECEIPT_COLUMNS`]' order.
fn bind_receipt<'a>(bound: &mut Vec<Arg<'a>>, r: &'a AdmissionReceipt, writer: &'a str) {
    bound.extend_from_slice(args![
        r.call_id,
        r.at_us,
        r.session,
        r.transport,
        r.agent,
        r.tool,
        r.definition,
        r.arguments,
        r.decision,
        *writer
    ]);
}

/// Rows one multi-row INSERT carries at most (well under either database's limit on
/// parameters).
const ROWS_PER_INSERT: usize = 256;

/// `(?, ?), (?, ?)` for `rows` rows of `columns` values.
fn tuples(rows: usize, columns: usize) -> String {
    let one = format!("({})", vec!["?"; columns].join(", "));
    vec![one; rows].join(", ")
}

/// The batch's receipts, in as few statements as the database takes, each naming this
/// process as its writer (registered in the same transaction the first time).
fn insert_receipts(
    tx: &mut dyn Sql,
    ledger: &Ledger,
    receipts: &[&AdmissionReceipt],
) -> DbResult<()> {
    ledger.register(tx)?;
    let writer = ledger.writer.id.as_str();
    for chunk in receipts.chunks(ROWS_PER_INSERT) {
        let mut bound = Vec::with_capacity(chunk.len() * 10);
        for r in chunk {
            bind_receipt(&mut bound, r, writer);
        }
        tx.execute(
            &format!(
                "INSERT INTO receipts ({}) VALUES {}",
                ledger::RECEIPT_COLUMNS,
                tuples(chunk.len(), 10)
            ),
            &bound,
        )?;
    }
    Ok(())
}

fn write_batch(
    conn: &mut dyn Conn,
    ledger: &Ledger,
    chain: &str,
    receipts: &[&AdmissionReceipt],
    audits: &[&AuditEvent],
    journals: &[&JournalWrite],
) -> DbResult<Batch> {
    // A side-effect-free call is admitted by its only record: one that hands the caller a
    // result meets the halt here, as a receipt does; so does a journal write carrying its
    // call's receipt.
    let answers = |e: &AuditEvent| e.single && (e.outcome == "ok" || e.outcome == "tool_error");
    let riding = journals.iter().any(|j| !j.receipts.is_empty());
    let need_halt = !receipts.is_empty() || riding || audits.iter().any(|e| answers(e));
    // The lock is shared with other writers' batches (each appends to its own chain) and
    // excluded by a halt. The halt and the audit rows' place are read in one statement, sent
    // with BEGIN and the lock where the database takes that: with a database across a
    // network, each message is a round trip.
    let (mut tx, first) = match inline_halt_and_place(chain, need_halt, audits.len()) {
        Some(sql) => conn.begin_shared_then(&sql)?,
        None => (conn.begin_shared()?, None),
    };
    let (state, mut place) = match first {
        Some(cols) => parse_halt_and_place(&cols, need_halt, audits.len())?,
        None if !need_halt => (None, None),
        None if audits.is_empty() => (Some(query_halt(&mut *tx)?), None),
        None => {
            let (state, at) = query_halt_and_place(&mut *tx, chain, audits.len())?;
            (Some(state), Some(at))
        }
    };
    let halt = state.filter(|s| s.halted);
    let mut journal_ids = Vec::with_capacity(journals.len());
    let mut registered = false;
    for j in journals {
        if j.receipts.is_empty() {
            journal_ids.push(Some(journal::write(&mut *tx, j)?));
        } else if halt.is_none() {
            insert_receipts(&mut *tx, ledger, &j.receipts.iter().collect::<Vec<_>>())?;
            registered = true;
            journal_ids.push(Some(journal::write(&mut *tx, j)?));
        } else {
            journal_ids.push(None);
        }
    }
    if !receipts.is_empty() && halt.is_none() {
        insert_receipts(&mut *tx, ledger, receipts)?;
        registered = true;
    }
    let withheld: Vec<bool> = audits
        .iter()
        .map(|e| halt.is_some() && answers(e))
        .collect();
    let seqs = match (&halt, withheld.iter().any(|w| *w)) {
        (Some(state), true) => {
            let rows: Vec<AuditEvent> = audits
                .iter()
                .zip(&withheld)
                .map(|(e, w)| match w {
                    true => withheld_by_halt(e, state),
                    false => (*e).clone(),
                })
                .collect();
            append_audit_at(
                &mut *tx,
                ledger,
                chain,
                &rows.iter().collect::<Vec<_>>(),
                place.take(),
            )?
        }
        _ => append_audit_at(&mut *tx, ledger, chain, audits, place.take())?,
    };
    tx.commit()?;
    if registered {
        ledger.registered();
    }
    Ok(Batch {
        halt,
        seqs,
        withheld,
        journal_ids,
    })
}

/// The row of a side-effect-free call that met a committed halt: refused, its result withheld.
fn withheld_by_halt(e: &AuditEvent, halt: &HaltState) -> AuditEvent {
    let mut e = e.clone();
    e.outcome = "refused".into();
    e.step = Some("halt".into());
    e.rule = Some("halt".into());
    e.reason = Some(format!(
        "Aether was halted{} before the call's record was written; its result was withheld",
        halt.why
            .as_deref()
            .map(|w| format!(" ({w})"))
            .unwrap_or_default()
    ));
    e.result = String::new();
    e
}

/// A halt state for a write refused by a halt whose state was not kept (does not happen: a
/// batch that refused a write kept the state it met).
fn unknown_halt() -> HaltState {
    HaltState {
        halted: true,
        by: None,
        why: None,
        at_us: None,
    }
}

fn receipt_outcome(halt: &Option<HaltState>) -> ReceiptOutcome {
    match halt {
        Some(state) => ReceiptOutcome::Halted(state.clone()),
        None => ReceiptOutcome::Durable,
    }
}

/// A lane's chain tip (link and hash) as its last commit left it: known only while every
/// commit of the lane went through [`commit_in_flight`] and its outcome is known (only the
/// lane writes its chain).
type Tip = Option<(i64, String)>;

/// The SQLSTATE `aether_refuse_if_halted()` raises (migration 0014).
const HALTED_STATE: &str = "AEH01";

/// Commits `receipts` and `audits` in one flight where the lane knows its chain's `tip`, else
/// in two; `Ok(None)`, having written nothing, when it cannot: a halt was committed (the
/// usual way refuses the receipts and withholds the results), this process is not yet
/// registered as a writer, or may not write the audit. `tip` is left as this commit leaves
/// the chain, or unknown.
///
/// One flight ([`commit_once`]): BEGIN, the shared lock, the halt guard, the rows (their
/// sequence numbers drawn by the INSERT, so hashed without them) and COMMIT. Two flights: BEGIN
/// with the lock and the halt, chain tip and sequence numbers' read; then the rows with COMMIT.
fn commit_in_flight(
    flight: &mut db::postgres::PgFlight,
    conn: &mut dyn Conn,
    ledger: &Ledger,
    chain: &str,
    tip: &mut Tip,
    receipts: &[&AdmissionReceipt],
    audits: &[&AuditEvent],
) -> DbResult<Option<Batch>> {
    let known = tip.take();
    if ledger.foreign.is_some() || (!receipts.is_empty() && !ledger.is_registered()) {
        return Ok(None);
    }
    if let Some(known) = known {
        match commit_once(flight, ledger, chain, known, receipts, audits) {
            Ok(Some((batch, after))) => {
                *tip = Some(after);
                return Ok(Some(batch));
            }
            Ok(None) => return Ok(None),
            // The server refused the flight (nothing of it is kept): say why, and commit it
            // the two-flight way, which reads the tip again.
            Err(DbError::Postgres(e)) if e.as_db_error().is_some() => {
                tracing::warn!(chain, error = %DbError::Postgres(e), "one-flight commit refused; committing in two");
            }
            Err(e) => return Err(e),
        }
    }
    let n = audits.len();
    let dialect = Dialect::Postgres;
    let first = flight.begin_with(
        &halt_and_place_sql(dialect),
        &halt_and_place_args(dialect, chain, n),
    )?;
    let (state, place) = match halt_and_place(dialect, &first, n) {
        Ok(read) => read,
        Err(e) => {
            flight.rollback();
            return Err(e);
        }
    };
    if state.halted {
        flight.rollback();
        return Ok(None);
    }
    let tip_now = match place.newest {
        Some(tip) => tip,
        // A chain with no row yet (or every row pruned): read where it starts.
        None => match chain_tip(conn, chain, None) {
            Ok(tip) => tip,
            Err(e) => {
                flight.rollback();
                return Err(e);
            }
        },
    };
    let links = link_rows(ledger, chain, tip_now.clone(), audits, Some(&place.seqs));
    // Both INSERTs and COMMIT sent together: one round trip.
    let inserts = Inserts::new(ledger, chain, receipts, audits, &links, false);
    let counts = flight.commit_with(&inserts.statements())?;
    let expected: Vec<u64> = [receipts.len(), n]
        .into_iter()
        .filter(|k| *k > 0)
        .map(|k| k as u64)
        .collect();
    if counts != expected {
        return Err(DbError::Refused(format!(
            "a commit wrote {counts:?} rows where {expected:?} were sent"
        )));
    }
    *tip = Some(tip_after(&links, tip_now));
    Ok(Some(Batch {
        halt: None,
        seqs: place.seqs,
        withheld: vec![false; n],
        journal_ids: Vec::new(),
    }))
}

/// A batch's INSERTs as a lane's flight sends them: its receipts, then its audit rows at
/// `links`, each statement only where there are rows.
struct Inserts<'a> {
    receipts_sql: String,
    audits_sql: String,
    bound: Vec<Arg<'a>>,
    receipts: usize,
    audits: usize,
}

impl<'a> Inserts<'a> {
    /// `drawn`: the rows' numbers are drawn by the INSERT (each row's number as it is
    /// inserted, in the order of its link, while the transaction holds the writers' lock,
    /// which is what `settled_horizon` counts on), which answers each row's link and number;
    /// else they are the links' own.
    fn new(
        ledger: &'a Ledger,
        chain: &'a str,
        receipts: &[&'a AdmissionReceipt],
        audits: &[&'a AuditEvent],
        links: &'a [Link],
        drawn: bool,
    ) -> Inserts<'a> {
        let (r, n) = (receipts.len(), audits.len());
        let writer = ledger.writer.id.as_str();
        let mut bound = Vec::with_capacity(r * 10 + n * AUDIT_ARITY);
        for receipt in receipts {
            bind_receipt(&mut bound, receipt, writer);
        }
        for (e, link) in audits.iter().zip(links) {
            match drawn {
                true => bind_audit_unnumbered(&mut bound, chain, e, link),
                false => bind_audit(&mut bound, chain, e, link),
            }
        }
        let audits_sql = match drawn {
            true => {
                let row = format!(
                    "(nextval('audit_seq'), {})",
                    vec!["?"; AUDIT_ARITY - 1].join(", ")
                );
                format!(
                    "INSERT INTO audit ({AUDIT_COLUMNS}) VALUES {} RETURNING link, seq",
                    vec![row; n].join(", ")
                )
            }
            false => format!(
                "INSERT INTO audit ({AUDIT_COLUMNS}) VALUES {}",
                tuples(n, AUDIT_ARITY)
            ),
        };
        Inserts {
            receipts_sql: format!(
                "INSERT INTO receipts ({}) VALUES {}",
                ledger::RECEIPT_COLUMNS,
                tuples(r, 10)
            ),
            audits_sql,
            bound,
            receipts: r,
            audits: n,
        }
    }

    fn statements(&self) -> Vec<(&str, &[Arg<'a>])> {
        let (receipt_args, audit_args) = self.bound.split_at(self.receipts * 10);
        let mut statements: Vec<(&str, &[Arg<'a>])> = Vec::with_capacity(2);
        if self.receipts > 0 {
            statements.push((&self.receipts_sql, receipt_args));
        }
        if self.audits > 0 {
            statements.push((&self.audits_sql, audit_args));
        }
        statements
    }
}

/// [`commit_in_flight`]'s one flight, after the chain's tip `known`: the batch and the tip it
/// leaves, or `None` (nothing written) when a halt is committed.
fn commit_once(
    flight: &mut db::postgres::PgFlight,
    ledger: &Ledger,
    chain: &str,
    known: (i64, String),
    receipts: &[&AdmissionReceipt],
    audits: &[&AuditEvent],
) -> DbResult<Option<(Batch, (i64, String))>> {
    let n = audits.len();
    let links = link_rows(ledger, chain, known.clone(), audits, None);
    let inserts = Inserts::new(ledger, chain, receipts, audits, &links, true);
    let Some(answers) = flight.commit_once(
        "SELECT aether_refuse_if_halted()",
        HALTED_STATE,
        &inserts.statements(),
    )?
    else {
        return Ok(None);
    };
    let mut drawn: Vec<(i64, i64)> = Vec::with_capacity(n);
    if n > 0 {
        for r in answers.last().into_iter().flatten() {
            drawn.push((r.get(0)?, r.get(1)?));
        }
    }
    drawn.sort_unstable();
    let sent: Vec<i64> = links.iter().map(|(_, link, _, _)| *link).collect();
    if drawn.iter().map(|(link, _)| *link).collect::<Vec<_>>() != sent {
        return Err(DbError::Refused(format!(
            "a commit wrote audit links {:?} where {sent:?} were sent",
            drawn.iter().map(|(link, _)| link).collect::<Vec<_>>()
        )));
    }
    let after = tip_after(&links, known);
    Ok(Some((
        Batch {
            halt: None,
            seqs: drawn.into_iter().map(|(_, seq)| seq).collect(),
            withheld: vec![false; n],
            journal_ids: Vec::new(),
        },
        after,
    )))
}

#[allow(clippy::too_many_arguments)]
fn commit_batch(
    conn: &mut dyn Conn,
    flight: Option<&mut db::postgres::PgFlight>,
    tip: &mut Tip,
    ledger: &Ledger,
    chain: &str,
    receipts: Vec<(AdmissionReceipt, Reply<ReceiptOutcome>)>,
    audits: Vec<(Box<AuditEvent>, Reply<Audited>)>,
    journals: Vec<(JournalWrite, Reply<Vec<i64>>)>,
    location: &str,
) {
    let written = {
        let r: Vec<&AdmissionReceipt> = receipts.iter().map(|(r, _)| r).collect();
        let a: Vec<&AuditEvent> = audits.iter().map(|(a, _)| &**a).collect();
        let j: Vec<&JournalWrite> = journals.iter().map(|(j, _)| j).collect();
        let started = std::time::Instant::now();
        let knew_tip = tip.is_some();
        let written = match flight {
            Some(flight) if j.is_empty() => {
                match commit_in_flight(flight, conn, ledger, chain, tip, &r, &a) {
                    Ok(Some(batch)) => Ok(batch),
                    // Halted, or not yet registered: the usual way.
                    Ok(None) => write_batch(conn, ledger, chain, &r, &a, &j),
                    Err(e) => Err(e),
                }
            }
            _ => {
                *tip = None;
                write_batch(conn, ledger, chain, &r, &a, &j)
            }
        };
        tracing::debug!(
            chain,
            receipts = r.len(),
            audits = a.len(),
            journals = j.len(),
            knew_tip,
            us = started.elapsed().as_micros() as u64,
            "group commit"
        );
        written
    };
    match written {
        Ok(batch) => {
            for (_, reply) in receipts {
                let _ = reply.send(Ok(receipt_outcome(&batch.halt)));
            }
            for (((_, reply), seq), withheld) in
                audits.into_iter().zip(batch.seqs).zip(batch.withheld)
            {
                let halt = withheld.then(|| batch.halt.clone()).flatten();
                let _ = reply.send(Ok((seq, halt)));
            }
            for ((_, reply), ids) in journals.into_iter().zip(batch.journal_ids) {
                let _ = reply.send(ids.ok_or_else(|| {
                    StoreError::Halted(batch.halt.clone().unwrap_or_else(unknown_halt))
                }));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "store write failed");
            // Callers tell a database that went away (worth waiting for) from a refused write.
            let (unreachable, detail) = (e.is_unreachable(), e.to_string());
            let error = || match unreachable {
                true => StoreError::Unreachable {
                    location: location.to_string(),
                    detail: detail.clone(),
                },
                false => StoreError::Write(detail.clone()),
            };
            for (_, reply) in receipts {
                let _ = reply.send(Err(error()));
            }
            for (_, reply) in audits {
                let _ = reply.send(Err(error()));
            }
            for (_, reply) in journals {
                let _ = reply.send(Err(error()));
            }
        }
    }
}
