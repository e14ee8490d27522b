//! The ledger's bookkeeping: how this store's audit is keyed, which process (writer) admitted
//! each call, and what a crash left unfinished.
//!
//! Every receipt names its writer; a writer's row says whether its process is alive (a
//! heartbeat every few seconds, its host and process id with the kernel's start time of that
//! process, a clean stop). A receipt with no audit row is a running call while its writer
//! lives, and an interrupted one once it is gone: the next start records it as
//! `interrupted` ([`SqlStore::unfinished`], [`SqlStore::record_interrupted`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{SqlStore, append_audit};
use crate::chain::{ChainHead, Form, Hashing, Keying};
use crate::db::{Conn, DbError, DbResult, Dialect, Optional, Row, Sql, SqlExt, args};
use crate::{
    AdmissionReceipt, AuditEvent, AuditKey, JournalEntry, Result, SETTLE_US, StoreError, now_us,
};

/// A writer on another host whose heartbeat is older than this is gone (one on this host is
/// known gone at once when its process is, and alive while it is).
pub const WRITER_LAPSE_US: i64 = 60 * 1_000_000;

/// How far before a crashed writer's last heartbeat its journalled writes are looked at again.
const REDO_MARGIN_US: i64 = 120 * 1_000_000;

/// How often a serving process renews its heartbeat (and the witness's checkpoint).
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(5);

/// How this process's store writes its audit, and who it is as a writer.
pub(crate) struct Ledger {
    pub hashing: Hashing,
    /// The store is keyed under a key this process was not given: it may not append rows
    /// (they would break the chain for `verify`).
    pub foreign: Option<String>,
    pub keying: Option<Keying>,
    pub writer: WriterIdent,
    registered: AtomicBool,
}

impl Ledger {
    pub fn new(hashing: Hashing, keying: Option<Keying>, foreign: Option<String>) -> Ledger {
        Ledger {
            hashing,
            foreign,
            keying,
            writer: WriterIdent::this_process(),
            registered: AtomicBool::new(false),
        }
    }

    /// Registers this process as a writer inside `tx` (the first time it writes a receipt).
    pub fn register(&self, tx: &mut dyn Sql) -> DbResult<()> {
        if self.registered.load(Ordering::Relaxed) {
            return Ok(());
        }
        let w = &self.writer;
        let now = now_us();
        tx.execute(
            "INSERT INTO writers (id, host, pid, proc_start, started_us, heartbeat_us)
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            args![w.id, w.host, w.pid, w.proc_start, now, now],
        )?;
        Ok(())
    }

    /// After the transaction that registered the writer committed.
    pub fn registered(&self) {
        self.registered.store(true, Ordering::Relaxed);
    }

    pub fn is_registered(&self) -> bool {
        self.registered.load(Ordering::Relaxed)
    }

    /// The refusal of an audit write this process may not make.
    pub fn check_writable(&self) -> DbResult<()> {
        match &self.foreign {
            Some(why) => Err(DbError::Refused(why.clone())),
            None => Ok(()),
        }
    }
}

/// A process writing to the store.
#[derive(Clone, Debug)]
pub(crate) struct WriterIdent {
    pub id: String,
    pub host: String,
    pub pid: i64,
    pub proc_start: i64,
}

impl WriterIdent {
    fn this_process() -> WriterIdent {
        let pid = std::process::id() as i64;
        WriterIdent {
            id: uuid::Uuid::now_v7().to_string(),
            host: this_host(),
            pid,
            proc_start: proc_start(pid).unwrap_or(0),
        }
    }
}

/// Where a process id means something: the host's name, its boot and the process's pid
/// namespace (two containers sharing a host name, or a reboot, are other "hosts": their
/// writers are judged by heartbeat, not by a process id that means something else here).
fn this_host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let pidns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{}/{}/{}", name.trim(), boot.trim(), pidns)
}

/// The kernel's start time of process `pid` (clock ticks since boot, `/proc/PID/stat` field
/// 22); `None` when there is no such process.
fn proc_start(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A writer's row, as read back.
struct WriterRow {
    host: String,
    pid: i64,
    proc_start: i64,
    heartbeat_us: i64,
    stopped: bool,
}

/// What became of a writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Alive,
    /// Stopped cleanly: every call it admitted was audited before it said so.
    Stopped,
    /// Gone without stopping: a crash, or killed; on this host.
    Crashed,
    /// Gone without stopping, on another host: its calls are recorded as interrupted from
    /// here, but only a start on its own host looks at its files (and reaps it).
    CrashedElsewhere,
}

