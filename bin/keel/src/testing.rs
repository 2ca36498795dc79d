//! The harness of the composed server's tests (feature `testing`), shared by this package's tests
//! and the workspace tests (`keel-tests`):
//!
//! - [`TestConfig`] builds the server's [`Config`] for a test: on a [`TestDb`], port 0, every
//!   compiled module unless told otherwise, a fixed signing key at bcrypt cost 4, tasks in memory,
//!   with any module setting or server field changed on the way; [`TestConfig::spawn`] runs it.
//! - [`sign_up`] registers an account over HTTP and returns a bearer token for it (with
//!   [`sign_up_user`] the user too), on a [`TestServer`] (`&s.client, &s.base_url`) or on a real
//!   `keel` process alike; [`register`] and [`login`] are its two halves.
//! - [`run_command`] runs a module's command (`users set-role ...`) on a test's settings, as
//!   `keel <args>` would.
//!
//! ```text
//! let s = TestConfig::new(&db)
//!     .modules(&["auth", "payment"])
//!     .setting(|p: &mut payment_core::PaymentConfig| p.webhook_secret = Some("whsec_x".into()))
//!     .spawn()
//!     .await;
//! let token = sign_up(&s.client, &s.base_url, "writer@example.com").await;
//! ```
// Test support: a failed expectation is a test failure.
#![allow(clippy::expect_used)]

use kernel::ModuleConfig;
use kernel::testing::{TestDb, TestServer};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::cli::{self, CliError};
use crate::{Application, Config};

/// The signing key (`SECRET_KEY`) of a [`TestConfig`].
pub const TEST_SECRET: &str = "keel-test-secret-keel-test-secret-keel";

/// The password of the accounts [`sign_up`] makes.
pub const PASSWORD: &str = "password123";

/// The server's settings for a test, built in code from [`Config::default`] (nothing read from
/// the environment).
#[derive(Debug, Clone)]
pub struct TestConfig(Config);

impl TestConfig {
    /// On `db` (its URL, and its read-cache choice as `READ_CACHE`), port 0, two HTTP workers,
    /// every compiled module mounted; auth signs with [`TEST_SECRET`] at bcrypt cost 4, tasks run
    /// on the in-memory queue.
    pub fn new(db: &TestDb) -> TestConfig {
        let config = TestConfig(Config {
            port: 0,
            database_url: db.url.clone(),
            http_workers: 2,
            read_cache: db.read_cache,
            ..Config::default()
        });
        #[cfg(feature = "auth")]
        let config = config.secret_key(TEST_SECRET);
        #[cfg(feature = "tasks")]
        let config = config.setting(|tasks: &mut tasks_core::TasksConfig| {
            tasks.backend = tasks_core::BackendChoice::Memory;
        });
        config
    }

    /// Mounts `modules` (by name, as `KEEL_MODULES`; none with `&[]`) instead of every one.
    pub fn modules(mut self, modules: &[&'static str]) -> TestConfig {
        self.0.modules = modules.to_vec();
        self
    }

    /// `HTTP_WORKERS`.
    pub fn http_workers(mut self, workers: usize) -> TestConfig {
        self.0.http_workers = workers;
        self
    }

    /// Auth signs with `key` (`SECRET_KEY`) instead of [`TEST_SECRET`], at bcrypt cost 4.
    #[cfg(feature = "auth")]
    pub fn secret_key(self, key: &str) -> TestConfig {
        self.set(auth_core::AuthConfig::with_secret(key))
    }

    /// Changes one module's settings (`config.settings.get_mut::<T>()`), e.g.
    /// `.setting(|t: &mut TasksConfig| t.max_tries = 2)`.
    pub fn setting<T: ModuleConfig>(mut self, change: impl FnOnce(&mut T)) -> TestConfig {
        change(self.0.settings.get_mut::<T>());
        self
    }

    /// Replaces one module's settings whole.
    pub fn set<T: ModuleConfig>(mut self, settings: T) -> TestConfig {
        self.0.settings.set(settings);
        self
    }

    /// Changes any other server setting, e.g. `.with(|c| c.max_json_bytes = 2048)`.
    pub fn with(mut self, change: impl FnOnce(&mut Config)) -> TestConfig {
        change(&mut self.0);
        self
    }

    /// The settings.
    pub fn build(self) -> Config {
        self.0
    }

    /// Builds the application and serves it on 127.0.0.1 (see [`serve`]).
    pub async fn spawn(self) -> TestServer {
        let app = Application::build(self.0).await.expect("the server starts");
        serve(app)
    }
}

/// Serves a built application in the background, with what runs beside it (the embedded task
/// worker, a metrics listener) kept alive as long as the server.
pub fn serve(app: Application) -> TestServer {
    let port = app.port();
    let (server, background) = app.into_parts();
    TestServer::start(server, port).hold(background)
}

/// `POST /api/v1/auth/register` of `email` and `password` on the server at `base`; the status.
pub async fn register(client: &Client, base: &str, email: &str, password: &str) -> StatusCode {
    send_registration(client, base, json!({"email": email, "password": password}))
        .await
        .status()
}

/// `POST /api/v1/auth/token` of `email` and `password`; the access token (panics on any other
/// answer than 200).
pub async fn login(client: &Client, base: &str, email: &str, password: &str) -> String {
    let r = client
        .post(format!("{base}/api/v1/auth/token"))
        .form(&[("username", email), ("password", password)])
        .send()
        .await
        .expect("login answers");
    assert_eq!(r.status(), StatusCode::OK, "login of {email}");
    let body: Value = r.json().await.expect("a JSON token");
    body["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned()
}

/// Registers `email` with [`PASSWORD`] on the server at `base` (panics unless 201) and logs in:
/// a bearer token for the new account.
pub async fn sign_up(client: &Client, base: &str, email: &str) -> String {
    sign_up_user(client, base, email, None).await.1
}

/// [`sign_up`] with a full name, or none: the user the API answered and the token.
pub async fn sign_up_user(
    client: &Client,
    base: &str,
    email: &str,
    full_name: Option<&str>,
) -> (Value, String) {
    let mut body = json!({"email": email, "password": PASSWORD});
    if let Some(name) = full_name {
        body["full_name"] = json!(name);
    }
    let r = send_registration(client, base, body).await;
    assert_eq!(r.status(), StatusCode::CREATED, "registration of {email}");
    let user: Value = r.json().await.expect("the user as JSON");
    (user, login(client, base, email, PASSWORD).await)
}

async fn send_registration(client: &Client, base: &str, body: Value) -> reqwest::Response {
    client
        .post(format!("{base}/api/v1/auth/register"))
        .json(&body)
        .send()
        .await
        .expect("register answers")
}

/// Runs a module's command (`["users", "set-role", email, "admin"]`) on `config`'s database and
/// settings, in this process, as `keel <args>` runs it.
pub async fn run_command(config: &Config, args: &[&str]) -> Result<(), CliError> {
    let matches = cli::command()
        .try_get_matches_from(std::iter::once("keel").chain(args.iter().copied()))
        .map_err(|e| CliError::Failed(e.to_string()))?;
    match matches.subcommand() {
        Some((name, sub)) => cli::module_command_run(config.clone(), name, sub).await,
        None => Err(CliError::Failed("no command given".to_owned())),
    }
}
