//! The database pool: PostgreSQL or SQLite, chosen by the URL's scheme.
//!
//! Queries are written once with diesel's DSL inside [`with_conn!`](crate::with_conn), which expands
//! the body once per backend (one source, type-checked against each). Store functions take a
//! [`DbConn`], so the same function runs on a pooled connection or inside a transaction opened with
//! [`write_tx!`](crate::write_tx) (`BEGIN IMMEDIATE` on SQLite, where deferred write transactions
//! fail under concurrency).

use std::sync::OnceLock;
use std::time::Duration;

use diesel::migration::MigrationSource;
use diesel::result::{DatabaseErrorKind, Error as QueryError};
#[cfg(feature = "postgres")]
use diesel_async::AsyncConnection;
#[cfg(feature = "postgres")]
use diesel_async::AsyncPgConnection;
use diesel_async::SimpleAsyncConnection;
#[cfg(feature = "postgres")]
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::pooled_connection::deadpool::Object;
#[cfg(feature = "sqlite")]
use diesel_async::pooled_connection::deadpool::Pool;
#[cfg(feature = "sqlite")]
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_migrations::EmbeddedMigrations;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use diesel_migrations::MigrationHarness;

mod cached;
#[cfg(feature = "sqlite")]
mod checkpoint;
mod group;
#[cfg(feature = "postgres")]
mod postgres;
mod rendered;
#[cfg(feature = "postgres")]
mod shared;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use cached::Cached;
pub use group::GroupCommit;
#[cfg(feature = "postgres")]
pub use postgres::{PgPool, pin_thread};
pub use rendered::Rendered;
#[cfg(feature = "postgres")]
pub use shared::SharedPg;

/// See the PostgreSQL build's `pin_thread`: without PostgreSQL there is nothing to pin.
#[cfg(not(feature = "postgres"))]
pub fn pin_thread(_index: usize) {}

#[cfg(feature = "sqlite")]
pub use sqlite::{
    InIds, SqliteConn, SqlitePool, SqliteRunQueryDsl, SqliteTransactions, in_ids, in_texts,
};

/// The default database: an SQLite file created with its folder on first start.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/keel.db";

/// Started when this process opens its first SQLite pool: from then on units of work run there
/// (see [`spawn_unit`]).
static UNIT_RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// Key of the PostgreSQL advisory lock held while migrating, so that replicas starting together
/// do not race (the value is arbitrary but fixed: "keel" in ASCII).
#[cfg(feature = "postgres")]
const MIGRATION_LOCK_KEY: i64 = 0x6b65_656c;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(
        "unsupported DATABASE_URL {0:?}: use postgres://..., postgresql://... or sqlite://PATH"
    )]
    UnsupportedUrl(String),
    #[error(
        "this build has no {0} support: rebuild with the `{0}` feature, or use another DATABASE_URL"
    )]
    NotBuilt(&'static str),
    #[error("cannot open the database: {0}")]
    Connect(String),
    #[error("no database connection available: {0}")]
    Pool(String),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A unit of work that did not finish: it panicked, or its runtime shut down (see
    /// [`crate::unit`]). A 500, never a 503: retrying would not help.
    #[error("unit of work failed: {0}")]
    Unit(String),
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for DbError {
    fn from(e: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        DbError::Pool(e.to_string())
    }
}

/// Which database a URL names (whether or not this build has its feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgresql",
            Backend::Sqlite => "sqlite",
        }
    }

    /// The kernel feature that builds this backend in.
    pub fn feature(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }

    /// Whether this build has the backend (its kernel feature).
    pub fn is_built(self) -> bool {
        match self {
            Backend::Postgres => cfg!(feature = "postgres"),
            Backend::Sqlite => cfg!(feature = "sqlite"),
        }
    }
}

/// Splits a `DATABASE_URL` into its backend and the string diesel connects with. SQLite accepts
/// `sqlite://PATH`, `sqlite:PATH` and `sqlite::memory:`; anything else with a scheme is refused
/// so that a typo cannot silently create an empty database.
pub fn parse_url(url: &str) -> Result<(Backend, String), DbError> {
    let url = url.trim();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_owned()));
    }
    if let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        if rest.is_empty() {
            return Err(DbError::UnsupportedUrl(url.to_owned()));
        }
        return Ok((Backend::Sqlite, rest.to_owned()));
    }
    Err(DbError::UnsupportedUrl(url.to_owned()))
}

