//! PostgreSQL: one database shared by any number of Aether replicas.
//!
//! Each store holds two connections (the writer's and a reader's), reconnecting when one
//! drops; a third listens for `aether_changes`, which a trigger on `revisions` sends with every
//! change of a counter, so replicas learn of a halt, an approval or a registry change at once.
//! Statements are prepared once per connection and kept.
//!
//! The `postgres` client blocks on a runtime of its own, so it is only ever used on threads
//! that are not driving async tasks: the store's writer thread, `spawn_blocking` reads, the
//! listener thread.

use std::collections::HashMap;
use std::error::Error;
use std::str::FromStr;
use std::time::Duration;

use bytes::BytesMut;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Config, GenericClient, NoTls, Statement};

use super::{Arg, Conn, DbError, DbResult, Dialect, Row, Sql, TextRow, Tx, Value};
use crate::{Result, StoreError};

pub(crate) const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/postgres/0001_schema.sql"),
    include_str!("../../migrations/postgres/0002_runs.sql"),
    include_str!("../../migrations/postgres/0003_run_leases.sql"),
    include_str!("../../migrations/postgres/0004_ledger.sql"),
    include_str!("../../migrations/postgres/0005_writer_chains.sql"),
    include_str!("../../migrations/postgres/0006_audit_trace.sql"),
    include_str!("../../migrations/postgres/0007_audit_subject.sql"),
    include_str!("../../migrations/postgres/0008_rate_counts.sql"),
    include_str!("../../migrations/postgres/0009_oauth.sql"),
    include_str!("../../migrations/postgres/0010_call_stats.sql"),
    include_str!("../../migrations/postgres/0011_call_stats_hour.sql"),
    include_str!("../../migrations/postgres/0012_keying_heads.sql"),
    include_str!("../../migrations/postgres/0013_calls_counted.sql"),
    include_str!("../../migrations/postgres/0014_refuse_if_halted.sql"),
];

/// The advisory lock (with the schema's hash as its second half) that serializes writers
/// (group commits hold it shared, see [`Conn::begin_shared`]).
pub(crate) const WRITE_LOCK: i32 = 0x4165;

/// Prepared statements kept per connection before the cache starts over.
const CACHE: usize = 256;

impl ToSql for Arg<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn Error + Sync + Send>> {
        match *self {
            Arg::Null => Ok(IsNull::Yes),
            Arg::Int(i) => match *ty {
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().as_str().to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Arg::Real(f) => match *ty {
                Type::FLOAT4 => (f as f32).to_sql(ty, out),
                _ => f.to_sql(ty, out),
            },
            Arg::Text(s) => s.to_sql(ty, out),
            Arg::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// `?` and `?N` placeholders as PostgreSQL's `$N` (never inside a quoted literal).
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut next = 0;
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                }
                out.push('$');
                out.push_str(&digits);
            }
            c => out.push(c),
        }
    }
    out
}