impl WriterRow {
    fn fate(&self, host: &str, now: i64) -> Fate {
        if self.stopped {
            return Fate::Stopped;
        }
        // On this host the kernel knows: a process may write without a heartbeat (a
        // command-line run); one from this host's earlier boot is gone; another host's (or
        // another pid namespace's) process is judged by its heartbeat.
        let part = |h: &str, i: usize| h.split('/').nth(i).unwrap_or_default().to_string();
        let same_name = part(&self.host, 0) == part(host, 0);
        let same_boot = same_name && part(&self.host, 1) == part(host, 1);
        if self.host == host {
            return match proc_start(self.pid) != Some(self.proc_start) {
                true => Fate::Crashed,
                false => Fate::Alive,
            };
        }
        if same_name && !same_boot {
            return Fate::Crashed;
        }
        match self.heartbeat_us < now - WRITER_LAPSE_US {
            true => Fate::CrashedElsewhere,
            false => Fate::Alive,
        }
    }
}

/// The writers that are not alive, by id, with their fate.
fn gone_writers(conn: &mut dyn Sql, reaped_too: bool) -> DbResult<Vec<(String, Fate)>> {
    Ok(writers(conn, reaped_too)?
        .into_iter()
        .filter(|(_, fate)| *fate != Fate::Alive)
        .collect())
}

/// Every writer (`reaped_too`) or those not yet looked at, by id, with its fate.
fn writers(conn: &mut dyn Sql, reaped_too: bool) -> DbResult<Vec<(String, Fate)>> {
    let host = this_host();
    let now = now_us();
    let mut gone = Vec::new();
    let sql = match reaped_too {
        true => "SELECT id, host, pid, proc_start, heartbeat_us, stopped_us FROM writers",
        false => {
            "SELECT id, host, pid, proc_start, heartbeat_us, stopped_us FROM writers
             WHERE reaped_us IS NULL AND stopped_us IS NULL"
        }
    };
    conn.each(sql, &[], &mut |r| {
        let row = WriterRow {
            host: r.get(1)?,
            pid: r.get(2)?,
            proc_start: r.get(3)?,
            heartbeat_us: r.get(4)?,
            stopped: r.get::<Option<i64>>(5)?.is_some(),
        };
        gone.push((r.get(0)?, row.fate(&host, now)));
        Ok(())
    })?;
    Ok(gone)
}

/// A call admitted and never finished: its writer is gone and it has no audit row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unfinished {
    pub receipt: AdmissionReceipt,
    /// The writer that admitted it (`None`: a receipt from before writers were recorded).
    pub writer: Option<String>,
    /// What the call journalled before it stopped.
    pub journal: Vec<JournalEntry>,
}

/// A receipt's columns, as [`receipt_row`] reads them.
pub(super) const RECEIPT_COLUMNS: &str =
    "call_id, at_us, session, transport, agent, tool, definition, arguments, decision, writer";

/// A receipt and the writer that admitted it ([`RECEIPT_COLUMNS`]).
pub(super) fn receipt_row(r: &Row) -> DbResult<(AdmissionReceipt, Option<String>)> {
    Ok((
        AdmissionReceipt {
            call_id: r.get(0)?,
            at_us: r.get(1)?,
            session: r.get(2)?,
            transport: r.get(3)?,
            agent: r.get(4)?,
            tool: r.get(5)?,
            definition: r.get(6)?,
            arguments: r.get(7)?,
            decision: r.get(8)?,
        },
        r.get(9)?,
    ))
}

const UNAUDITED: &str =
    "SELECT r.call_id, r.at_us, r.session, r.transport, r.agent, r.tool, r.definition,
            r.arguments, r.decision, r.writer
     FROM receipts r WHERE NOT EXISTS (SELECT 1 FROM audit a WHERE a.call_id = r.call_id)";

