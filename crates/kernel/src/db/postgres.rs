//! PostgreSQL connections kept near the thread that uses them.
//!
//! A connection's socket is driven by a task of its own (tokio-postgres' `Connection`), spawned on
//! the runtime of the thread that opened it, and every query crosses to that task and back. With
//! one shared pool a request on one HTTP worker thread often gets a connection opened by another,
//! so each statement wakes a second thread twice (under load, a quarter of the server's CPU went to
//! the kernel's scheduler and wake-ups, this among them). Here the pool is split into one part per
//! core: a thread takes connections from its own part, where they were opened by threads of that
//! part (in a server, the one HTTP worker of that core), and only borrows from another part when
//! its own has no connection idle and no room to open one.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deadpool::managed::{PoolError, Timeouts};
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError as ConnectError, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

use super::DbError;
use super::shared::{SharedPg, Slot};

/// One part: no test query per checkout (a round trip on every request). A connection the server
/// closed is seen closed by its background task and discarded on return, and a query on one lost
/// silently answers 503 once (`DbError::is_connection_lost`).
fn part(url: &str, size: usize, timeout: Duration) -> Result<Pool<AsyncPgConnection>, DbError> {
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(|url| {
        Box::pin(async move {
            let mut conn = AsyncPgConnection::establish(url).await?;
            prefer_generic_plans(&mut conn).await;
            Ok(conn)
        })
    });
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
    Pool::builder(manager)
        .max_size(size)
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .build()
        .map_err(|e| DbError::Connect(e.to_string()))
}

/// Makes the session plan each prepared statement once (`plan_cache_mode`), as a statement
/// without parameters is. By default PostgreSQL plans a statement with parameters again on every
/// execution while a plan for its values looks cheaper than its generic plan, and a `LIMIT $n`
/// (every page) always does: the generic plan must assume a tenth of the table. Keel's
/// statements are lookups by key and index-ordered pages, whose generic plan is the one each
/// execution would choose; planning them each time cost the payment list a fifth of its rate
/// (docs/performance.md). A server without the setting (before PostgreSQL 12) keeps its own.
/// The plan is made with the tables as they are at the statement's first run, and kept until
/// an `ANALYZE` of one of them: a statement whose best plan changes with a table's size while
/// one session runs (a lookup of many keys, `= ANY($1)`, into the table an import fills) is
/// written so that only the index plan fits (blog-core's `store::bulk::posts_by_slugs`).
pub(super) async fn prefer_generic_plans(conn: &mut AsyncPgConnection) {
    if let Err(e) = conn
        .batch_execute("SET plan_cache_mode = force_generic_plan")
        .await
    {
        tracing::debug!(error = %e, "plan_cache_mode not set");
    }
}

/// A PostgreSQL pool split into parts, one per core (see the module documentation).
#[derive(Clone)]
pub struct PgPool {
    parts: Arc<[Pool<AsyncPgConnection>]>,
    /// One shared connection per part (see `super::shared`).
    shared: Arc<[Slot]>,
    url: Arc<str>,
    timeout: Duration,
}

/// The next part handed to a thread that asks for the first time.
static NEXT_PART: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's part: set by [`pin_thread`], else by the order in which threads first asked.
    static PART: Cell<Option<usize>> = const { Cell::new(None) };
    /// Whether [`pin_thread`] set it: a server's worker, which keeps serving from this thread.
    static PINNED: Cell<bool> = const { Cell::new(false) };
}

/// Makes the current thread the `index`th of a server's worker threads (0, 1, ...): it takes
/// PostgreSQL connections from part `index` (modulo the number of parts) of every pool, so that
/// as many workers as cores never share a part. A thread that is not pinned gets the next part
/// in turn when it first asks.
pub fn pin_thread(index: usize) {
    PART.with(|part| part.set(Some(index)));
    PINNED.set(true);
}

fn this_threads_part() -> usize {
    PART.with(|part| match part.get() {
        Some(index) => index,
        None => {
            let next = NEXT_PART.fetch_add(1, Ordering::Relaxed);
            part.set(Some(next));
            next
        }
    })
}

