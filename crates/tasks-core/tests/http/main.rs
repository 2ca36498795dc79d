//! The tasks module over HTTP and through its public API. Every test of `backend_suite!` runs twice:
//! on the in-memory backend and on Redis (`TEST_REDIS_URL`, skipped with a note when unset), each
//! Redis run under its own key namespace, removed afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use deadpool_redis::redis;
use kernel::Module;
use kernel::identity::{AuthFailure, Authenticator, Principal, Role};
use kernel::jobs::{EnqueueRequest, JobError, TaskFn, TaskInput, TaskResult};
use kernel::testing::{TestServer, spawn_modules};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tasks_core::backend::redis::RedisSettings;
use tasks_core::testing::{
    MemoryBackend, RandomSource, RedisBackend, SequenceRandom, SystemRandom, TaskBackend,
};
use tasks_core::{BackendChoice, BackendKind, TaskDefinition, TasksConfig, TasksModule};
use tokio::sync::{Notify, Semaphore};

// ---------------------------------------------------------------------------------------------
// Harness

/// Runs each named `async fn(Harness)` on both backends.
macro_rules! backend_suite {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn memory() {
                    super::$name(super::Harness::memory()).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn redis() {
                    match super::Harness::redis() {
                        Some(h) => super::$name(h).await,
                        None => eprintln!("TEST_REDIS_URL is not set: Redis run skipped"),
                    }
                }
            }
        )*
    };
}

struct Harness {
    kind: BackendKind,
    memory: Arc<MemoryBackend>,
    redis_url: Option<String>,
    namespace: String,
}

impl Harness {
    fn memory() -> Harness {
        Harness {
            kind: BackendKind::Memory,
            memory: Arc::new(MemoryBackend::new()),
            redis_url: None,
            namespace: String::new(),
        }
    }

    fn redis() -> Option<Harness> {
        let url = std::env::var("TEST_REDIS_URL")
            .ok()
            .filter(|u| !u.is_empty())?;
        Some(Harness {
            kind: BackendKind::Redis,
            memory: Arc::new(MemoryBackend::new()),
            redis_url: Some(url),
            namespace: format!("test-{}", uuid::Uuid::new_v4().simple()),
        })
    }

    /// Fast timings so that retries, expiry and take-overs happen within a test.
    fn config(&self) -> TasksConfig {
        TasksConfig {
            backend: match self.kind {
                BackendKind::Memory => BackendChoice::Memory,
                BackendKind::Redis => BackendChoice::Redis,
            },
            redis_url: self.redis_url.clone().unwrap_or_default(),
            namespace: Some(self.namespace.clone()).filter(|n| !n.is_empty()),
            worker_threads: 4,
            max_tries: 3,
            keep_result: Duration::from_secs(60),
            embedded_worker: false,
            task_timeout: Duration::from_secs(30),
            visibility_timeout: Duration::from_secs(5),
            retry_backoff: Duration::from_millis(10),
            retry_backoff_max: Duration::from_millis(50),
            shutdown_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
            ..TasksConfig::default()
        }
    }

    fn backend(&self, config: &TasksConfig) -> Arc<dyn TaskBackend> {
        match &self.redis_url {
            None => self.memory.clone(),
            Some(url) => Arc::new(
                RedisBackend::connect(&RedisSettings {
                    url: url.clone(),
                    db: None,
                    prefix: config.key_prefix(),
                    connect_timeout: Duration::from_secs(2),
                    max_block: config.poll_interval,
                    pool_size: 16,
                })
                .expect("a Redis pool"),
            ),
        }
    }

    fn module(&self, config: TasksConfig) -> TasksModule {
        self.module_with_random(config, Arc::new(SystemRandom))
    }

