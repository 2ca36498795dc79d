//! Test helpers: a fresh database per test (an SQLite file in a temporary folder, or a new
//! PostgreSQL database on the server named by `TEST_DATABASE_URL`) and an app spawned on port 0.

use actix_web::dev::ServerHandle;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

use crate::db::{Backend, DbPool, MigrationSet, migrate};
use crate::http;

/// Runs each named `async fn(TestDb)` four times: on SQLite always and on PostgreSQL when
/// `TEST_DATABASE_URL` is set (it passes with a note otherwise), each with the read cache on and
/// off ([`TestDb::read_cache`], which the test passes on to the module or server it builds).
///
/// ```text
/// kernel::backend_tests! { register_returns_201, login_rejects_bad_password }
/// ```
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::testing::TestDb::sqlite().await).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    match $crate::testing::TestDb::postgres().await {
                        Some(db) => super::$name(db).await,
                        None => eprintln!("TEST_DATABASE_URL is not set: PostgreSQL run skipped"),
                    }
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_uncached() {
                    super::$name($crate::testing::TestDb::sqlite().await.uncached()).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_uncached() {
                    match $crate::testing::TestDb::postgres().await {
                        Some(db) => super::$name(db.uncached()).await,
                        None => eprintln!("TEST_DATABASE_URL is not set: PostgreSQL run skipped"),
                    }
                }
            }
        )*
    };
}

/// A database that exists for one test and is removed afterwards.
pub struct TestDb {
    pub url: String,
    pub backend: Backend,
    /// Whether the module or server under test keeps its read cache on (`READ_CACHE`).
    pub read_cache: bool,
    _dir: Option<tempfile::TempDir>,
    postgres: Option<(String, String)>,
}

#[allow(clippy::expect_used)]
impl TestDb {
    /// A new SQLite file in a temporary folder.
    pub async fn sqlite() -> TestDb {
        crate::init_crypto();
        let dir = tempfile::tempdir().expect("temporary folder");
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        TestDb {
            url,
            backend: Backend::Sqlite,
            read_cache: true,
            _dir: Some(dir),
            postgres: None,
        }
    }

    /// A new, empty PostgreSQL database on the server of `TEST_DATABASE_URL`; `None` when the
    /// variable is unset. Panics when it is set but the server cannot be reached.
    pub async fn postgres() -> Option<TestDb> {
        crate::init_crypto();
        let admin_url = std::env::var("TEST_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty())?;
        let name = format!("keel_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = AsyncPgConnection::establish(&admin_url)
            .await
            .expect("TEST_DATABASE_URL is set but PostgreSQL cannot be reached");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create a test database");
        let url = replace_database(&admin_url, &name);
        Some(TestDb {
            url,
            backend: Backend::Postgres,
            read_cache: true,
            _dir: None,
            postgres: Some((admin_url, name)),
        })
    }

    /// The same database, for a test run with the read cache off.
    pub fn uncached(mut self) -> TestDb {
        self.read_cache = false;
        self
    }

    /// A pool on this database with `sets` migrated.
    pub async fn migrated_pool(&self, sets: &[MigrationSet]) -> DbPool {
        migrate(&self.url, sets).await.expect("migrations apply");
        DbPool::connect(&self.url, 5)
            .await
            .expect("the test database opens")
    }
}

/// `postgres://h/db?x` with its database name replaced.
fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let prefix = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{prefix}/{name}?{q}"),
        None => format!("{prefix}/{name}"),
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin_url, name)) = self.postgres.take() else {
            return;
        };
        // Drop runs outside any async context we may block, so use a thread with its own runtime.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut admin) = AsyncPgConnection::establish(&admin_url).await {
                    let _ = admin
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// Records the statements a connection runs and the ones it prepares for its statement cache, to
/// check that a query is shaped for reuse: run it a few times with different values, then expect
/// [`not_reused`](Self::not_reused) to be empty.
#[derive(Clone, Default)]
pub struct StatementLog(std::sync::Arc<std::sync::Mutex<StatementCounts>>);