impl PgPool {
    /// A pool of at most `max_size` connections to `url`, split into `parts` (at most one per
    /// connection), whose checkouts wait at most `timeout` (see [`DbPool::connect_with_timeout`](super::DbPool::connect_with_timeout)).
    pub(super) fn new(
        url: &str,
        max_size: usize,
        parts: usize,
        timeout: Duration,
    ) -> Result<Self, DbError> {
        let max_size = max_size.max(1);
        let parts = parts.clamp(1, max_size);
        // One more for the threads that are not a server's workers (start-up, the CLI, tests).
        let shared = (0..=parts).map(|_| Slot::default()).collect();
        let parts = (0..parts)
            // The first `max_size % parts` parts take one connection more.
            .map(|i| {
                part(
                    url,
                    max_size / parts + usize::from(i < max_size % parts),
                    timeout,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgPool {
            parts: parts.into(),
            shared,
            url: url.into(),
            timeout,
        })
    }

    /// This thread's part's shared connection, for statements outside a transaction (see
    /// `super::shared`), opened within the pool's timeout if it has none open. A thread that is
    /// not a server's worker ([`pin_thread`]) uses a connection apart from the parts': one it
    /// opened, whose task runs on its runtime, would otherwise serve a worker from there.
    pub async fn shared(&self) -> Result<Arc<SharedPg>, DbError> {
        let slot = match PINNED.get() {
            true => this_threads_part() % self.parts.len(),
            false => self.parts.len(),
        };
        self.shared[slot].get(&self.url, self.timeout).await
    }

    /// Checks a connection out: from this thread's part, else from another part that has one idle
    /// or room to open one (so that one thread can still use the whole pool), else by waiting for
    /// this thread's part (at most the pool's wait timeout).
    pub async fn get(&self) -> Result<Object<AsyncPgConnection>, PoolError<ConnectError>> {
        let own = this_threads_part() % self.parts.len();
        let now = Timeouts {
            wait: Some(Duration::ZERO),
            ..self.parts[own].timeouts()
        };
        match self.parts[own].timeout_get(&now).await {
            Err(PoolError::Timeout(_)) => {}
            got => return got,
        }
        for (i, part) in self.parts.iter().enumerate() {
            if i != own
                && let Ok(conn) = part.timeout_get(&now).await
            {
                return Ok(conn);
            }
        }
        self.parts[own].get().await
    }

    /// The sum of the parts' states.
    pub fn status(&self) -> deadpool::Status {
        self.parts.iter().map(Pool::status).fold(
            deadpool::Status {
                max_size: 0,
                size: 0,
                available: 0,
                waiting: 0,
            },
            |sum, s| deadpool::Status {
                max_size: sum.max_size + s.max_size,
                size: sum.size + s.size,
                available: sum.available + s.available,
                waiting: sum.waiting + s.waiting,
            },
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use diesel::dsl::sql;
    use diesel::sql_types::Integer;
    use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

    use super::*;

    #[test]
    fn the_connections_are_spread_over_the_parts() {
        let sizes = |max_size, parts| {
            let pool = PgPool::new("postgres://unused", max_size, parts, Duration::from_secs(1));
            let pool = pool.unwrap();
            let sizes: Vec<_> = pool.parts.iter().map(|p| p.status().max_size).collect();
            assert_eq!(pool.status().max_size, sizes.iter().sum::<usize>());
            sizes
        };
        assert_eq!(sizes(10, 2), [5, 5]);
        assert_eq!(sizes(5, 2), [3, 2]);
        assert_eq!(sizes(1, 4), [1], "never a part without a connection");
        assert_eq!(sizes(0, 0), [1]);
    }

    #[tokio::test]
    async fn a_deadlock_is_a_concurrency_failure() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let table = format!("deadlock_probe_{}", std::process::id());
        let mut setup = AsyncPgConnection::establish(&url).await.unwrap();
        setup
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id INT PRIMARY KEY);
                 INSERT INTO {table} VALUES (1), (2)"
            ))
            .await
            .unwrap();
        // Each locks one row, then asks for the other's: PostgreSQL fails one of the two.
        let lock = |first: i32, second: i32| {
            let (url, table) = (url.clone(), table.clone());
            async move {
                let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
                conn.batch_execute(&format!(
                    "BEGIN; SELECT id FROM {table} WHERE id = {first} FOR UPDATE"
                ))
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
                let result = conn
                    .batch_execute(&format!(
                        "SELECT id FROM {table} WHERE id = {second} FOR UPDATE"
                    ))
                    .await;
                conn.batch_execute("ROLLBACK").await.unwrap();
                result.map_err(DbError::Query)
            }
        };
        let (a, b) = tokio::join!(lock(1, 2), lock(2, 1));
        let failed: Vec<DbError> = [a, b].into_iter().filter_map(Result::err).collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].is_concurrency_failure(), "{}", failed[0]);
        assert!(!DbError::Query(diesel::result::Error::NotFound).is_concurrency_failure());
        setup
            .batch_execute(&format!("DROP TABLE {table}"))
            .await
            .unwrap();
    }

    async fn backend_pid(conn: &AsyncPgConnection) -> i32 {
        pid(conn).await.unwrap()
    }

    #[tokio::test]
    async fn a_thread_takes_its_own_part_first_then_borrows_an_idle_connection() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let pool = PgPool::new(&url, 2, 2, Duration::from_millis(200)).unwrap();
        pin_thread(0);
        let first = backend_pid(&pool.get().await.unwrap()).await;
        assert_eq!(
            backend_pid(&pool.get().await.unwrap()).await,
            first,
            "part 0's idle connection again"
        );
        pin_thread(1);
        let own = pool.get().await.unwrap();
        assert_ne!(backend_pid(&own).await, first, "part 1 opens its own");
        let borrowed = pool.get().await.unwrap();
        assert_eq!(
            backend_pid(&borrowed).await,
            first,
            "part 1 is full: part 0's idle connection is lent"
        );
        assert!(
            matches!(pool.get().await, Err(PoolError::Timeout(_))),
            "both parts busy: waits for its own, up to the timeout"
        );
        drop(own);
        assert_eq!(pool.status().available, 1);
        assert_eq!(pool.status().size, 2);
    }

    /// Pooled and shared connections alike plan a prepared statement once.
    #[tokio::test]
    async fn every_connection_keeps_generic_plans() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let mode = async |mut conn: &AsyncPgConnection| -> String {
            diesel::select(sql::<diesel::sql_types::Text>(
                "current_setting('plan_cache_mode')",
            ))
            .get_result(&mut conn)
            .await
            .unwrap()
        };
        let pool = PgPool::new(&url, 1, 1, Duration::from_secs(5)).unwrap();
        assert_eq!(mode(&pool.get().await.unwrap()).await, "force_generic_plan");
        assert_eq!(
            mode(&pool.shared().await.unwrap()).await,
            "force_generic_plan"
        );
    }

    /// The server process of `conn`, a pooled connection or a shared one.
    async fn pid(mut conn: &AsyncPgConnection) -> diesel::QueryResult<i32> {
        diesel::select(sql::<Integer>("pg_backend_pid()"))
            .get_result(&mut conn)
            .await
    }

    #[tokio::test]
    async fn a_part_shares_one_connection_and_replaces_it_once_closed() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let pool = PgPool::new(&url, 2, 2, Duration::from_secs(5)).unwrap();
        pin_thread(0);
        let first = pool.shared().await.unwrap();
        let again = pool.shared().await.unwrap();
        assert!(Arc::ptr_eq(&first, &again), "one connection per part");
        // Statements of concurrent callers are in flight on it at once, answered in order.
        let (a, b) = futures_util::try_join!(pid(&first), pid(&again)).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            pool.status().size,
            0,
            "no pooled connection was checked out"
        );
        // A write sent to it by mistake is refused.
        let mut shared: &AsyncPgConnection = &first;
        let write = shared
            .batch_execute("CREATE TABLE shared_write_probe (x INT)")
            .await;
        assert!(
            write.is_err_and(|e| e.to_string().contains("read-only")),
            "a shared connection refuses writes"
        );

        pin_thread(1);
        let other = pool.shared().await.unwrap();
        assert_ne!(pid(&other).await.unwrap(), a, "part 1 has its own");
        let mut killer: &AsyncPgConnection = &other;
        diesel::select(sql::<diesel::sql_types::Bool>(&format!(
            "pg_terminate_backend({a})"
        )))
        .get_result::<bool>(&mut killer)
        .await
        .unwrap();

        // The statements on the closed connection fail as a lost connection; once its task has
        // seen it close, part 0 opens another.
        let lost = DbError::from(pid(&first).await.unwrap_err());
        assert!(lost.is_connection_lost(), "{lost:?}");
        pin_thread(0);
        let mut replaced = None;
        for _ in 0..100 {
            let conn = pool.shared().await.unwrap();
            if !Arc::ptr_eq(&conn, &first) {
                replaced = Some(conn);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let replaced = replaced.unwrap();
        assert_ne!(pid(&replaced).await.unwrap(), a);

        // A thread that is not a server's worker gets a connection apart, on its own runtime.
        let apart = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let conn = pool.shared().await.unwrap();
                pid(&conn).await.unwrap()
            })
        })
        .join()
        .unwrap();
        assert_ne!(apart, pid(&replaced).await.unwrap());
        assert_ne!(apart, pid(&other).await.unwrap());
    }

    /// A read whose caller is dropped while its statement runs leaves the shared connection to
    /// the others, each answered its own rows (tokio-postgres reads the dropped one's answer and
    /// throws it away).
    #[tokio::test]
    async fn a_read_dropped_mid_statement_leaves_the_shared_connection_in_order() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let pool = PgPool::new(&url, 1, 1, Duration::from_secs(5)).unwrap();
        pin_thread(0);
        let conn = pool.shared().await.unwrap();
        let value = |n: i32, sleep: f64| {
            let conn = Arc::clone(&conn);
            async move {
                let mut c: &AsyncPgConnection = &conn;
                diesel::select(sql::<Integer>(&format!("{n} FROM pg_sleep({sleep})")))
                    .get_result::<i32>(&mut c)
                    .await
            }
        };
        let slow = tokio::time::timeout(Duration::from_millis(50), value(1, 0.3)).await;
        assert!(slow.is_err(), "dropped while its statement ran");
        let answers = futures_util::try_join!(value(2, 0.0), value(3, 0.0), value(4, 0.0));
        assert_eq!(answers.unwrap(), (2, 3, 4));
        assert!(
            Arc::ptr_eq(&conn, &pool.shared().await.unwrap()),
            "still in use"
        );
    }

    #[tokio::test]
    async fn one_thread_can_use_the_whole_pool() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let pool = PgPool::new(&url, 4, 2, Duration::from_millis(200)).unwrap();
        pin_thread(1);
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(pool.get().await.unwrap());
        }
        let mut pids = Vec::new();
        for conn in &mut held {
            pids.push(backend_pid(conn).await);
        }
        pids.sort_unstable();
        pids.dedup();
        assert_eq!(
            pids.len(),
            4,
            "two of its own part, two opened in the other"
        );
    }
}