/// A pool of connections to one database. A variant exists when its kernel feature is on.
#[derive(Clone)]
pub enum DbPool {
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    #[cfg(feature = "sqlite")]
    Sqlite(SqlitePool),
}

/// The default bound of [`DbPool::connect`] on waiting for a connection (`DATABASE_TIMEOUT_SECONDS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A pool's connections at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    /// The most connections the pool opens.
    pub max_size: usize,
    /// Connections lent out.
    pub in_use: usize,
    /// Connections open and idle in the pool.
    pub idle: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
}

/// A connection of either backend, borrowed from a pool or from an open transaction.
pub enum DbConn<'a> {
    /// Checked out of the pool, or in a transaction: this caller's alone.
    #[cfg(feature = "postgres")]
    Postgres(&'a mut AsyncPgConnection),
    /// Shared with concurrent callers, for reads outside a transaction ([`DbPool::read`]).
    #[cfg(feature = "postgres")]
    PostgresShared(&'a AsyncPgConnection),
    #[cfg(feature = "sqlite")]
    Sqlite(&'a mut SqliteConn),
}

impl DbConn<'_> {
    /// The connection's backend: for the rare statement written per dialect.
    pub fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "postgres")]
            DbConn::Postgres(_) | DbConn::PostgresShared(_) => Backend::Postgres,
            #[cfg(feature = "sqlite")]
            DbConn::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// The PostgreSQL connection, borrowed shared: what [`with_conn!`](crate::with_conn) runs
    /// statements on (diesel-async runs a statement the same through either borrow).
    #[cfg(feature = "postgres")]
    #[doc(hidden)]
    pub fn postgres(&self) -> Option<&AsyncPgConnection> {
        match self {
            DbConn::Postgres(c) => Some(c),
            DbConn::PostgresShared(c) => Some(c),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// A connection checked out of a [`DbPool`]; returns to the pool when dropped.
#[allow(clippy::large_enum_variant)] // short-lived, on the stack of one request
pub enum PooledConn {
    #[cfg(feature = "postgres")]
    Postgres(Object<AsyncPgConnection>),
    #[cfg(feature = "postgres")]
    PostgresShared(std::sync::Arc<SharedPg>),
    #[cfg(feature = "sqlite")]
    Sqlite(Object<SqliteConn>),
}

impl PooledConn {
    /// The connection, for store functions.
    pub fn conn(&mut self) -> DbConn<'_> {
        match self {
            #[cfg(feature = "postgres")]
            PooledConn::Postgres(o) => DbConn::Postgres(o),
            #[cfg(feature = "postgres")]
            PooledConn::PostgresShared(c) => DbConn::PostgresShared(c),
            #[cfg(feature = "sqlite")]
            PooledConn::Sqlite(o) => DbConn::Sqlite(o),
        }
    }
}

/// An SQLite connection checked out for a [`write_tx!`](crate::write_tx): when the transaction's
/// future is dropped between two statements (outside a unit of work, which is never dropped), the
/// transaction is rolled back here at once, so that it does not keep SQLite's write lock until
/// the pool next recycles the connection.
#[cfg(feature = "sqlite")]
#[doc(hidden)]
pub struct SqliteTxConn(Object<SqliteConn>);

#[cfg(feature = "sqlite")]
impl SqliteTxConn {
    pub fn new(conn: Object<SqliteConn>) -> Self {
        SqliteTxConn(conn)
    }
}

#[cfg(feature = "sqlite")]
impl std::ops::Deref for SqliteTxConn {
    type Target = SqliteConn;
    fn deref(&self) -> &SqliteConn {
        &self.0
    }
}

#[cfg(feature = "sqlite")]
impl std::ops::DerefMut for SqliteTxConn {
    fn deref_mut(&mut self) -> &mut SqliteConn {
        &mut self.0
    }
}

#[cfg(feature = "sqlite")]
impl Drop for SqliteTxConn {
    fn drop(&mut self) {
        self.0.rollback_open();
    }
}

impl DbPool {
    /// Opens a pool for `url` (see [`parse_url`]). For SQLite the file's folder is created, every
    /// connection gets WAL mode, a busy timeout, foreign keys and `synchronous=NORMAL`, and the
    /// pool makes the file's checkpoints on a database thread (see `db/checkpoint.rs`).
    pub async fn connect(url: &str, max_size: usize) -> Result<Self, DbError> {
        Self::connect_with_timeout(url, max_size, DEFAULT_TIMEOUT).await
    }

    /// [`DbPool::connect`] with its bound on waiting: a checkout waits at most `timeout` for a
    /// free connection, and opening a new connection takes at most `timeout`; past it the
    /// caller gets a lost-connection error (503 with `Retry-After`) rather than hanging.
    pub async fn connect_with_timeout(
        url: &str,
        max_size: usize,
        timeout: Duration,
    ) -> Result<Self, DbError> {
        let (backend, target) = parse_url(url)?;
        match backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres => {
                let cores = std::thread::available_parallelism().map_or(1, usize::from);
                let pool = PgPool::new(&target, max_size, cores, timeout)?;
                // Checked on a connection of its own: one opened here would be driven by this
                // thread for as long as it lived (see `PgPool`).
                let mut probe = pool.get().await?;
                probe.batch_execute("SELECT 1").await?;
                drop(Object::take(probe));
                Ok(DbPool::Postgres(pool))
            }
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => {
                let in_memory = target == ":memory:";
                let path = target.clone();
                tokio::task::spawn_blocking(move || create_parent_folder(&path))
                    .await
                    .map_err(|e| DbError::Connect(e.to_string()))??;
                // The connection cannot be lost under a query (it is a file), so checking it out
                // runs no test statement; a connection left in a transaction is still discarded.
                let mut config = ManagerConfig::<SqliteConn>::default();
                config.recycling_method = RecyclingMethod::Fast;
                if !in_memory {
                    config.custom_setup = Box::new(|path| {
                        Box::pin(std::future::ready(SqliteConn::open_pooled(path)))
                    });
                }
                let manager = AsyncDieselConnectionManager::<SqliteConn>::new_with_config(
                    target.clone(),
                    config,
                );
                // Every `:memory:` connection is a separate database, so it gets exactly one.
                let size = if in_memory { 1 } else { max_size.max(1) };
                let pool = Pool::builder(manager)
                    .max_size(size)
                    .runtime(deadpool::Runtime::Tokio1)
                    .wait_timeout(Some(timeout))
                    .create_timeout(Some(timeout))
                    .build()
                    .map_err(|e| DbError::Connect(e.to_string()))?;
                start_unit_runtime(size)?;
                let units = unit_runtime()
                    .ok_or_else(|| DbError::Connect("the database threads did not start".into()))?;
                let file = (!in_memory).then_some((target, &units));
                let db = DbPool::Sqlite(SqlitePool::new(pool, file));
                db.ping().await?;
                Ok(db)
            }
            #[allow(unreachable_patterns)]
            missing => {
                let _ = (max_size, timeout, target);
                Err(DbError::NotBuilt(missing.feature()))
            }
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "postgres")]
            DbPool::Postgres(_) => Backend::Postgres,
            #[cfg(feature = "sqlite")]
            DbPool::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// How many connections the pool holds, lends out and is waited for.
    pub fn status(&self) -> PoolStatus {
        let status = match self {
            #[cfg(feature = "postgres")]
            DbPool::Postgres(p) => p.status(),
            #[cfg(feature = "sqlite")]
            DbPool::Sqlite(p) => p.status(),
        };
        PoolStatus {
            max_size: status.max_size,
            in_use: status.size.saturating_sub(status.available),
            idle: status.available,
            waiting: status.waiting,
        }
    }

    /// Checks a connection out of the pool.
    pub async fn get(&self) -> Result<PooledConn, DbError> {
        Ok(match self {
            #[cfg(feature = "postgres")]
            DbPool::Postgres(p) => PooledConn::Postgres(p.get().await?),
            #[cfg(feature = "sqlite")]
            DbPool::Sqlite(p) => PooledConn::Sqlite(p.get().await?),
        })
    }

    /// A connection for reads outside a transaction: on PostgreSQL one shared with the requests
    /// running at once, their statements pipelined (see `shared`); on SQLite one checked out
    /// like [`DbPool::get`]. Only statements that read: a write can wait for a row lock, and on
    /// a shared connection every statement queued behind it would wait too (PostgreSQL's reads
    /// wait for no row lock), and nothing that changes the session may run on it.
    pub async fn read(&self) -> Result<PooledConn, DbError> {
        match self {
            #[cfg(feature = "postgres")]
            DbPool::Postgres(p) => Ok(PooledConn::PostgresShared(p.shared().await?)),
            #[allow(unreachable_patterns)]
            _ => self.get().await,
        }
    }

    /// Runs `SELECT 1`: the readiness check.
    pub async fn ping(&self) -> Result<(), DbError> {
        let mut pooled = self.get().await?;
        crate::with_conn!(&mut pooled.conn(), |c| c.batch_execute("SELECT 1").await)?;
        Ok(())
    }
}