fn row(r: &postgres::Row) -> DbResult<Row> {
    let mut values = Vec::with_capacity(r.len());
    for (i, column) in r.columns().iter().enumerate() {
        let v = match *column.type_() {
            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
            Type::INT4 => r
                .try_get::<_, Option<i32>>(i)?
                .map(|n| Value::Int(n.into())),
            Type::INT2 => r
                .try_get::<_, Option<i16>>(i)?
                .map(|n| Value::Int(n.into())),
            Type::BOOL => r
                .try_get::<_, Option<bool>>(i)?
                .map(|b| Value::Int(b.into())),
            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
            Type::FLOAT4 => r
                .try_get::<_, Option<f32>>(i)?
                .map(|f| Value::Real(f.into())),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                r.try_get::<_, Option<String>>(i)?.map(Value::Text)
            }
            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
            ref other => {
                return Err(DbError::decode(
                    i,
                    format!("PostgreSQL type {other} is not one the store reads"),
                ));
            }
        };
        values.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

fn prepare(
    client: &mut impl GenericClient,
    cache: &mut HashMap<String, Statement>,
    sql: &str,
) -> DbResult<Statement> {
    if let Some(stmt) = cache.get(sql) {
        return Ok(stmt.clone());
    }
    let stmt = client.prepare(&numbered(sql))?;
    if cache.len() >= CACHE {
        cache.clear();
    }
    cache.insert(sql.to_string(), stmt.clone());
    Ok(stmt)
}

fn execute(
    client: &mut impl GenericClient,
    cache: &mut HashMap<String, Statement>,
    sql: &str,
    args: &[Arg<'_>],
) -> DbResult<u64> {
    let stmt = prepare(client, cache, sql)?;
    let args: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
    Ok(client.execute(&stmt, &args)?)
}

fn each(
    client: &mut impl GenericClient,
    cache: &mut HashMap<String, Statement>,
    sql: &str,
    args: &[Arg<'_>],
    f: &mut dyn FnMut(&Row) -> DbResult<()>,
) -> DbResult<()> {
    let stmt = prepare(client, cache, sql)?;
    let mut rows = client.query_raw(&stmt, args.iter())?;
    while let Some(r) = rows.next()? {
        f(&row(&r)?)?;
    }
    Ok(())
}

/// A connection that reconnects when the server has dropped it.
pub(crate) struct PgConn {
    config: Config,
    client: Option<Client>,
    cache: HashMap<String, Statement>,
}

impl PgConn {
    pub(crate) fn connect(config: &Config) -> DbResult<PgConn> {
        let client = config.connect(NoTls)?;
        Ok(PgConn {
            config: config.clone(),
            client: Some(client),
            cache: HashMap::new(),
        })
    }

    /// The live client, connecting again if the last one closed (a server restart), and the
    /// statement cache, which starts over with a new client.
    fn parts(&mut self) -> DbResult<(&mut Client, &mut HashMap<String, Statement>)> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            self.cache.clear();
            self.client = Some(self.config.connect(NoTls)?);
        }
        let client = self.client.as_mut().expect("connected above");
        Ok((client, &mut self.cache))
    }
}

/// The client runs a small runtime of its own and blocks on it, which must not happen on a
/// thread driving async tasks (tokio panics): a store dropped there closes its connections on
/// a thread of their own.
impl Drop for PgConn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = std::thread::Builder::new()
                .name("aether-store-close".into())
                .spawn(move || drop(client));
        }
    }
}

impl Sql for PgConn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64> {
        let (client, cache) = self.parts()?;
        execute(client, cache, sql, args)
    }

    fn each(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        f: &mut dyn FnMut(&Row) -> DbResult<()>,
    ) -> DbResult<()> {
        let (client, cache) = self.parts()?;
        each(client, cache, sql, args, f)
    }

    fn batch(&mut self, sql: &str) -> DbResult<()> {
        Ok(self.parts()?.0.batch_execute(sql)?)
    }
}

impl Conn for PgConn {
    fn begin(&mut self) -> DbResult<Box<dyn Tx + '_>> {
        self.begin_with("pg_advisory_xact_lock")
    }

    fn begin_shared(&mut self) -> DbResult<Box<dyn Tx + '_>> {
        self.begin_with("pg_advisory_xact_lock_shared")
    }

    fn begin_shared_then(&mut self, first: &str) -> DbResult<(Box<dyn Tx + '_>, Option<TextRow>)> {
        let (client, cache) = self.parts()?;
        // One message, one round trip: the transaction, the lock, and the statement (the
        // simple protocol runs them in order and answers with text).
        let answered = client.simple_query(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}, hashtext(current_schema())); {first}"
        ));
        let messages = match answered {
            Ok(messages) => messages,
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK");
                return Err(e.into());
            }
        };
        // The rows after BEGIN's and the lock's completions are the statement's.
        let mut completed = 0;
        let mut row = None;
        for m in &messages {
            match m {
                postgres::SimpleQueryMessage::CommandComplete(_) => completed += 1,
                postgres::SimpleQueryMessage::Row(r) if completed == 2 && row.is_none() => {
                    row = Some(
                        (0..r.len())
                            .map(|i| r.get(i).map(str::to_string))
                            .collect::<Vec<_>>(),
                    );
                }
                _ => {}
            }
        }
        let tx: Box<dyn Tx + '_> = Box::new(PgTx {
            tx: client,
            cache,
            open: true,
        });
        match row {
            Some(row) => Ok((tx, Some(row))),
            // Dropped: rolled back.
            None => Err(DbError::NotFound),
        }
    }
}

