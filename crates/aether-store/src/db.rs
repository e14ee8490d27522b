//! The seam between the store's logic and its two databases.
//!
//! The store's queries are written once, against [`Sql`], with `?` placeholders and SQL both
//! databases read alike; each backend adapts them (PostgreSQL numbers the placeholders) and
//! turns its rows into [`Row`]s of plain [`Value`]s. What the two cannot share (how a file or
//! server is opened, migrations, full-text search, how writers are serialized) lives in the
//! backend's own file: [`sqlite`] and [`postgres`].
//!
//! Writers are serialized per store, across processes: a [`Conn::begin`] transaction is
//! SQLite's `BEGIN IMMEDIATE`, or PostgreSQL's transaction-scoped advisory lock. The ledger's
//! group commits ([`Conn::begin_shared`]) share that lock on PostgreSQL: each writer appends
//! to its own audit chain, so replicas commit side by side, and only what must see no batch
//! in flight (the halt, the registry, keying, retention) takes it alone.

pub(crate) mod postgres;
pub(crate) mod sqlite;

/// Which database a connection speaks, for the few statements written twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A value read from a row.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// A value bound to a placeholder.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// What can be bound to a placeholder.
pub(crate) trait ToArg {
    fn to_arg(&self) -> Arg<'_>;
}

impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Arg<'_> {
        (**self).to_arg()
    }
}

impl<T: ToArg> ToArg for Option<T> {
    fn to_arg(&self) -> Arg<'_> {
        self.as_ref().map_or(Arg::Null, ToArg::to_arg)
    }
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Arg<'_> {
                // Values past i64 do not occur (sizes, counts, codes); saturate rather than wrap.
                Arg::Int(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
int_arg!(i64, i32, u32, u64, usize);

impl ToArg for bool {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Int(i64::from(*self))
    }
}

impl ToArg for f64 {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Real(*self)
    }
}

impl ToArg for str {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}

impl ToArg for String {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}

impl ToArg for [u8] {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Blob(self)
    }
}

impl ToArg for Vec<u8> {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Blob(self)
    }
}

impl ToArg for Value {
    fn to_arg(&self) -> Arg<'_> {
        match self {
            Value::Null => Arg::Null,
            Value::Int(i) => Arg::Int(*i),
            Value::Real(f) => Arg::Real(*f),
            Value::Text(s) => Arg::Text(s),
            Value::Blob(b) => Arg::Blob(b),
        }
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

/// The placeholders' values, in order: `args![a, b, c]`.
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        &[$($crate::db::ToArg::to_arg(&$x)),*] as &[$crate::db::Arg<'_>]
    };
}
pub(crate) use args;

/// Binds a list of owned values (a query built up clause by clause).
pub(crate) fn bind(values: &[Value]) -> Vec<Arg<'_>> {
    values.iter().map(ToArg::to_arg).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", postgres_message(.0))]
    Postgres(#[from] ::postgres::Error),
    #[error("no row")]
    NotFound,
    #[error("column {column}: {problem}")]
    Decode { column: usize, problem: String },
    /// A rule of the store's own, broken by the write (the whole transaction is void).
    #[error("{0}")]
    Refused(String),
    /// The connection closed in the middle of a transaction (the server rolls it back): the
    /// database is unreachable, as for a client error without a server's answer.
    #[error("{0}")]
    Gone(String),
}

/// PostgreSQL's own message (the server's words, with its detail) rather than the client's
/// generic "db error".
fn postgres_message(e: &::postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_string(),
        },
        None => e.to_string(),
    }
}

impl DbError {
    pub(crate) fn decode(column: usize, problem: impl std::fmt::Display) -> DbError {
        DbError::Decode {
            column,
            problem: problem.to_string(),
        }
    }

    /// The database cannot be reached (as opposed to refusing a statement).
    pub fn is_unreachable(&self) -> bool {
        match self {
            DbError::Postgres(e) => e.is_closed() || e.as_db_error().is_none(),
            DbError::Gone(_) => true,
            _ => false,
        }
    }
}

pub(crate) type DbResult<T> = std::result::Result<T, DbError>;

/// One row, as plain values.
#[derive(Debug)]
pub(crate) struct Row(pub(crate) Vec<Value>);

/// What a column reads as.
pub(crate) trait FromValue: Sized {
    fn from_value(v: &Value, column: usize) -> DbResult<Self>;
}

impl Row {
    pub(crate) fn get<T: FromValue>(&self, column: usize) -> DbResult<T> {
        let v = self
            .0
            .get(column)
            .ok_or_else(|| DbError::decode(column, "no such column"))?;
        T::from_value(v, column)
    }
}