/// The store's keying marker, if it has one (and the table, a store of an older release
/// opened read-only may lack it).
pub(crate) fn read_keying(conn: &mut dyn Sql) -> DbResult<Option<Keying>> {
    if !has_table(conn, "audit_keying")? {
        return Ok(None);
    }
    // A store of an older release opened read-only may lack the heads (marker v1).
    let heads = match has_column(conn, "audit_keying", "heads")? {
        true => "heads",
        false => "NULL",
    };
    conn.query_row(
        &format!(
            "SELECT key_id, store_id, keyed_after_seq, keyed_after_hash, receipts_checked_after_seq,
                 at_us, mac, {heads} FROM audit_keying WHERE id = 1"
        ),
        &[],
        |r| {
            let heads: Option<String> = r.get(7)?;
            Ok(Keying {
                key_id: r.get(0)?,
                store_id: r.get(1)?,
                keyed_after_seq: r.get(2)?,
                keyed_after_hash: r.get(3)?,
                receipts_checked_after_seq: r.get(4)?,
                at_us: r.get(5)?,
                mac: r.get(6)?,
                // Heads that do not parse were changed: an empty list fails the signature.
                heads: heads.map(|text| Keying::parse_heads(&text).unwrap_or_default()),
            })
        },
    )
    .optional()
}

fn has_column(conn: &mut dyn Sql, table: &str, column: &str) -> DbResult<bool> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?",
        Dialect::Postgres => {
            "SELECT count(*) FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = ? AND column_name = ?"
        }
    };
    Ok(conn.query_row(sql, args![table, column], |r| r.get::<i64>(0))? > 0)
}

/// Every chain's newest row now, or (every row of it pruned) its newest checkpoint: what a
/// keying marker names. Only rows numbered up to `upto`, when given (naming the heads of a
/// store keyed by an older release, at the row its marker pinned).
fn chain_heads(conn: &mut dyn Sql, upto: Option<i64>) -> DbResult<Vec<ChainHead>> {
    let upto = upto.unwrap_or(i64::MAX);
    let mut heads: BTreeMap<String, ChainHead> = BTreeMap::new();
    for c in super::retention::latest_checkpoints(conn)? {
        if c.seq <= upto {
            heads.insert(
                c.chain.clone(),
                ChainHead {
                    chain: c.chain,
                    link: c.link,
                    seq: c.seq,
                    hash: c.hash,
                },
            );
        }
    }
    conn.each(
        "SELECT a.chain, a.link, a.seq, a.hash FROM audit a
         JOIN (SELECT chain, max(link) AS link FROM audit WHERE seq <= ? GROUP BY chain) n
           ON a.chain = n.chain AND a.link = n.link",
        args![upto],
        &mut |r| {
            let head = ChainHead {
                chain: r.get(0)?,
                link: r.get(1)?,
                seq: r.get(2)?,
                hash: r.get(3)?,
            };
            heads.insert(head.chain.clone(), head);
            Ok(())
        },
    )?;
    Ok(heads.into_values().collect())
}

pub(crate) fn has_table(conn: &mut dyn Sql, table: &str) -> DbResult<bool> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
        Dialect::Postgres => {
            "SELECT count(*) FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_name = ?"
        }
    };
    Ok(conn.query_row(sql, args![table], |r| r.get::<i64>(0))? > 0)
}

/// Keys the store's audit under `key` if it is not yet keyed (from every chain's current
/// head on), and returns its marker. A store keyed under another key is refused. A marker of
/// an older release, signed under this key, is named in full (its chains' heads at the row
/// it pinned) and signed again.
pub(crate) fn key_store(conn: &mut dyn Conn, key: &AuditKey, shown: &str) -> Result<Keying> {
    let context = "key the audit";
    let mut tx = conn.begin().map_err(StoreError::sql(context))?;
    if let Some(mut keying) = read_keying(&mut *tx).map_err(StoreError::sql(context))? {
        if keying.key_id != key.id() {
            return Err(StoreError::Invalid(format!(
                "the audit of {shown} is keyed under another vault key (key id {}, and this Aether's is {}): every process writing to one store needs the same key file (`vault.key_file`)",
                keying.key_id,
                key.id()
            )));
        }
        // A v1 marker that is not this key's is left for `verify` to name, not signed over.
        if keying.heads.is_none() && key.verify(&keying.signed_text(), &keying.mac) {
            keying.heads = Some(
                chain_heads(&mut *tx, Some(keying.keyed_after_seq))
                    .map_err(StoreError::sql(context))?,
            );
            keying.mac = key.sign(&keying.signed_text());
            tx.execute(
                "UPDATE audit_keying SET heads = ?, mac = ? WHERE id = 1",
                args![
                    Keying::heads_text(keying.heads.as_deref().unwrap_or_default()),
                    keying.mac
                ],
            )
            .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
        }
        return Ok(keying);
    }
    // Rows after the newest, of every chain, are keyed.
    let newest = match super::newest_row(&mut *tx).map_err(StoreError::sql(context))? {
        Some(newest) => Some(newest),
        None => super::retention::latest_checkpoint(&mut *tx)
            .map_err(StoreError::sql(context))?
            .map(|c| (c.seq, c.hash)),
    };
    let (seq, hash) = newest.unwrap_or((0, crate::chain::GENESIS.to_string()));
    let checked: i64 = tx
        .query_row(
            "SELECT value FROM store_meta WHERE key = 'receipts_checked_after_seq'",
            &[],
            |r| r.get(0),
        )
        .optional()
        .map_err(StoreError::sql(context))?
        .unwrap_or(0);
    let heads = chain_heads(&mut *tx, None).map_err(StoreError::sql(context))?;
    let mut keying = Keying {
        key_id: key.id().to_string(),
        store_id: uuid::Uuid::now_v7().to_string(),
        keyed_after_seq: seq,
        keyed_after_hash: hash,
        receipts_checked_after_seq: checked,
        at_us: now_us(),
        heads: Some(heads),
        mac: String::new(),
    };
    keying.mac = key.sign(&keying.signed_text());
    tx.execute(
        "INSERT INTO audit_keying (id, key_id, store_id, keyed_after_seq, keyed_after_hash,
             receipts_checked_after_seq, at_us, heads, mac) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)",
        args![
            keying.key_id,
            keying.store_id,
            keying.keyed_after_seq,
            keying.keyed_after_hash,
            keying.receipts_checked_after_seq,
            keying.at_us,
            Keying::heads_text(keying.heads.as_deref().unwrap_or_default()),
            keying.mac
        ],
    )
    .map_err(StoreError::sql(context))?;
    tx.commit().map_err(StoreError::sql(context))?;
    Ok(keying)
}