impl PgConn {
    /// A transaction holding the writers' lock taken by `lock` (exclusive or shared).
    fn begin_with(&mut self, lock: &str) -> DbResult<Box<dyn Tx + '_>> {
        let (client, cache) = self.parts()?;
        // The transaction and the writers' lock in one round trip (the simple protocol takes
        // both statements in one message).
        if let Err(e) = client.batch_execute(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT {lock}({WRITE_LOCK}, hashtext(current_schema()))"
        )) {
            // The transaction may be open (the lock failed after BEGIN): never leave the
            // connection inside it.
            let _ = client.batch_execute("ROLLBACK");
            return Err(e.into());
        }
        Ok(Box::new(PgTx {
            tx: client,
            cache,
            open: true,
        }))
    }
}

/// A transaction begun by [`PgConn::begin`]: committed by [`Tx::commit`], rolled back if
/// dropped before.
struct PgTx<'a> {
    tx: &'a mut Client,
    cache: &'a mut HashMap<String, Statement>,
    open: bool,
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.tx.batch_execute("ROLLBACK");
        }
    }
}

impl Sql for PgTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64> {
        execute(&mut *self.tx, self.cache, sql, args)
    }

    fn each(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        f: &mut dyn FnMut(&Row) -> DbResult<()>,
    ) -> DbResult<()> {
        each(&mut *self.tx, self.cache, sql, args, f)
    }

    fn batch(&mut self, sql: &str) -> DbResult<()> {
        Ok(self.tx.batch_execute(sql)?)
    }
}

impl Tx for PgTx<'_> {
    fn commit(mut self: Box<Self>) -> DbResult<()> {
        self.open = false;
        Ok(self.tx.batch_execute("COMMIT")?)
    }
}

/// A `postgres://` URL as a connection configuration: a short connect timeout and TCP
/// keepalives (an unreachable database refuses calls quickly rather than holding them), and plain TCP only where that
/// cannot be read on the way: loopback, a Unix socket, or a network the operator vouches for
/// with `sslmode=disable`.
pub(crate) fn config(url: &str) -> Result<Config> {
    flight_config(url).map(Config::from)
}

/// [`config`] for the asynchronous client a [`PgFlight`] drives.
pub(crate) fn flight_config(url: &str) -> Result<tokio_postgres::Config> {
    let shown = redact(url);
    let mut config = tokio_postgres::Config::from_str(url)
        .map_err(|e| StoreError::Invalid(format!("database URL {shown}: {e}")))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    // A database that drops off the network (no reset, just silence) is noticed in seconds,
    // not after the kernel's two hours: calls waiting on it are refused, not held.
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(15));
    }
    if config.get_keepalives_interval().is_none() {
        config
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(2))
            .keepalives_retries(3);
    }
    config.application_name("aether");
    let exposed: Vec<String> = config
        .get_hosts()
        .iter()
        .filter_map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => {
                let loopback = name == "localhost"
                    || name
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                (!loopback).then(|| name.clone())
            }
            tokio_postgres::config::Host::Unix(_) => None,
        })
        .collect();
    let vouched = url.contains("sslmode=disable");
    if !exposed.is_empty() && !vouched {
        return Err(StoreError::Invalid(format!(
            "database URL {shown}: {} is not on this machine, and this build speaks to PostgreSQL \
             without TLS; reach it through a Unix socket or a tunnel, or add sslmode=disable if \
             the network between is trusted",
            exposed.join(", ")
        )));
    }
    Ok(config)
}

/// The URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Brings the schema up to this release's, under the write lock (replicas starting together
/// migrate once); a schema from a newer release is refused.
pub(crate) fn migrate(conn: &mut PgConn, shown: &str) -> Result<()> {
    let context = "migrate";
    let sql = |e: DbError| StoreError::sql(context)(e);
    let mut tx = conn.begin().map_err(sql)?;
    tx.batch("CREATE TABLE IF NOT EXISTS aether_schema (version BIGINT NOT NULL)")
        .map_err(sql)?;
    let mut version = None;
    tx.each("SELECT max(version) FROM aether_schema", &[], &mut |r| {
        version = r.get::<Option<i64>>(0)?;
        Ok(())
    })
    .map_err(sql)?;
    let version = version.unwrap_or(0);
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew {
            path: shown.to_string(),
            found: version,
            known,
        });
    }
    for m in &MIGRATIONS[version as usize..] {
        tx.batch(m).map_err(sql)?;
    }
    if version < known {
        tx.execute(
            "INSERT INTO aether_schema (version) VALUES (?)",
            &[Arg::Int(known)],
        )
        .map_err(sql)?;
    }
    tx.commit().map_err(sql)
}