fn wrong(v: &Value, column: usize, want: &str) -> DbError {
    let found = match v {
        Value::Null => "NULL",
        Value::Int(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    };
    DbError::decode(column, format!("expected {want}, found {found}"))
}

impl FromValue for i64 {
    fn from_value(v: &Value, column: usize) -> DbResult<i64> {
        match v {
            Value::Int(i) => Ok(*i),
            _ => Err(wrong(v, column, "an integer")),
        }
    }
}

impl FromValue for i32 {
    fn from_value(v: &Value, column: usize) -> DbResult<i32> {
        i32::try_from(i64::from_value(v, column)?).map_err(|e| DbError::decode(column, e))
    }
}

impl FromValue for u64 {
    fn from_value(v: &Value, column: usize) -> DbResult<u64> {
        u64::try_from(i64::from_value(v, column)?).map_err(|e| DbError::decode(column, e))
    }
}

impl FromValue for u32 {
    fn from_value(v: &Value, column: usize) -> DbResult<u32> {
        u32::try_from(i64::from_value(v, column)?).map_err(|e| DbError::decode(column, e))
    }
}

impl FromValue for usize {
    fn from_value(v: &Value, column: usize) -> DbResult<usize> {
        usize::try_from(i64::from_value(v, column)?).map_err(|e| DbError::decode(column, e))
    }
}

impl FromValue for bool {
    fn from_value(v: &Value, column: usize) -> DbResult<bool> {
        Ok(i64::from_value(v, column)? != 0)
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value, column: usize) -> DbResult<f64> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            _ => Err(wrong(v, column, "a number")),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value, column: usize) -> DbResult<String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            _ => Err(wrong(v, column, "text")),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: &Value, column: usize) -> DbResult<Vec<u8>> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            _ => Err(wrong(v, column, "a blob")),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value, column: usize) -> DbResult<Option<T>> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v, column).map(Some),
        }
    }
}

/// A connection or a transaction, whichever database it is.
pub(crate) trait Sql {
    fn dialect(&self) -> Dialect;

    /// Runs one statement; the number of rows it changed.
    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64>;

    /// Runs one query, handing each row to `f` as it comes (nothing is collected).
    fn each(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        f: &mut dyn FnMut(&Row) -> DbResult<()>,
    ) -> DbResult<()>;

    /// Runs several statements without arguments (migrations).
    fn batch(&mut self, sql: &str) -> DbResult<()>;
}

/// The conveniences every [`Sql`] has.
pub(crate) trait SqlExt: Sql {
    /// Every row of a query, each made into a `T`.
    fn query_map<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        mut f: impl FnMut(&Row) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, args, &mut |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row of a query; [`DbError::NotFound`] if there is none (see
    /// [`Optional::optional`]).
    fn query_row<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        f: impl FnOnce(&Row) -> DbResult<T>,
    ) -> DbResult<T> {
        let mut first = None;
        self.each(sql, args, &mut |r| {
            if first.is_none() {
                first = Some(Row(r.0.clone()));
            }
            Ok(())
        })?;
        f(&first.ok_or(DbError::NotFound)?)
    }
}

impl<S: Sql + ?Sized> SqlExt for S {}

/// A missing row as `None` rather than an error.
pub(crate) trait Optional<T> {
    fn optional(self) -> DbResult<Option<T>>;
}

impl<T> Optional<T> for DbResult<T> {
    fn optional(self) -> DbResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A row's values as text (`None`: NULL), as the simple query protocol answers.
pub(crate) type TextRow = Vec<Option<String>>;

/// A connection that can open a write transaction.
pub(crate) trait Conn: Sql + Send {
    /// A transaction that holds the store's write lock until it commits or is dropped (rolled
    /// back): SQLite's `BEGIN IMMEDIATE`, PostgreSQL's transaction-scoped advisory lock.
    fn begin(&mut self) -> DbResult<Box<dyn Tx + '_>>;

    /// A transaction that holds the write lock shared with other writers' group commits and
    /// excluded by every [`Conn::begin`]: a halt committed before it began is seen by it,
    /// and one committed after waits for it. SQLite has one writer at a time anyway.
    fn begin_shared(&mut self) -> DbResult<Box<dyn Tx + '_>> {
        self.begin()
    }

    /// [`Conn::begin_shared`], then `first` inside the transaction in the same round trip
    /// where the database takes several statements in one message (PostgreSQL), returning
    /// its one row's values as text; `None` where it was not run (the caller runs its own
    /// query). `first` has no placeholders: every value in it must be inlined by a caller
    /// that knows it safe (numbers, identifiers Aether made).
    fn begin_shared_then(&mut self, first: &str) -> DbResult<(Box<dyn Tx + '_>, Option<TextRow>)> {
        let _ = first;
        Ok((self.begin_shared()?, None))
    }
}

/// A write transaction; dropped without [`Tx::commit`], it rolls back.
pub(crate) trait Tx: Sql {
    fn commit(self: Box<Self>) -> DbResult<()>;
}