/// Starts `work`, a unit of database work (such as one service call), on its own: a task of the
/// caller's runtime, or, once the process has an SQLite pool, a task of the *unit runtime*, a
/// few threads kept for database work on which SQLite's statements run inline, inside the poll
/// that issues them (so a unit hands off once, not once per statement, and never blocks an HTTP
/// worker). Either way the unit is not tied to its caller: a caller dropped at any `.await` (the
/// client went away, a timeout fired, a later extractor failed) leaves the unit to complete, or
/// roll back, where it runs, instead of being cut off between two statements of a transaction.
///
/// A unit that awaits something other than SQLite (a pooled connection, a provider, Redis)
/// yields its thread meanwhile. A [`write_tx!`](crate::write_tx) body must await database work
/// only: its statements then run in one poll, so no transaction holds SQLite's write lock while
/// its unit waits for a thread.
///
/// Modules do not call this: their services are wrapped once in [`crate::unit::Detached`],
/// which starts a unit for each call made outside one and runs calls made inside one inline.
/// Spawn a unit by hand only for work nobody waits for (a mail sent in the background).
pub fn spawn_unit<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    // Marked for its whole run, so that service calls made inside it run inline
    // (`kernel::unit::run`) instead of starting a unit of their own.
    let work = crate::unit::mark(work);
    match UNIT_RUNTIME.get() {
        Some(units) => units.spawn(work),
        None => tokio::spawn(work),
    }
}