/// How `verify` classes receipts that have no audit row: every writer and its fate.
pub(crate) struct Liveness {
    gone: std::collections::HashMap<String, Fate>,
}

/// A receipt without an audit row, by what became of its writer.
pub(crate) enum Unaudited {
    /// Its process runs: the call is running.
    Running,
    /// Its process crashed: interrupted (the next start records it).
    Interrupted,
    /// Its process stopped cleanly, so it audited every call: the row was removed.
    Missing,
    /// A receipt from before writers were recorded.
    Unknown,
}

impl Liveness {
    pub fn read(conn: &mut dyn Sql) -> DbResult<Liveness> {
        let gone = match has_table(conn, "writers")? {
            true => writers(conn, true)?.into_iter().collect(),
            false => Default::default(),
        };
        Ok(Liveness { gone })
    }

    pub fn class(&self, writer: Option<&str>) -> Unaudited {
        match writer.map(|w| self.gone.get(w)) {
            None => Unaudited::Unknown,
            // A writer's row is written with its first receipt: one that names no writer on
            // record had its writer removed.
            Some(None) => Unaudited::Missing,
            Some(Some(Fate::Alive)) => Unaudited::Running,
            Some(Some(Fate::Crashed | Fate::CrashedElsewhere)) => Unaudited::Interrupted,
            Some(Some(Fate::Stopped)) => Unaudited::Missing,
        }
    }
}

impl SqlStore {
    /// Renews this process's heartbeat (a serving process calls it every [`HEARTBEAT`]).
    pub async fn heartbeat(&self) -> Result<()> {
        let ledger = self.inner.ledger.clone();
        if !ledger.is_registered() {
            return Ok(());
        }
        self.write(move |conn| {
            conn.execute(
                "UPDATE writers SET heartbeat_us = ? WHERE id = ?",
                args![now_us(), ledger.writer.id],
            )
            .map(|_| ())
            .map_err(StoreError::sql("heartbeat"))
        })
        .await
    }

    /// Marks this process's writer stopped (a clean shutdown): its calls have all ended.
    pub async fn writer_stopped(&self) -> Result<()> {
        let ledger = self.inner.ledger.clone();
        if !ledger.is_registered() {
            return Ok(());
        }
        self.write(move |conn| {
            conn.execute(
                "UPDATE writers SET stopped_us = ? WHERE id = ?",
                args![now_us(), ledger.writer.id],
            )
            .map(|_| ())
            .map_err(StoreError::sql("stop writer"))
        })
        .await
    }

