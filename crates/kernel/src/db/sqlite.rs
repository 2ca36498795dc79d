//! SQLite connections that run their statements on the thread that polls them.
//!
//! diesel's SQLite connection is synchronous. diesel-async's `SyncConnectionWrapper` hands every
//! statement to tokio's blocking pool and copies each row back, and when a query future is dropped
//! mid-flight it waits for the statement from the drop, which panics on actix-web's
//! single-threaded workers. [`SqliteConn`] instead runs each statement at once, inside the poll
//! that issues it, and the *unit of work* that holds it runs as a whole on a thread kept for
//! database work ([`spawn_unit`](super::spawn_unit)): one hand-off per unit instead of one per
//! statement, no statement can be cut in half by a drop, and the statements go straight to
//! diesel's own prepared-statement cache, keyed by the query's type, so no SQL text is built for
//! a cached query.
//!
//! Outside a unit (the CLI, tests, start-up) a statement runs in `block_in_place` on a
//! multi-threaded runtime, and inline elsewhere: never a panic, at worst a short block.

use std::cell::Cell;
use std::future::{Ready, ready};
use std::sync::Arc;

use diesel::connection::{
    AnsiTransactionManager as SyncTransactions, CacheSize, Connection, Instrumentation,
    LoadConnection, SimpleConnection, TransactionManager as _, TransactionManagerStatus,
};
use diesel::query_builder::{AsQuery, AstPass, Query, QueryFragment, QueryId};
use diesel::query_dsl::LoadQuery;
use diesel::result::{ConnectionResult, Error as QueryError, QueryResult};
use diesel::row::IntoOwnedRow;
use diesel::sql_types::Untyped;
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel_async::pooled_connection::deadpool::{Object, Pool, PoolError};
use diesel_async::{
    AsyncConnection, AsyncConnectionCore, SimpleAsyncConnection, TransactionManager,
};
use futures_util::stream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::checkpoint::{Checkpoints, POOLED_PRAGMAS};

/// A pool of connections to one SQLite database, and the turn its write transactions take.
///
/// SQLite runs one write transaction at a time. A `BEGIN IMMEDIATE` that finds another
/// connection writing waits in SQLite's busy handler, which blocks its thread and sleeps 1, 2,
/// 5, 10 ms and more between tries: long after the other writer committed, and on whatever
/// thread ran it, an HTTP worker included. So the pool's write transactions
/// ([`write_tx!`](crate::write_tx)) first take their turn here, awaited without blocking a
/// thread, and each starts the moment the one before it ends. Only writes outside
/// `write_tx!` still meet the busy handler: those of another pool or process (the CLI, a
/// backup; the server opens one pool), and single statements run on their own (autocommit),
/// which take SQLite's lock without a turn.
///
/// A pool of a database file also makes its checkpoints on a database thread (see
/// `db/checkpoint.rs`): its connections, opened with
/// [`open_pooled`](SqliteConn::open_pooled), make none.
#[derive(Clone)]
pub struct SqlitePool {
    conns: Pool<SqliteConn>,
    writer: Arc<Semaphore>,
    /// `None` for an in-memory database, which has no WAL.
    checkpoints: Option<Checkpoints>,
}

impl SqlitePool {
    /// The pool of `conns`; with `file`, the path of the database file, and the unit runtime
    /// to run them on, it starts the file's checkpointer.
    pub(super) fn new(
        conns: Pool<SqliteConn>,
        file: Option<(String, &tokio::runtime::Handle)>,
    ) -> Self {
        let writer = Arc::new(Semaphore::new(1));
        let checkpoints = file.map(|(path, units)| Checkpoints::start(units, path, writer.clone()));
        SqlitePool {
            conns,
            writer,
            checkpoints,
        }
    }

    /// Checks a connection out.
    pub async fn get(&self) -> Result<Object<SqliteConn>, PoolError> {
        self.conns.get().await
    }

    pub(super) fn status(&self) -> deadpool::Status {
        self.conns.status()
    }

    /// The pool's turn to write, held until the permit is dropped (after the commit or the
    /// rollback). `None` never happens: the semaphore is never closed. Taking it tells the
    /// pool's checkpointer that a write is under way.
    pub async fn write_turn(&self) -> Option<OwnedSemaphorePermit> {
        let turn = self.writer.clone().acquire_owned().await.ok();
        if let Some(checkpoints) = &self.checkpoints {
            checkpoints.wrote();
        }
        turn
    }
}