/// The unit runtime, once the process has one (see [`spawn_unit`]).
pub(crate) fn unit_runtime() -> Option<tokio::runtime::Handle> {
    UNIT_RUNTIME.get().map(|units| units.handle().clone())
}

/// Starts the unit runtime (see [`spawn_unit`]) when the first SQLite pool opens: a
/// multi-threaded tokio runtime with a thread per connection of that pool, and at least one per
/// core. Units queue there in the order they came (tokio's injection queue is FIFO) instead of
/// each waking a blocking thread of its own: under load a thread that finishes a unit takes the
/// next without sleeping, and no more threads compete for the cores than can use a connection.
/// A thread blocked in a statement (SQLite's busy timeout: another writer holds the lock) waits
/// for a writer that is running, here or in another process, never for one that waits for a
/// thread: a write transaction's statements all run within one poll of its unit.
#[cfg(feature = "sqlite")]
pub(crate) fn start_unit_runtime(pool_size: usize) -> Result<(), DbError> {
    if UNIT_RUNTIME.get().is_some() {
        return Ok(());
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(pool_size.max(cores))
        // Each thread takes its next unit from the shared queue, one at a time, before looking
        // at its own. By default a thread moves a batch of queued units to its own queue, where
        // they wait behind that thread's units (and behind whatever the OS runs on its core)
        // while units queued after them run first elsewhere: under load the slowest list
        // requests took 2.7 times the median instead of 1.9.
        .global_queue_interval(1)
        .thread_name("keel-db")
        .on_thread_start(sqlite::enter_unit_thread)
        .enable_all()
        .build()
        .map_err(|e| DbError::Connect(format!("cannot start the database threads: {e}")))?;
    if let Err(runtime) = UNIT_RUNTIME.set(runtime) {
        // Another pool started one first: this one is not needed.
        runtime.shutdown_background();
    }
    Ok(())
}

/// Applies the pending migrations of each set, in order. On PostgreSQL this holds an advisory
/// lock, on SQLite a write transaction, so that several instances can start at once. Needs tokio's multi-threaded runtime.
pub async fn migrate(url: &str, sets: &[MigrationSet]) -> Result<(), DbError> {
    let (backend, target) = parse_url(url)?;
    match backend {
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let mut conn = AsyncPgConnection::establish(&target)
                .await
                .map_err(|e| DbError::Connect(e.to_string()))?;
            conn.batch_execute(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})"))
                .await?;
            let sets: Vec<MigrationSet> = sets.to_vec();
            let (conn, result) = tokio::task::spawn_blocking(move || {
                let mut wrapped = AsyncConnectionWrapper::<AsyncPgConnection>::from(conn);
                let result = sets.iter().try_for_each(|set| {
                    wrapped
                        .run_pending_migrations(Source(set.postgres))
                        .map(drop)
                        .map_err(|e| DbError::Migration(format!("{}: {e}", set.module)))
                });
                (wrapped.into_inner(), result)
            })
            .await
            .map_err(|e| DbError::Migration(e.to_string()))?;
            let mut conn = conn;
            let unlocked = conn
                .batch_execute(&format!("SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"))
                .await;
            result?;
            unlocked?;
            Ok(())
        }
        #[cfg(feature = "sqlite")]
        Backend::Sqlite => {
            let sets: Vec<MigrationSet> = sets.to_vec();
            tokio::task::spawn_blocking(move || {
                use diesel::Connection;
                create_parent_folder(&target)?;
                let mut conn = diesel::SqliteConnection::establish(&target)
                    .map_err(|e| DbError::Connect(e.to_string()))?;
                sqlite::apply_pragmas(&mut conn)?;
                // One write transaction around every set: a second process migrating the same
                // file at once waits (busy timeout), then finds the versions applied.
                conn.immediate_transaction(|conn| {
                    sets.iter().try_for_each(|set| {
                        conn.run_pending_migrations(Source(set.sqlite))
                            .map(drop)
                            .map_err(|e| DbError::Migration(format!("{}: {e}", set.module)))
                    })
                })
            })
            .await
            .map_err(|e| DbError::Migration(e.to_string()))?
        }
        #[allow(unreachable_patterns)]
        missing => {
            let _ = (target, sets);
            Err(DbError::NotBuilt(missing.feature()))
        }
    }
}