    /// Calls whose writer crashed (on any host) and that have no audit row, with what they
    /// journalled; and this host's crashed writers (whose files a start here looks at, and
    /// which [`SqlStore::record_interrupted`] marks reaped). Another host's crashed writer is
    /// left for a start on its own host.
    pub async fn unfinished(&self) -> Result<(Vec<Unfinished>, Vec<String>)> {
        self.read(|conn| {
            let context = "find unfinished calls";
            let crashed: Vec<(String, Fate)> = gone_writers(conn, false)
                .map_err(StoreError::sql(context))?
                .into_iter()
                .filter(|(_, fate)| matches!(fate, Fate::Crashed | Fate::CrashedElsewhere))
                .collect();
            // This host's crashed writers: their files are looked at here, and they are
            // reaped once their calls are recorded.
            let gone: Vec<String> = crashed
                .iter()
                .filter(|(_, fate)| *fate == Fate::Crashed)
                .map(|(id, _)| id.clone())
                .collect();
            let mut found = Vec::new();
            for (writer, _) in &crashed {
                conn.each(
                    &format!("{UNAUDITED} AND r.writer = ?"),
                    args![writer],
                    &mut |r| {
                        found.push(receipt_row(r)?);
                        Ok(())
                    },
                )
                .map_err(StoreError::sql(context))?;
            }
            // Receipts from before writers were recorded: once, those old enough.
            let swept: Option<i64> = conn
                .query_row(
                    "SELECT value FROM store_meta WHERE key = 'legacy_receipts_reaped'",
                    &[],
                    |r| r.get(0),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            if swept.is_none() {
                conn.each(
                    &format!("{UNAUDITED} AND r.writer IS NULL AND r.at_us < ?"),
                    args![now_us() - SETTLE_US],
                    &mut |r| {
                        found.push(receipt_row(r)?);
                        Ok(())
                    },
                )
                .map_err(StoreError::sql(context))?;
            }
            let mut unfinished = Vec::with_capacity(found.len());
            for (receipt, writer) in found {
                let journal = super::journal::of_call(conn, &receipt.call_id)
                    .map_err(StoreError::sql(context))?;
                unfinished.push(Unfinished {
                    receipt,
                    writer,
                    journal,
                });
            }
            Ok((unfinished, gone))
        })
        .await
    }

    /// The journal writes of calls the crashed `writers` admitted from a little before each
    /// one's last heartbeat on (a crash loses renames the kernel had not written out; it writes
    /// them out within half a minute), oldest first: what the next start looks at again
    /// (`aether_tools::workspace::redo`).
    pub async fn journal_to_redo(&self, writers: Vec<String>) -> Result<Vec<JournalEntry>> {
        let ledger = self.inner.ledger.clone();
        self.read(move |conn| {
            let context = "journal to redo";
            let mut entries = Vec::new();
            for w in &writers {
                let since: Option<i64> = conn
                    .query_row(
                        "SELECT heartbeat_us FROM writers WHERE id = ?",
                        args![w],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(StoreError::sql(context))?;
                let Some(since) = since else { continue };
                entries.extend(
                    super::journal::of_writer(conn, w, since - REDO_MARGIN_US)
                        .map_err(StoreError::sql(context))?,
                );
            }
            entries.sort_by_key(|e| e.id);
            // Only writes the caller was told had succeeded: the call's audit row says `ok`
            // and, in a keyed store, is authentic (a journal entry or receipt written into
            // the database by someone without the key is never written to a file).
            let mut told_ok = std::collections::HashMap::new();
            for e in &entries {
                if told_ok.contains_key(&e.call_id) {
                    continue;
                }
                let rows = conn
                    .query_map(
                        &format!(
                            "SELECT {} FROM audit WHERE call_id = ?",
                            super::AUDIT_COLUMNS
                        ),
                        args![e.call_id],
                        super::audit_record,
                    )
                    .map_err(StoreError::sql(context))?;
                let ok = rows.len() == 1
                    && rows[0].event.outcome == "ok"
                    && match &ledger.hashing {
                        Hashing::Keyed(key) => {
                            crate::chain::hash_form(Some(key), &rows[0], Form::Unnumbered).is_some()
                        }
                        Hashing::Plain => ledger.keying.is_none(),
                    };
                told_ok.insert(e.call_id.clone(), ok);
            }
            entries.retain(|e| told_ok.get(&e.call_id).copied().unwrap_or(false));
            // And only files nothing was journalled for since (a delete, a move, an undo,
            // another process's write).
            let mut newest: std::collections::HashMap<(String, String), i64> = Default::default();
            for e in &entries {
                newest.insert((e.root.clone(), e.path.clone()), e.id);
            }
            let mut superseded = std::collections::HashSet::new();
            for ((root, path), id) in &newest {
                let later: i64 = conn
                    .query_row(
                        "SELECT count(*) FROM journal WHERE id > ? AND root = ?
                           AND (path = ? OR dest = ?)",
                        args![id, root, path, path],
                        |r| r.get(0),
                    )
                    .map_err(StoreError::sql(context))?;
                if later > 0 {
                    superseded.insert((root.clone(), path.clone()));
                }
            }
            entries.retain(|e| !superseded.contains(&(e.root.clone(), e.path.clone())));
            Ok(entries)
        })
        .await
    }

    /// Appends `events` (the `interrupted` rows of unfinished calls) to the audit, skipping
    /// any call that has a row by now, and marks `writers` reaped; one transaction. Returns
    /// how many rows were written.
    pub async fn record_interrupted(
        &self,
        events: Vec<AuditEvent>,
        writers: Vec<String>,
    ) -> Result<usize> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "record interrupted calls";
            let mut tx = conn.begin().map_err(StoreError::sql(context))?;
            let mut missing = Vec::with_capacity(events.len());
            for e in &events {
                let there: Option<i64> = tx
                    .query_row(
                        "SELECT seq FROM audit WHERE call_id = ? LIMIT 1",
                        args![e.call_id],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(StoreError::sql(context))?;
                if there.is_none() {
                    missing.push(e);
                }
            }
            append_audit(&mut *tx, &ledger, &missing).map_err(StoreError::sql(context))?;
            let now = now_us();
            for w in &writers {
                tx.execute(
                    "UPDATE writers SET reaped_us = ? WHERE id = ?",
                    args![now, w],
                )
                .map_err(StoreError::sql(context))?;
            }
            tx.execute(
                "INSERT INTO store_meta (key, value) VALUES ('legacy_receipts_reaped', 1)
                 ON CONFLICT (key) DO NOTHING",
                &[],
            )
            .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(missing.len())
        })
        .await
    }

