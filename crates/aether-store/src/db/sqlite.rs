//! SQLite: the embedded default. A file under `.aether/`, WAL mode, `synchronous = FULL` (every
//! commit fsyncs the log, so a committed receipt survives a crash).

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::{Arg, Conn, DbError, DbResult, Dialect, Row, Sql, Tx, Value};
use crate::{Result, StoreError};

pub(crate) const MIGRATIONS: &[&str] = &[
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
    include_str!("../../migrations/sqlite/0011_checkpoints.sql"),
    include_str!("../../migrations/sqlite/0012_runs.sql"),
    include_str!("../../migrations/sqlite/0013_run_leases.sql"),
    include_str!("../../migrations/sqlite/0014_ledger.sql"),
    include_str!("../../migrations/sqlite/0015_writer_chains.sql"),
    include_str!("../../migrations/sqlite/0016_audit_trace.sql"),
    include_str!("../../migrations/sqlite/0017_audit_subject.sql"),
    include_str!("../../migrations/sqlite/0018_rate_counts.sql"),
    include_str!("../../migrations/sqlite/0019_oauth.sql"),
    include_str!("../../migrations/sqlite/0020_call_stats.sql"),
    include_str!("../../migrations/sqlite/0021_call_stats_hour.sql"),
    include_str!("../../migrations/sqlite/0022_keying_heads.sql"),
    include_str!("../../migrations/sqlite/0023_calls_counted.sql"),
];

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Arg::Null => ValueRef::Null,
            Arg::Int(i) => ValueRef::Integer(i),
            Arg::Real(f) => ValueRef::Real(f),
            Arg::Text(s) => ValueRef::Text(s.as_bytes()),
            Arg::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn row(r: &rusqlite::Row<'_>, columns: usize) -> DbResult<Row> {
    let mut values = Vec::with_capacity(columns);
    for i in 0..columns {
        values.push(match r.get_ref(i)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Int(n),
            ValueRef::Real(f) => Value::Real(f),
            ValueRef::Text(t) => {
                Value::Text(String::from_utf8(t.to_vec()).map_err(|e| DbError::decode(i, e))?)
            }
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        });
    }
    Ok(Row(values))
}

fn execute(conn: &Connection, sql: &str, args: &[Arg<'_>]) -> DbResult<u64> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.execute(rusqlite::params_from_iter(args))? as u64)
}

fn each(
    conn: &Connection,
    sql: &str,
    args: &[Arg<'_>],
    f: &mut dyn FnMut(&Row) -> DbResult<()>,
) -> DbResult<()> {
    let mut stmt = conn.prepare_cached(sql)?;
    let columns = stmt.column_count();
    let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
    while let Some(r) = rows.next()? {
        f(&row(r, columns)?)?;
    }
    Ok(())
}

/// A connection and a transaction (which derefs to its connection) run statements alike.
macro_rules! sql_on_connection {
    ($($t:ty),*) => {$(
        impl Sql for $t {
            fn dialect(&self) -> Dialect {
                Dialect::Sqlite
            }

            fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64> {
                execute(self, sql, args)
            }

            fn each(
                &mut self,
                sql: &str,
                args: &[Arg<'_>],
                f: &mut dyn FnMut(&Row) -> DbResult<()>,
            ) -> DbResult<()> {
                each(self, sql, args, f)
            }

            fn batch(&mut self, sql: &str) -> DbResult<()> {
                Ok(self.execute_batch(sql)?)
            }
        }
    )*};
}
sql_on_connection!(Connection, Transaction<'_>);

impl Conn for Connection {
    fn begin(&mut self) -> DbResult<Box<dyn Tx + '_>> {
        Ok(Box::new(self.transaction_with_behavior(
            TransactionBehavior::Immediate,
        )?))
    }
}

impl Tx for Transaction<'_> {
    fn commit(self: Box<Self>) -> DbResult<()> {
        Ok(Transaction::commit(*self)?)
    }
}

/// Creates the store's folder (owner-only) and file if they are missing.
pub(crate) fn create(path: &Path) -> Result<()> {
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
    Ok(())
}

pub(crate) fn connect(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).map_err(|e| StoreError::sql("open")(e.into()))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| StoreError::sql("open")(e.into()))?;
    conn.set_prepared_statement_cache_capacity(64);
    // The query planner's stability guarantee: a plan never depends on a bound value. Without
    // it SQLite marks a statement whose plan looked at a parameter (a `LIMIT ?`, a `LIKE ?`,
    // and, as measured, the group commit's own halt-and-place read) to be compiled again each
    // time that parameter is bound: a parse and plan per commit, a tenth of a lone read's CPU.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| StoreError::sql("configure")(e.into()))?;
    // FULL: in WAL mode every commit fsyncs the log, so a committed receipt survives a crash.
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
    )
    .map_err(|e| StoreError::sql("configure")(e.into()))?;
    Ok(conn)
}

/// Opens the store at `path` for reading only. A store of another release is refused (its
/// tables are not the ones this release reads). Where SQLite cannot make the shared-memory
/// file a WAL database reads through (read-only media, a copy without write access), the
/// file is opened as immutable.
pub(crate) fn connect_readonly(path: &Path) -> Result<Connection> {
    use rusqlite::OpenFlags;
    let sql = |e: rusqlite::Error| StoreError::sql("open read-only")(e.into());
    if !path.exists() {
        return Err(StoreError::Invalid(format!(
            "there is no store at {}",
            path.display()
        )));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
    let plain = Connection::open_with_flags(path, flags).and_then(|c| {
        c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .map(|v| (c, v))
    });
    let (conn, version) = match plain {
        Ok(found) => found,
        Err(_) => {
            let uri = format!("file:{}?immutable=1", path.display());
            let c = Connection::open_with_flags(uri, flags).map_err(sql)?;
            let v = c
                .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
                .map_err(sql)?;
            (c, v)
        }
    };
    let known = MIGRATIONS.len() as i64;
    if version != known {
        return Err(StoreError::Invalid(format!(
            "the store {} is at schema version {version} and this release reads {known}: {}",
            path.display(),
            if version < known {
                "open it once for writing with this release (any command that writes, e.g. `aether serve`) to bring it up to date"
            } else {
                "use the newer release that wrote it"
            }
        )));
    }
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(sql)?;
    Ok(conn)
}

/// Brings the store's schema up to this release's (`PRAGMA user_version` counts the
/// migrations applied); a store from a newer release is refused.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let context = "migrate";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| StoreError::sql(context)(e.into()))?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| StoreError::sql(context)(e.into()))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew {
            path: path.display().to_string(),
            found: version,
            known,
        });
    }
    for sql in &MIGRATIONS[version as usize..] {
        tx.execute_batch(sql)
            .map_err(|e| StoreError::sql(context)(e.into()))?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {known}"))
        .map_err(|e| StoreError::sql(context)(e.into()))?;
    tx.commit().map_err(|e| StoreError::sql(context)(e.into()))
}