/// Creates the folder of an SQLite file (not for `:memory:`).
#[cfg(feature = "sqlite")]
fn create_parent_folder(path: &str) -> Result<(), DbError> {
    let folder = std::path::Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty());
    match folder {
        Some(dir) if path != ":memory:" => std::fs::create_dir_all(dir)
            .map_err(|e| DbError::Connect(format!("cannot create {}: {e}", dir.display()))),
        _ => Ok(()),
    }
}

/// One module's migrations for both backends (mirrored version names).
#[derive(Clone, Copy)]
pub struct MigrationSet {
    pub module: &'static str,
    pub postgres: &'static EmbeddedMigrations,
    pub sqlite: &'static EmbeddedMigrations,
}

/// Lends a `&'static EmbeddedMigrations` to the harness (which takes its source by value).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
struct Source(&'static EmbeddedMigrations);

#[cfg(any(feature = "postgres", feature = "sqlite"))]
impl<DB: diesel::backend::Backend> MigrationSource<DB> for Source {
    fn migrations(
        &self,
    ) -> diesel::migration::Result<Vec<Box<dyn diesel::migration::Migration<DB>>>> {
        MigrationSource::<DB>::migrations(self.0)
    }
}

impl DbError {
    /// True when the database could not be reached or the connection was lost under the query
    /// (the server restarted, the connection was killed, the pool could not open one): the
    /// request may succeed if retried, so it is a 503, not a 500.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            DbError::Connect(_) | DbError::Pool(_) => true,
            DbError::Query(QueryError::DatabaseError(kind, info)) => {
                matches!(kind, DatabaseErrorKind::ClosedConnection) || {
                    // The first is PostgreSQL's own (SQLSTATE 57P01 and kin); the others are the
                    // client's transport errors, which carry no SQLSTATE.
                    let message = info.message();
                    message.contains("terminating connection")
                        || message.contains("connection closed")
                        || message.contains("server closed the connection")
                        || message.contains("error communicating with the server")
                        || message.contains("error connecting to server")
                        || message.contains("timeout waiting for server")
                }
            }
            _ => false,
        }
    }

    /// True when the query failed on a unique constraint (the same kind on both backends): the
    /// usual way to answer 409 for a name or slug taken by a concurrent write.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, DbError::Query(e) if is_unique_violation(e))
    }

    /// True when PostgreSQL failed the transaction to let a concurrent one through: it broke a
    /// deadlock (SQLSTATE 40P01, which diesel does not name: known by PostgreSQL's message) or
    /// could not serialize it (40001). Nothing of it was written; running it again is the remedy.
    pub fn is_concurrency_failure(&self) -> bool {
        match self {
            DbError::Query(QueryError::DatabaseError(
                DatabaseErrorKind::SerializationFailure,
                _,
            )) => true,
            DbError::Query(QueryError::DatabaseError(_, info)) => {
                info.message() == "deadlock detected"
            }
            _ => false,
        }
    }
}

