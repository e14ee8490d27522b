//! The two databases every store test runs on.

use aether_store::Store;

/// Runs each named `async fn NAME(b: Backend)` as two tests, `NAME::sqlite` and
/// `NAME::postgres`.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::db::Backend::Sqlite).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::db::Backend::Postgres).await
            }
        }
    )*};
}

#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The local PostgreSQL the tests use (trust auth; `scripts/test.sh` starts it if needed).
pub fn postgres_base() -> String {
    std::env::var("AETHER_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Runs `f` with a plain client on a thread of its own (the client blocks on a runtime of
/// its own, which tokio forbids on a thread driving tasks).
pub fn with_postgres<T: Send>(f: impl FnOnce(&mut postgres::Client) -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut client = postgres::Client::connect(&postgres_base(), postgres::NoTls)
                .expect("the local PostgreSQL (see scripts/test.sh)");
            f(&mut client)
        })
        .join()
        .unwrap()
    })
}

/// Where one test's store lives; dropping it removes it.
pub enum Db {
    Sqlite(tempfile::TempDir),
    Postgres { schema: String, url: String },
}

impl Backend {
    /// A new, empty store.
    pub fn store(self) -> (Db, Store) {
        let db = match self {
            Backend::Sqlite => Db::Sqlite(tempfile::tempdir().unwrap()),
            Backend::Postgres => {
                use std::sync::atomic::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let schema = format!(
                    "t_{}_{}_{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed),
                    aether_store::now_us() % 1_000_000
                );
                with_postgres(|c| c.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap());
                let url = format!("{}?options=-csearch_path%3D{schema}", postgres_base());
                Db::Postgres { schema, url }
            }
        };
        let store = db.open();
        (db, store)
    }
}

impl Db {
    pub fn url(&self) -> String {
        match self {
            Db::Sqlite(dir) => format!(
                "sqlite://{}",
                dir.path().join(".aether/aether.db").display()
            ),
            Db::Postgres { url, .. } => url.clone(),
        }
    }

    /// Another handle on the same store, as another process would open it.
    pub fn open(&self) -> Store {
        self.try_open().unwrap()
    }

    pub fn try_open(&self) -> aether_store::Result<Store> {
        Store::open_url(&self.url())
    }

    /// Runs `sql` on the store's tables directly, as an attacker with access to them would.
    pub fn raw(&self, sql: &str) {
        match self {
            Db::Sqlite(dir) => rusqlite::Connection::open(dir.path().join(".aether/aether.db"))
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Db::Postgres { schema, .. } => with_postgres(|c| {
                c.batch_execute(&format!("SET search_path = {schema}; {sql}"))
                    .unwrap()
            }),
        }
    }

    /// The one integer a query returns.
    pub fn count(&self, sql: &str) -> i64 {
        match self {
            Db::Sqlite(dir) => rusqlite::Connection::open(dir.path().join(".aether/aether.db"))
                .unwrap()
                .query_row(sql, [], |r| r.get(0))
                .unwrap(),
            Db::Postgres { schema, .. } => with_postgres(|c| {
                c.batch_execute(&format!("SET search_path = {schema}"))
                    .unwrap();
                c.query_one(sql, &[]).unwrap().get::<_, i64>(0)
            }),
        }
    }

    /// Marks the store as written by a release with schema version `v`.
    pub fn set_schema_version(&self, v: i64) {
        match self {
            Db::Sqlite(_) => self.raw(&format!("PRAGMA user_version = {v}")),
            Db::Postgres { .. } => self.raw(&format!("INSERT INTO aether_schema VALUES ({v})")),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        match self {
            Db::Sqlite(dir) => dir.path(),
            Db::Postgres { .. } => panic!("a PostgreSQL store has no folder"),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Db::Postgres { schema, .. } = self {
            let schema = schema.clone();
            with_postgres(move |c| {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            });
        }
    }
}