    /// The newest row of each of this process's chains that has one.
    pub async fn audit_heads(&self) -> Result<Vec<ChainHead>> {
        let chains = self.inner.chains.clone();
        self.read(move |conn| heads_of(conn, chains).map_err(StoreError::sql("audit head")))
            .await
    }

    /// The writers gone without stopping (crashed, on any host) that no start has put right
    /// yet: their last rows may not have reached their own witness.
    pub async fn crashed_writers(&self) -> Result<Vec<String>> {
        self.read(|conn| {
            Ok(gone_writers(conn, false)
                .map_err(StoreError::sql("read writers"))?
                .into_iter()
                .filter(|(_, fate)| matches!(fate, Fate::Crashed | Fate::CrashedElsewhere))
                .map(|(id, _)| id)
                .collect())
        })
        .await
    }

    /// The newest row of each chain the processes `writers` wrote (a writer's own chain and
    /// its lanes' `WRITER/k`).
    pub async fn audit_heads_of(&self, writers: Vec<String>) -> Result<Vec<ChainHead>> {
        self.read(move |conn| {
            let context = StoreError::sql("audit heads");
            let mut chains = Vec::new();
            for w in &writers {
                // `WRITER/…` as a range on the (chain, link) index: '0' follows '/'.
                let found: Vec<String> = conn
                    .query_map(
                        "SELECT DISTINCT chain FROM audit
                         WHERE chain = ? OR (chain >= ? AND chain < ?)",
                        args![w, format!("{w}/"), format!("{w}0")],
                        |r| r.get(0),
                    )
                    .map_err(StoreError::sql("audit heads"))?;
                chains.extend(found);
            }
            heads_of(conn, chains).map_err(context)
        })
        .await
    }

    /// The store's keying marker, as read at open.
    pub fn keying(&self) -> Option<&Keying> {
        self.inner.ledger.keying.as_ref()
    }
}

/// The newest row of each of `chains` that has one.
fn heads_of(conn: &mut dyn Sql, chains: Vec<String>) -> DbResult<Vec<ChainHead>> {
    let mut heads = Vec::with_capacity(chains.len());
    for chain in chains {
        let head = conn
            .query_row(
                "SELECT link, seq, hash FROM audit WHERE chain = ? ORDER BY link DESC LIMIT 1",
                args![chain],
                |r| {
                    Ok(ChainHead {
                        chain: chain.clone(),
                        link: r.get(0)?,
                        seq: r.get(1)?,
                        hash: r.get(2)?,
                    })
                },
            )
            .optional()?;
        heads.extend(head);
    }
    Ok(heads)
}