/// True when a query failed on a unique constraint (the same kind on both backends).
pub fn is_unique_violation(e: &QueryError) -> bool {
    matches!(
        e,
        QueryError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)
    )
}

/// Runs a query body against a [`DbConn`], expanded once per backend this build has (the
/// kernel's `postgres` and `sqlite` features) so that each expansion is type-checked against its
/// concrete connection:
///
/// ```text
/// with_conn!(conn, |c| users::table.find(id).first::<UserRow>(c).await.optional())
/// ```
///
/// On PostgreSQL `c` is a `&mut &AsyncPgConnection`: a shared borrow, which diesel-async runs
/// statements through as it does an exclusive one, so that one body serves a connection of the
/// caller's own and one shared with concurrent callers ([`DbPool::read`]).
///
/// The rare dialect difference takes one arm per backend:
/// `with_conn!(conn, postgres |c| ..., sqlite |c| ...)`.
///
/// The arms are chosen by the kernel's features, not the caller's: a crate built for PostgreSQL
/// alone still compiles its SQLite arm when another crate of the same build turns SQLite on.
#[macro_export]
macro_rules! with_conn {
    ($conn:expr, |$c:ident| $body:expr) => {
        $crate::with_conn!($conn, postgres | $c | $body, sqlite | $c | $body)
    };
    ($conn:expr, postgres |$pc:ident| $pbody:expr, sqlite |$sc:ident| $sbody:expr) => {{
        let conn: &mut $crate::db::DbConn<'_> = $conn;
        #[allow(irrefutable_let_patterns, unreachable_code)]
        let result = 'conn: {
            $crate::__postgres! {
                if let Some(shared) = conn.postgres() {
                    #[allow(unused_imports)]
                    use $crate::diesel_async::RunQueryDsl as _;
                    let mut shared: &$crate::diesel_async::AsyncPgConnection = shared;
                    let $pc = &mut shared;
                    break 'conn $pbody;
                }
            }
            $crate::__sqlite! {
                if let $crate::db::DbConn::Sqlite($sc) = conn {
                    #[allow(unused_imports)]
                    use $crate::db::SqliteRunQueryDsl as _;
                    let $sc: &mut $crate::db::SqliteConn = &mut **$sc;
                    break 'conn $sbody;
                }
            }
            unreachable!("a connection of a backend this build does not have")
        };
        result
    }};
}

/// Runs `body` in a write transaction (`BEGIN IMMEDIATE` on SQLite, `BEGIN` on PostgreSQL) with
/// `tx: &mut DbConn` in scope and evaluates to its `Result`. Commits when the body returns `Ok`,
/// rolls back on `Err`. The error
/// type must implement `From<diesel::result::Error>` and `From<kernel::DbError>`:
///
/// ```text
/// let user = write_tx!(&self.pool, AuthError, |tx| {
///     let user = store::insert(tx, &new).await?;
///     Ok(user)
/// })?;
/// ```
#[macro_export]
macro_rules! write_tx {
    ($pool:expr, $err:ty, |$tx:ident| $body:expr) => {{
        let pool: &$crate::db::DbPool = $pool;
        #[allow(irrefutable_let_patterns, unreachable_code)]
        let result = 'tx: {
            $crate::__postgres! {
                if let $crate::db::DbPool::Postgres(p) = pool {
                    break 'tx async {
                        let mut o = p
                            .get()
                            .await
                            .map_err(|e| <$err>::from($crate::db::DbError::from(e)))?;
                        let c: &mut $crate::diesel_async::AsyncPgConnection = &mut o;
                        $crate::diesel_async::AsyncConnection::transaction(
                            c,
                            async |c| -> ::std::result::Result<_, $err> {
                                let mut $tx = $crate::db::DbConn::Postgres(c);
                                #[allow(unused_mut)]
                                let $tx = &mut $tx;
                                $body
                            },
                        )
                        .await
                    }
                    .await;
                }
            }
            $crate::__sqlite! {
                if let $crate::db::DbPool::Sqlite(p) = pool {
                    break 'tx $crate::__sqlite_tx!(p, $err, true, begin_immediate, |$tx| $body);
                }
            }
            unreachable!("a pool of a backend this build does not have")
        };
        result
    }};
}