/// Listens for change notifications of this schema and bumps `changes` for each; reconnects
/// after a drop (with a bump, since notifications may have been missed meanwhile).
pub(crate) fn listen(config: Config, changes: tokio::sync::watch::Sender<u64>) {
    let bump = |changes: &tokio::sync::watch::Sender<u64>| changes.send_modify(|n| *n += 1);
    loop {
        if changes.is_closed() {
            return;
        }
        // A connection listening, and the schema whose notifications are ours.
        let subscribed = config.connect(NoTls).and_then(|mut client| {
            client.batch_execute("LISTEN aether_changes")?;
            let schema: String = client
                .query_one("SELECT current_schema()::text", &[])?
                .get(0);
            Ok((client, schema))
        });
        let (mut client, schema) = match subscribed {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %DbError::from(e), "cannot listen for store changes; retrying");
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        bump(&changes);
        loop {
            // A new wait each time: the `postgres` crate arms a timeout iterator's delay once,
            // so one kept across waits returns at once after its first quiet second and the
            // loop spins a whole core.
            match client
                .notifications()
                .timeout_iter(Duration::from_secs(1))
                .next()
            {
                Ok(Some(n)) if n.payload() == schema => bump(&changes),
                Ok(Some(_)) => {}
                Ok(None) if changes.is_closed() => return,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %DbError::from(e), "store change listener dropped; reconnecting");
                    break;
                }
            }
        }
    }
}

/// A connection that sends a group commit in two flights: BEGIN with the shared writers' lock
/// and a read; then one statement and COMMIT. Each flight is pipelined (tokio-postgres sends
/// requests polled together without waiting for each answer; the blocking client cannot).
/// Drives a runtime of its own, like the blocking client: never on a thread driving async
/// tasks.
pub(crate) struct PgFlight {
    config: tokio_postgres::Config,
    runtime: tokio::runtime::Runtime,
    client: Option<tokio_postgres::Client>,
    cache: HashMap<String, tokio_postgres::Statement>,
}