#[derive(Default)]
struct StatementCounts {
    run: Vec<String>,
    prepared: Vec<String>,
}

impl StatementLog {
    /// Starts recording `conn`'s statements.
    pub fn attach(&self, conn: &mut crate::DbConn<'_>) {
        match conn {
            crate::DbConn::Postgres(c) => c.set_instrumentation(self.clone()),
            crate::DbConn::PostgresShared(_) => {
                panic!("statements are logged on a connection checked out with `DbPool::get`")
            }
            crate::DbConn::Sqlite(c) => c.set_instrumentation(self.clone()),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, StatementCounts> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Statement texts that were run but not prepared once and reused: texts never put in the
    /// cache (prepared anew each time, or built per call) and texts put in it more than once.
    pub fn not_reused(&self) -> Vec<String> {
        let counts = self.counts();
        let mut missing: Vec<String> = counts
            .run
            .iter()
            .filter(|sql| !counts.prepared.contains(sql))
            .cloned()
            .collect();
        for (i, sql) in counts.prepared.iter().enumerate() {
            if counts.prepared[..i].contains(sql) {
                missing.push(format!("prepared twice: {sql}"));
            }
        }
        missing.dedup();
        missing
    }

    /// How many statements were run.
    pub fn statements_run(&self) -> usize {
        self.counts().run.len()
    }

    /// How many different texts the statements run had.
    pub fn texts_run(&self) -> usize {
        let counts = self.counts();
        let mut texts: Vec<&String> = counts.run.iter().collect();
        texts.sort();
        texts.dedup();
        texts.len()
    }
}

impl diesel::connection::Instrumentation for StatementLog {
    fn on_connection_event(&mut self, event: diesel::connection::InstrumentationEvent<'_>) {
        use diesel::connection::InstrumentationEvent as Event;
        match event {
            Event::StartQuery { query, .. } => {
                let text = query.to_string();
                let sql = text.split(" -- binds: ").next().unwrap_or_default();
                self.counts().run.push(sql.to_owned());
            }
            Event::CacheQuery { sql, .. } => self.counts().prepared.push(sql.to_owned()),
            _ => {}
        }
    }
}

/// How SQLite runs `sql` (its parameters unbound, so NULL): the `detail` lines of its
/// `EXPLAIN QUERY PLAN`, joined by newlines. Empty on PostgreSQL, whose plans a test reads with
/// `EXPLAIN` and its own parameters.
pub async fn sqlite_plan(conn: &mut crate::DbConn<'_>, sql: &str) -> String {
    #[derive(diesel::QueryableByName)]
    struct Line {
        #[diesel(sql_type = diesel::sql_types::Text)]
        detail: String,
    }
    let lines: Vec<Line> = crate::with_conn!(
        conn,
        postgres | _c | Ok(Vec::new()),
        sqlite
            | c
            | diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
                .load(c)
                .await
    )
    .unwrap_or_else(|e| panic!("no plan for {sql}: {e}"));
    lines
        .into_iter()
        .map(|l| l.detail)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks out every connection of `pool` and holds them: until the returned connections are
/// dropped, a unit of work that needs one waits for it (a request's write stays under way). On
/// PostgreSQL reads go on over the pool's shared connections ([`DbPool::read`]).
#[allow(clippy::expect_used)]
pub async fn hold_every_connection(pool: &DbPool) -> Vec<crate::db::PooledConn> {
    let mut held = Vec::new();
    for _ in 0..pool.status().max_size {
        held.push(pool.get().await.expect("a connection of the test pool"));
    }
    held
}

/// A lock on a table, held by a transaction on a connection of its own until
/// [`WriteLock::release`]: a write to the table waits inside its statement meanwhile, and with
/// [`WriteLock::take_all`] on PostgreSQL a read too. On SQLite the lock is the database's write
/// lock (`BEGIN IMMEDIATE`), which no read waits for (hold the pool's connections for that:
/// [`hold_every_connection`]).
pub struct WriteLock {
    _pool: DbPool,
    conn: crate::db::PooledConn,
}

#[allow(clippy::expect_used)]
impl WriteLock {
    pub async fn take(url: &str, table: &str) -> Self {
        Self::lock(url, table, "EXCLUSIVE").await
    }

    /// The lock that reads of the table wait for too, on PostgreSQL (`ACCESS EXCLUSIVE`).
    pub async fn take_all(url: &str, table: &str) -> Self {
        Self::lock(url, table, "ACCESS EXCLUSIVE").await
    }

    async fn lock(url: &str, table: &str, mode: &str) -> Self {
        let pool = DbPool::connect(url, 1)
            .await
            .expect("a connection for the lock");
        let mut conn = pool.get().await.expect("a connection for the lock");
        let begin = match pool.backend() {
            crate::db::Backend::Postgres => format!("BEGIN; LOCK TABLE {table} IN {mode} MODE"),
            crate::db::Backend::Sqlite => "BEGIN IMMEDIATE".to_owned(),
        };
        crate::with_conn!(&mut conn.conn(), |c| c.batch_execute(&begin).await)
            .expect("the lock is taken");
        WriteLock { _pool: pool, conn }
    }

    /// Rolls the transaction back: the writes that waited go on.
    pub async fn release(mut self) {
        crate::with_conn!(&mut self.conn.conn(), |c| c.batch_execute("ROLLBACK").await)
            .expect("the lock is released");
    }
}

/// Sends `request` over a connection of its own, waits `after`, then resets the connection (a
/// TCP RST, as a client that crashes or a proxy that gives up sends): actix drops the request's
/// future at once, wherever it is awaiting. (A client that only closes its side, a FIN, is not
/// noticed until the answer is written, since actix allows half-closed connections: its handler
/// runs to the end anyway.) Then waits `after` again. Panics when the server answers first.
#[allow(clippy::expect_used)]
pub async fn reset_mid_request(request: reqwest::RequestBuilder, after: std::time::Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = request.build().expect("a complete request");
    let url = request.url();
    let host = url.host_str().expect("a host");
    let port = url.port_or_known_default().expect("a port");
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let body = request
        .body()
        .and_then(|b| b.as_bytes())
        .unwrap_or_default();
    let mut bytes = format!(
        "{} {target} HTTP/1.1\r\nhost: {host}:{port}\r\n",
        request.method()
    );
    for (name, value) in request.headers() {
        let value = value.to_str().expect("a text header");
        bytes.push_str(&format!("{name}: {value}\r\n"));
    }
    bytes.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = bytes.into_bytes();
    bytes.extend_from_slice(body);
    let mut stream = tokio::net::TcpStream::connect((host, port))
        .await
        .expect("the test server accepts");
    stream.write_all(&bytes).await.expect("the request is sent");
    let mut first = [0u8; 1];
    let answered = tokio::time::timeout(after, stream.read(&mut first)).await;
    assert!(
        answered.is_err(),
        "the server answered before the client left: {answered:?}"
    );
    stream.set_zero_linger().expect("SO_LINGER 0");
    drop(stream);
    tokio::time::sleep(after).await;
}

/// Waits until `check` answers true, for at most `within`; its last answer.
pub async fn eventually<F, Fut>(within: std::time::Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = std::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// Panics unless `migrations/postgres/<module>` and `migrations/sqlite/<module>` of the workspace
/// (two levels above a crate's `manifest_dir`) hold the same, non-empty, list of migrations.
#[allow(clippy::expect_used)]
pub fn assert_migration_trees_mirrored(manifest_dir: &str, module: &str) {
    let names = |backend: &str| {
        let dir =
            std::path::Path::new(manifest_dir).join(format!("../../migrations/{backend}/{module}"));
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let postgres = names("postgres");
    assert!(!postgres.is_empty(), "no migrations for {module}");
    assert_eq!(
        postgres,
        names("sqlite"),
        "the {module} migration trees differ"
    );
}

/// A server running on 127.0.0.1 on a random port, stopped when dropped.
pub struct TestServer {
    pub base_url: String,
    pub client: reqwest::Client,
    handle: ServerHandle,
    guards: Vec<Box<dyn std::any::Any + Send>>,
}

impl TestServer {
    /// The absolute URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Keeps `guard` (e.g. a background worker) alive as long as the server.
    pub fn hold(mut self, guard: impl std::any::Any + Send) -> Self {
        self.guards.push(Box::new(guard));
        self
    }

    /// Starts an already-bound actix server in the background.
    pub fn start(server: actix_web::dev::Server, port: u16) -> TestServer {
        let handle = server.handle();
        tokio::spawn(server);
        TestServer {
            base_url: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            handle,
            guards: Vec::new(),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.guards.clear();
        let handle = self.handle.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { handle.stop(false).await });
        }
    }
}

/// Spawns an app with Keel's standard middleware and error handling, configured by `configure`
/// (a module's routes and app data), on 127.0.0.1 port 0.
#[allow(clippy::expect_used)]
pub fn spawn_app<F>(configure: F) -> TestServer
where
    F: Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
{
    crate::init_crypto();
    let server = HttpServer::new(move || {
        App::new()
            .wrap(from_fn(http::json_errors))
            .wrap(from_fn(http::request_id))
            .configure(|c| http::configure_extractors(c, http::DEFAULT_MAX_JSON_BYTES))
            .configure(configure.clone())
            .default_service(web::to(http::not_found))
    })
    .workers(2)
    .disable_signals()
    .bind(("127.0.0.1", 0))
    .expect("bind port 0");
    let port = server.addrs()[0].port();
    TestServer::start(server.run(), port)
}

/// Spawns `modules`, each mounted at its prefixes as a server mounts them, on an app with Keel's
/// error handling ([`http::app`]), on 127.0.0.1 port 0.
#[allow(clippy::expect_used)]
pub fn spawn_modules(modules: Vec<std::sync::Arc<dyn crate::Module>>) -> TestServer {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind port 0");
    spawn_modules_on(modules, listener)
}

/// [`spawn_modules`] on a listener bound beforehand: for a module that must know its own address
/// when it is built (a provider's callback URL, say).
pub fn spawn_modules_on(
    modules: Vec<std::sync::Arc<dyn crate::Module>>,
    listener: std::net::TcpListener,
) -> TestServer {
    spawn_modules_with_workers(modules, listener, 2)
}

/// [`spawn_modules_on`] with `workers` HTTP workers: one where a test needs every request on
/// the same thread (group commits gather the items of each worker apart).
#[allow(clippy::expect_used)]
pub fn spawn_modules_with_workers(
    modules: Vec<std::sync::Arc<dyn crate::Module>>,
    listener: std::net::TcpListener,
    workers: usize,
) -> TestServer {
    use utoipa_actix_web::AppExt;
    crate::init_crypto();
    let port = listener.local_addr().expect("a bound listener").port();
    let server = HttpServer::new(move || {
        let app = http::app(crate::module::BodyLimits::default()).into_utoipa_app();
        modules.iter().fold(app, crate::module::mount).into_app()
    })
    .on_connect(crate::peer::record_any)
    .workers(workers)
    .disable_signals()
    .listen(listener)
    .expect("listen on the bound port");
    TestServer::start(server.run(), port)
}

#[cfg(test)]
mod tests {
    use super::replace_database;

    #[test]
    fn database_names_are_replaced() {
        assert_eq!(
            replace_database("postgres://u@h:5432/test", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(
            replace_database("postgres://h/test?sslmode=disable", "x"),
            "postgres://h/x?sslmode=disable"
        );
        assert_eq!(replace_database("postgres://h", "x"), "postgres://h/x");
    }
}