/// Runs `body` with `conn: &mut DbConn` in scope on one pooled connection, its statements reading
/// one snapshot, and evaluates to its `Result`: on SQLite inside a read transaction (`BEGIN` ...
/// `COMMIT`), so that what they read agrees (a page, its total and its tags) and the WAL read lock
/// is taken once instead of once per statement; on PostgreSQL as they are, each statement its own
/// snapshot (a transaction would cost two more round trips), on a connection shared with
/// concurrent requests ([`DbPool::read`]). For reads only: writes go through
/// [`write_tx!`](crate::write_tx). The error type must implement `From<diesel::result::Error>` and
/// `From<kernel::DbError>`:
///
/// ```text
/// let page = read_snapshot!(&self.pool, BlogError, |conn| {
///     let rows = store::list_posts(conn, filter).await?;
///     Ok(with_tags(conn, rows).await?)
/// })?;
/// ```
#[macro_export]
macro_rules! read_snapshot {
    ($pool:expr, $err:ty, |$conn:ident| $body:expr) => {{
        let pool: &$crate::db::DbPool = $pool;
        #[allow(irrefutable_let_patterns, unreachable_code)]
        let result = 'read: {
            $crate::__postgres! {
                if let $crate::db::DbPool::Postgres(p) = pool {
                    break 'read async {
                        let shared = p.shared().await.map_err(<$err>::from)?;
                        let mut $conn = $crate::db::DbConn::PostgresShared(&shared);
                        #[allow(unused_mut)]
                        let $conn = &mut $conn;
                        $body
                    }
                    .await;
                }
            }
            $crate::__sqlite! {
                if let $crate::db::DbPool::Sqlite(p) = pool {
                    break 'read $crate::__sqlite_tx!(p, $err, false, begin_read, |$conn| $body);
                }
            }
            unreachable!("a pool of a backend this build does not have")
        };
        result
    }};
}

/// Its tokens when the kernel is built with PostgreSQL, nothing otherwise: chosen here, by the
/// kernel's features, because a `cfg` in a macro's expansion would read the caller's.
#[cfg(feature = "postgres")]
#[doc(hidden)]
#[macro_export]
macro_rules! __postgres {
    ($($t:tt)*) => { $($t)* };
}

#[cfg(not(feature = "postgres"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __postgres {
    ($($t:tt)*) => {};
}

/// Its tokens when the kernel is built with SQLite, nothing otherwise (see `__postgres!`).
#[cfg(feature = "sqlite")]
#[doc(hidden)]
#[macro_export]
macro_rules! __sqlite {
    ($($t:tt)*) => { $($t)* };
}

#[cfg(not(feature = "sqlite"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __sqlite {
    ($($t:tt)*) => {};
}