impl PgFlight {
    pub(crate) fn connect(config: &tokio_postgres::Config) -> DbResult<PgFlight> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DbError::Refused(format!("cannot start the commit runtime: {e}")))?;
        let mut flight = PgFlight {
            config: config.clone(),
            runtime,
            client: None,
            cache: HashMap::new(),
        };
        flight.connected()?;
        Ok(flight)
    }

    /// Connects again if the last client closed.
    fn connected(&mut self) -> DbResult<()> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = None;
            self.cache.clear();
            let (client, connection) = self
                .runtime
                .block_on(self.config.connect(tokio_postgres::NoTls))?;
            self.runtime.spawn(async move {
                let _ = connection.await;
            });
            self.client = Some(client);
        }
        Ok(())
    }

    /// The prepared statement of `sql` (`?` placeholders): one round trip the first time.
    /// Inside a transaction (`in_transaction`) a closed connection is an error, never a new
    /// connection: statements there must run in the transaction that took the lock and read
    /// the halt (a dropped connection's transaction is rolled back by the server).
    fn prepared(&mut self, sql: &str, in_transaction: bool) -> DbResult<tokio_postgres::Statement> {
        if in_transaction {
            if self.client.as_ref().is_none_or(|c| c.is_closed()) {
                return Err(DbError::Gone(
                    "the connection to PostgreSQL closed during a commit; nothing of it was committed"
                        .into(),
                ));
            }
        } else {
            self.connected()?;
        }
        if let Some(stmt) = self.cache.get(sql) {
            return Ok(stmt.clone());
        }
        let client = self.client.as_ref().expect("connected above");
        let stmt = self.runtime.block_on(client.prepare(&numbered(sql)))?;
        if self.cache.len() >= CACHE {
            self.cache.clear();
        }
        self.cache.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    /// In one flight: BEGIN with the shared writers' lock, and `sql` (bound to `args`),
    /// whose one row is returned; the transaction stays open for [`PgFlight::commit_with`]
    /// (or [`PgFlight::rollback`]). On an error it is rolled back.
    pub(crate) fn begin_with(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<Row> {
        let stmt = self.prepared(sql, false)?;
        let client = self.client.as_ref().expect("prepared above");
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
        let begin = format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}, hashtext(current_schema()))"
        );
        let (begun, answered) = self.runtime.block_on(async {
            tokio::join!(
                client.batch_execute(&begin),
                client.query_one(&stmt, &params)
            )
        });
        match begun.map_err(DbError::from).and_then(|()| row(&answered?)) {
            Ok(row) => Ok(row),
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// In one flight: each of `statements` (`sql` bound to its args), then COMMIT; returns
    /// the rows each changed. If one fails, COMMIT ends the aborted transaction as a
    /// rollback.
    pub(crate) fn commit_with(&mut self, statements: &[(&str, &[Arg<'_>])]) -> DbResult<Vec<u64>> {
        let mut prepared = Vec::with_capacity(statements.len());
        for (sql, _) in statements {
            match self.prepared(sql, true) {
                Ok(stmt) => prepared.push(stmt),
                Err(e) => {
                    self.rollback();
                    return Err(e);
                }
            }
        }
        let client = self.client.as_ref().expect("prepared above");
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = statements
            .iter()
            .map(|(_, args)| args.iter().map(|a| a as _).collect())
            .collect();
        // join_all polls each future once, in order, before any is polled again, and a
        // request is sent when its future is first polled: the statements, then COMMIT, go
        // out together.
        let runs = prepared
            .iter()
            .zip(&params)
            .map(|(stmt, params)| client.execute(stmt, params));
        let (counts, committed) = self.runtime.block_on(async {
            tokio::join!(
                futures::future::join_all(runs),
                client.batch_execute("COMMIT")
            )
        });
        let counts = counts.into_iter().collect::<Result<Vec<u64>, _>>()?;
        committed?;
        Ok(counts)
    }

    /// In one flight: BEGIN with the shared writers' lock, `guard` (a statement that raises
    /// SQLSTATE `refusal` to refuse the transaction), each of `statements` (`sql` bound to its
    /// args), then COMMIT; returns each statement's rows, or `Ok(None)` when the guard refused
    /// (COMMIT then ends the aborted transaction as a rollback: nothing is kept). On any other
    /// error nothing is kept either, unless the connection broke after COMMIT was sent.
    pub(crate) fn commit_once(
        &mut self,
        guard: &str,
        refusal: &str,
        statements: &[(&str, &[Arg<'_>])],
    ) -> DbResult<Option<Vec<Vec<Row>>>> {
        let prepared = statements
            .iter()
            .map(|(sql, _)| self.prepared(sql, false))
            .collect::<DbResult<Vec<_>>>()?;
        let client = self.client.as_ref().expect("prepared above");
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = statements
            .iter()
            .map(|(_, args)| args.iter().map(|a| a as _).collect())
            .collect();
        let begin = format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}, hashtext(current_schema())); {guard}"
        );
        // As in commit_with: each request goes out when its future is first polled, in order.
        let runs = prepared
            .iter()
            .zip(&params)
            .map(|(stmt, params)| client.query(stmt, params));
        let (begun, answers, committed) = self.runtime.block_on(async {
            tokio::join!(
                client.batch_execute(&begin),
                futures::future::join_all(runs),
                client.batch_execute("COMMIT")
            )
        });
        if let Err(e) = &begun
            && e.code().is_some_and(|code| code.code() == refusal)
        {
            return Ok(None);
        }
        begun?;
        let answers = answers
            .into_iter()
            .map(|rows| rows?.iter().map(row).collect::<DbResult<Vec<Row>>>())
            .collect::<DbResult<Vec<_>>>()?;
        committed?;
        Ok(Some(answers))
    }

    /// Ends an open transaction, keeping nothing of it (errors ignored: a connection that
    /// broke has no transaction left).
    pub(crate) fn rollback(&mut self) {
        if let Some(client) = self.client.as_ref() {
            let _ = self.runtime.block_on(client.batch_execute("ROLLBACK"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_literals() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ? AND c = '?' AND d IN (?, ?)"),
            "SELECT a FROM t WHERE b = $1 AND c = '?' AND d IN ($2, $3)"
        );
        assert_eq!(numbered("VALUES (?1, ?2, ?1)"), "VALUES ($1, $2, $1)");
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://aether:hunter2@db:5432/x"),
            "postgres://aether:***@db:5432/x"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
    }

    #[test]
    fn remote_plain_tcp_needs_the_operator_to_vouch() {
        assert!(config("postgres://127.0.0.1:5432/test").is_ok());
        let err = config("postgres://u:pw@db.example.com/test")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("db.example.com") && !err.contains("pw@"),
            "{err}"
        );
        assert!(config("postgres://db.example.com/test?sslmode=disable").is_ok());
    }
}