    fn module_with_random(
        &self,
        config: TasksConfig,
        random: Arc<dyn RandomSource>,
    ) -> TasksModule {
        let backend = self.backend(&config);
        TasksModule::with_backend(config, backend, random)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let Some(url) = self.redis_url.clone() else {
            return;
        };
        let pattern = format!("keel:tasks:{}:*", self.namespace);
        let _ = std::thread::spawn(move || {
            let Ok(mut conn) = redis::Client::open(url.as_str()).and_then(|c| c.get_connection())
            else {
                return;
            };
            let mut cursor = 0u64;
            loop {
                let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query(&mut conn)
                else {
                    return;
                };
                if !keys.is_empty() {
                    let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(&keys).query(&mut conn);
                }
                if next == 0 {
                    return;
                }
                cursor = next;
            }
        })
        .join();
    }
}

fn serve(module: &TasksModule) -> TestServer {
    serve_with_auth(module, None)
}

fn serve_with_auth(module: &TasksModule, auth: Option<Arc<dyn Authenticator>>) -> TestServer {
    spawn_modules(vec![Arc::new(module.clone().with_authenticator(auth))])
}

async fn get(server: &TestServer, path: &str) -> (StatusCode, Value) {
    let response = server.client.get(server.url(path)).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post(server: &TestServer, path: &str, body: Value) -> (StatusCode, Value) {
    let response = server
        .client
        .post(server.url(path))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Enqueues and returns the task id (asserting 200).
async fn enqueue(server: &TestServer, body: Value) -> String {
    let (status, body) = post(server, "/api/v1/tasks/enqueue", body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["task_id"].as_str().unwrap().to_owned()
}

/// Polls `f` until it yields a value; gives up (failing the test) after a minute, which only a
/// hung test reaches.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = f().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `GET /result/{id}` answers 200 and returns the body.
async fn finished(server: &TestServer, id: &str) -> Value {
    eventually("a finished task", || async {
        let (status, body) = get(server, &format!("/api/v1/tasks/result/{id}")).await;
        match status {
            StatusCode::OK => Some(body),
            StatusCode::ACCEPTED => None,
            other => panic!("unexpected {other}: {body}"),
        }
    })
    .await
}

async fn status_of(server: &TestServer, id: &str) -> Value {
    let (status, body) = get(server, &format!("/api/v1/tasks/status/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn wait_status(server: &TestServer, id: &str, wanted: &str) -> Value {
    eventually(&format!("status {wanted}"), || async {
        let body = status_of(server, id).await;
        let finished = body["status"] == "completed" || body["status"] == "failed";
        assert!(
            body["status"] == wanted || !finished,
            "wanted {wanted}: {body}"
        );
        (body["status"] == wanted).then_some(body)
    })
    .await
}

fn task<F, Fut>(f: F) -> TaskFn
where
    F: Fn(TaskInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = TaskResult> + Send + 'static,
{
    Arc::new(move |input| Box::pin(f(input)))
}

/// A task that blocks until the gate opens, counting how many runs started.
fn gated(gate: Arc<Semaphore>, started: Arc<AtomicU32>) -> TaskFn {
    task(move |input| {
        let gate = gate.clone();
        let started = started.clone();
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            // Each run uses up one permit: the test opens the gate once per run.
            gate.acquire().await.map_err(|e| e.to_string())?.forget();
            Ok(json!({"attempt": input.attempt}))
        }
    })
}

/// `DELETE path`, with a bearer token when given.
async fn delete(server: &TestServer, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut request = server.client.delete(server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A request with a bearer token: `(method, path, body)`.
async fn call_as(
    server: &TestServer,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = server
        .client
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Tokens `alice` and `bob` (users 1 and 2) and `admin` (user 3, an administrator).
struct Users;

#[async_trait::async_trait]
impl Authenticator for Users {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let (user_id, role) = match token {
            "alice" => (1, Role::User),
            "bob" => (2, Role::User),
            "admin" => (3, Role::Admin),
            _ => return Err(AuthFailure::InvalidCredentials),
        };
        Ok(Principal {
            user_id,
            email: format!("{token}@example.com"),
            full_name: None,
            role,
            is_active: true,
        })
    }
}

mod api;
mod cancel;
mod dead_letters;
mod redis_link;
mod schedules;
mod setup;
mod waiting;
mod workers;