/// The SQLite arm of [`write_tx!`](crate::write_tx) and [`read_snapshot!`](crate::read_snapshot):
/// checks a connection out of pool `p` (when `$write`, after taking the pool's turn to write:
/// [`SqlitePool::write_turn`]), opens a transaction with `$begin`
/// ([`SqliteConn::begin_immediate`] or [`SqliteConn::begin_read`]), runs `body` with
/// `$tx: &mut DbConn`, commits on `Ok` and rolls back on `Err`. The connection is held in a
/// [`SqliteTxConn`], which rolls back at once when the future is dropped between two statements
/// (outside a unit of work).
#[doc(hidden)]
#[macro_export]
macro_rules! __sqlite_tx {
    ($p:expr, $err:ty, $write:literal, $begin:ident, |$tx:ident| $body:expr) => {
        async {
            // A write transaction holds the pool's turn to write until it ends (see
            // `SqlitePool`); taken before the connection, so that waiting for it holds none.
            let _turn = if $write { $p.write_turn().await } else { None };
            let mut o = $crate::db::SqliteTxConn::new(
                $p.get()
                    .await
                    .map_err(|e| <$err>::from($crate::db::DbError::from(e)))?,
            );
            let c: &mut $crate::db::SqliteConn = &mut o;
            c.$begin().map_err(<$err>::from)?;
            let result: ::std::result::Result<_, $err> = async {
                let mut $tx = $crate::db::DbConn::Sqlite(&mut *c);
                #[allow(unused_mut)]
                let $tx = &mut $tx;
                $body
            }
            .await;
            match result {
                Ok(value) => c.commit().map(|()| value).map_err(<$err>::from),
                Err(e) => {
                    // A failed rollback marks the connection broken: the pool then discards it,
                    // and closing it rolls back.
                    let _ = c.rollback();
                    Err(e)
                }
            }
        }
        .await
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_choose_the_backend() {
        let pg = parse_url("postgres://u@h/db").map(|(b, _)| b).ok();
        assert_eq!(pg, Some(Backend::Postgres));
        let pg2 = parse_url("postgresql://u@h/db").map(|(b, _)| b).ok();
        assert_eq!(pg2, Some(Backend::Postgres));
        let lite = parse_url("sqlite://data/keel.db").ok();
        assert_eq!(lite, Some((Backend::Sqlite, "data/keel.db".to_owned())));
        let mem = parse_url("sqlite::memory:").ok();
        assert_eq!(mem, Some((Backend::Sqlite, ":memory:".to_owned())));
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_checkout_waits_no_longer_than_the_timeout() -> Result<(), DbError> {
        let pool =
            DbPool::connect_with_timeout("sqlite::memory:", 1, Duration::from_millis(200)).await?;
        let held = pool.get().await?;
        // Bounded by a generous outer timeout: a checkout that waited forever would fail here.
        let second = tokio::time::timeout(Duration::from_secs(30), pool.get()).await;
        let Ok(Err(error)) = second else {
            return Err(DbError::Pool(
                "the second checkout did not time out".to_owned(),
            ));
        };
        assert!(error.is_connection_lost(), "{error}");
        drop(held);
        pool.get().await.map(drop)
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn status_counts_lent_and_idle_connections() -> Result<(), DbError> {
        let pool = DbPool::connect("sqlite::memory:", 4).await?;
        let idle = PoolStatus {
            max_size: 1,
            in_use: 0,
            idle: 1,
            waiting: 0,
        };
        assert_eq!(pool.status(), idle);
        let held = pool.get().await?;
        assert_eq!(
            pool.status(),
            PoolStatus {
                in_use: 1,
                idle: 0,
                ..idle
            }
        );
        drop(held);
        assert_eq!(pool.status(), idle);
        Ok(())
    }

    #[test]
    fn transport_errors_are_lost_connections() {
        let query = |message: &str| {
            DbError::Query(QueryError::DatabaseError(
                DatabaseErrorKind::UnableToSendCommand,
                Box::new(message.to_owned()),
            ))
        };
        assert!(query("error communicating with the server").is_connection_lost());
        assert!(query("connection closed").is_connection_lost());
        assert!(!query("error serializing parameter 0").is_connection_lost());
    }

    /// Run by CI on a kernel built for PostgreSQL alone (tests/support/features.sh).
    #[cfg(not(feature = "sqlite"))]
    #[tokio::test]
    async fn a_backend_this_build_lacks_is_refused_naming_its_feature() {
        let error = DbPool::connect("sqlite::memory:", 1).await.err();
        assert_eq!(
            error.map(|e| e.to_string()).as_deref(),
            Some(
                "this build has no sqlite support: rebuild with the `sqlite` feature, or use \
                 another DATABASE_URL"
            )
        );
        let error = migrate("sqlite://x.db", &[]).await.err();
        assert!(matches!(error, Some(DbError::NotBuilt("sqlite"))));
    }

    #[test]
    fn unknown_schemes_are_refused() {
        for url in ["mysql://x", "data/keel.db", "sqlite://", "postgress://x"] {
            assert!(parse_url(url).is_err(), "{url}");
        }
    }
}