/// The busy timeout comes first: switching a new file to WAL takes a lock, and without the
/// timeout in force a second process opening the file at that moment fails at once with
/// `database is locked`.
const PRAGMAS: &str = "PRAGMA busy_timeout=5000; PRAGMA journal_mode=WAL; \
    PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;";

thread_local! {
    /// Set on the threads that run units of work (see `spawn_unit`).
    static IN_UNIT: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as one that runs units of work: statements run inline here.
pub(super) fn enter_unit_thread() {
    IN_UNIT.set(true);
}

/// Runs one statement's blocking work: directly on a unit thread (kept for this work),
/// in `block_in_place` on a multi-threaded runtime's worker, inline anywhere else.
fn blocking<R>(work: impl FnOnce() -> R) -> R {
    if IN_UNIT.get() {
        return work();
    }
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Sets the connection's pragmas. Two processes opening a new file at once both try to switch it
/// to WAL, and SQLite answers one of them `database is locked` at once (waiting could deadlock),
/// busy timeout or not: so the switch is retried for a while.
pub(super) fn apply_pragmas(conn: &mut SqliteConnection) -> QueryResult<()> {
    let mut attempts = 0;
    loop {
        match conn.batch_execute(PRAGMAS) {
            Err(QueryError::DatabaseError(_, info))
                if info.message().contains("locked") && attempts < 100 =>
            {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// diesel-async's `RunQueryDsl` methods for [`SqliteConn`], used by the SQLite arm of
/// [`with_conn!`](crate::with_conn) in its place, so that store code reads the same on both
/// backends. They run the statement with diesel's synchronous `RunQueryDsl`, which reads each row
/// straight from SQLite's statement into the result type; diesel-async's `load` must hand rows
/// back owned, which copies every field into a fresh SQLite value first (two allocations and a
/// copy per field, the largest cost of a page of posts).
pub trait SqliteRunQueryDsl: diesel::RunQueryDsl<SqliteConnection> {
    fn load<'query, U>(self, conn: &mut SqliteConn) -> Ready<QueryResult<Vec<U>>>
    where
        Self: LoadQuery<'query, SqliteConnection, U>,
    {
        ready(blocking(|| {
            diesel::RunQueryDsl::load(self, &mut conn.inner)
        }))
    }

    fn get_results<'query, U>(self, conn: &mut SqliteConn) -> Ready<QueryResult<Vec<U>>>
    where
        Self: LoadQuery<'query, SqliteConnection, U>,
    {
        ready(blocking(|| {
            diesel::RunQueryDsl::load(self, &mut conn.inner)
        }))
    }

    fn get_result<'query, U>(self, conn: &mut SqliteConn) -> Ready<QueryResult<U>>
    where
        Self: LoadQuery<'query, SqliteConnection, U>,
    {
        ready(blocking(|| {
            diesel::RunQueryDsl::get_result(self, &mut conn.inner)
        }))
    }

    fn first<'query, U>(self, conn: &mut SqliteConn) -> Ready<QueryResult<U>>
    where
        Self: diesel::query_dsl::methods::LimitDsl,
        diesel::dsl::Limit<Self>: LoadQuery<'query, SqliteConnection, U>,
    {
        ready(blocking(|| {
            diesel::RunQueryDsl::first(self, &mut conn.inner)
        }))
    }

    fn execute(self, conn: &mut SqliteConn) -> Ready<QueryResult<usize>>
    where
        Self: diesel::query_dsl::methods::ExecuteDsl<SqliteConnection>,
    {
        ready(blocking(|| {
            diesel::RunQueryDsl::execute(self, &mut conn.inner)
        }))
    }
}

impl<T: diesel::RunQueryDsl<SqliteConnection>> SqliteRunQueryDsl for T {}

/// An SQLite connection usable through diesel-async's DSL (see the module documentation).
pub struct SqliteConn {
    inner: SqliteConnection,
}

/// A row copied out of SQLite's statement (rows cannot outlive the statement's next step).
type OwnedRow = <<SqliteConnection as LoadConnection>::Row<'static, 'static> as IntoOwnedRow<
    'static,
    Sqlite,
>>::OwnedRow;

impl SqliteConn {
    /// Opens `path` and applies the pragmas (busy timeout first, WAL, foreign keys).
    pub fn open(path: &str) -> ConnectionResult<Self> {
        blocking(|| {
            let mut inner = SqliteConnection::establish(path)?;
            apply_pragmas(&mut inner)
                .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            Ok(SqliteConn { inner })
        })
    }

    /// [`open`](Self::open) for a connection of a pool of a file, which leaves checkpoints to
    /// the pool's checkpointer (`wal_autocheckpoint=0`, see `db/checkpoint.rs`).
    pub fn open_pooled(path: &str) -> ConnectionResult<Self> {
        let mut conn = Self::open(path)?;
        blocking(|| conn.inner.batch_execute(POOLED_PRAGMAS))
            .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
        Ok(conn)
    }

    /// Opens a write transaction with `BEGIN IMMEDIATE` (a deferred one fails under concurrent
    /// writers instead of waiting for the lock).
    pub fn begin_immediate(&mut self) -> QueryResult<()> {
        blocking(|| SyncTransactions::begin_transaction_sql(&mut self.inner, "BEGIN IMMEDIATE"))
    }

    /// Opens a read transaction (`BEGIN`, deferred): the statements that follow read one snapshot,
    /// and the WAL read lock is taken once for all of them instead of once per statement.
    pub fn begin_read(&mut self) -> QueryResult<()> {
        blocking(|| SyncTransactions::begin_transaction_sql(&mut self.inner, "BEGIN"))
    }

    /// Commits the transaction opened by [`begin_immediate`](Self::begin_immediate) or
    /// [`begin_read`](Self::begin_read).
    pub fn commit(&mut self) -> QueryResult<()> {
        blocking(|| SyncTransactions::commit_transaction(&mut self.inner))
    }

    /// Rolls back a transaction left open (its future was dropped between two statements).
    pub(super) fn rollback_open(&mut self) {
        let open = matches!(
            SyncTransactions::transaction_manager_status_mut(&mut self.inner).transaction_depth(),
            Ok(Some(_))
        );
        if open && self.rollback().is_err() {
            tracing::warn!(
                "could not roll back a dropped transaction; the connection is discarded"
            );
        }
    }

    /// Rolls it back (a failed rollback leaves the connection marked broken, and the pool then
    /// discards it, which closes it and so rolls back).
    pub fn rollback(&mut self) -> QueryResult<()> {
        blocking(|| SyncTransactions::rollback_transaction(&mut self.inner))
    }
}

impl SimpleAsyncConnection for SqliteConn {
    fn batch_execute(&mut self, query: &str) -> impl Future<Output = QueryResult<()>> + Send {
        ready(blocking(|| self.inner.batch_execute(query)))
    }
}

impl AsyncConnectionCore for SqliteConn {
    type ExecuteFuture<'conn, 'query> = Ready<QueryResult<usize>>;
    type LoadFuture<'conn, 'query> = Ready<QueryResult<Self::Stream<'conn, 'query>>>;
    type Stream<'conn, 'query> = stream::Iter<std::vec::IntoIter<QueryResult<OwnedRow>>>;
    type Row<'conn, 'query> = OwnedRow;
    type Backend = Sqlite;

    fn load<'conn, 'query, T>(&'conn mut self, source: T) -> Self::LoadFuture<'conn, 'query>
    where
        T: AsQuery + 'query,
        T::Query: QueryFragment<Sqlite> + QueryId + 'query,
    {
        let query = AsUntyped(source.as_query());
        ready(blocking(|| {
            let cursor = self.inner.load(query)?;
            let mut names = Default::default();
            let rows: Vec<_> = cursor
                .map(|row| row.map(|row| row.into_owned(&mut names)))
                .collect();
            Ok(stream::iter(rows))
        }))
    }

    fn execute_returning_count<'conn, 'query, T>(
        &'conn mut self,
        source: T,
    ) -> Self::ExecuteFuture<'conn, 'query>
    where
        T: QueryFragment<Sqlite> + QueryId + 'query,
    {
        ready(blocking(|| self.inner.execute_returning_count(&source)))
    }
}

impl AsyncConnection for SqliteConn {
    type TransactionManager = SqliteTransactions;

    fn establish(database_url: &str) -> impl Future<Output = ConnectionResult<Self>> + Send {
        ready(Self::open(database_url))
    }

    fn transaction_state(&mut self) -> &mut SyncTransactions {
        self.inner.transaction_state()
    }

    fn instrumentation(&mut self) -> &mut dyn Instrumentation {
        self.inner.instrumentation()
    }

    fn set_instrumentation(&mut self, instrumentation: impl Instrumentation) {
        self.inner.set_instrumentation(instrumentation);
    }

    fn set_prepared_statement_cache_size(&mut self, size: CacheSize) {
        self.inner.set_prepared_statement_cache_size(size);
    }
}

impl diesel_async::pooled_connection::PoolableConnection for SqliteConn {}

/// Transactions of [`SqliteConn`]: diesel's own (synchronous) transaction manager, run like the
/// statements.
pub struct SqliteTransactions;

impl TransactionManager<SqliteConn> for SqliteTransactions {
    type TransactionStateData = SyncTransactions;

    fn begin_transaction(conn: &mut SqliteConn) -> impl Future<Output = QueryResult<()>> + Send {
        ready(blocking(|| {
            SyncTransactions::begin_transaction(&mut conn.inner)
        }))
    }

    fn rollback_transaction(conn: &mut SqliteConn) -> impl Future<Output = QueryResult<()>> + Send {
        ready(conn.rollback())
    }

    fn commit_transaction(conn: &mut SqliteConn) -> impl Future<Output = QueryResult<()>> + Send {
        ready(conn.commit())
    }

    fn transaction_manager_status_mut(conn: &mut SqliteConn) -> &mut TransactionManagerStatus {
        SyncTransactions::transaction_manager_status_mut(&mut conn.inner)
    }
}

/// A query with its result type erased: SQLite reads no metadata from it, and the statement
/// cache keys on the query's own id, which this keeps.
struct AsUntyped<Q>(Q);

impl<Q> Query for AsUntyped<Q> {
    type SqlType = Untyped;
}

impl<Q: QueryFragment<Sqlite>> QueryFragment<Sqlite> for AsUntyped<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }
}

impl<Q: QueryId> QueryId for AsUntyped<Q> {
    type QueryId = Q::QueryId;
    const HAS_STATIC_QUERY_ID: bool = Q::HAS_STATIC_QUERY_ID;
}

/// `column IN (SELECT value FROM json_each(?))` with the ids as one JSON array bound: the SQLite
/// form of `column = ANY($1)`. diesel's `eq_any` over a list writes one placeholder per id on
/// SQLite, so its statement text changes with the list's length and is never cached; this one's
/// text is fixed, and its prepared statement is reused. Use it in the SQLite arm of
/// [`with_conn!`](crate::with_conn), with `eq_any` in the PostgreSQL arm.
pub fn in_ids<C>(column: C, ids: &[i64]) -> InIds<C> {
    use std::fmt::Write as _;
    let mut json = String::with_capacity(ids.len() * 8 + 2);
    json.push('[');
    for (i, id) in ids.iter().enumerate() {
        let comma = if i > 0 { "," } else { "" };
        let _ = write!(json, "{comma}{id}"); // writing to a String cannot fail
    }
    json.push(']');
    InIds { column, json }
}

/// `column IN (SELECT value FROM json_each(?))` with the texts as one JSON array bound: the
/// text form of [`in_ids`], with the same fixed statement text.
pub fn in_texts<C>(column: C, texts: &[String]) -> InIds<C> {
    // A list of strings always serialises.
    let json = serde_json::to_string(texts).unwrap_or_else(|_| "[]".to_owned());
    InIds { column, json }
}

/// See [`in_ids`] and [`in_texts`].
#[derive(Debug, Clone)]
pub struct InIds<C> {
    column: C,
    json: String,
}

impl<C> diesel::Expression for InIds<C> {
    type SqlType = diesel::sql_types::Bool;
}

impl<C: diesel::AppearsOnTable<QS>, QS> diesel::AppearsOnTable<QS> for InIds<C> {}

impl<C: diesel::expression::ValidGrouping<G>, G> diesel::expression::ValidGrouping<G> for InIds<C> {
    type IsAggregate = C::IsAggregate;
}

impl<C: QueryFragment<Sqlite>> QueryFragment<Sqlite> for InIds<C> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        out.push_sql(" IN (SELECT value FROM json_each(");
        out.push_bind_param::<diesel::sql_types::Text, _>(&self.json)?;
        out.push_sql("))");
        Ok(())
    }
}

impl<C: QueryId> QueryId for InIds<C> {
    type QueryId = InIds<C::QueryId>;
    const HAS_STATIC_QUERY_ID: bool = C::HAS_STATIC_QUERY_ID;
}
