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
use tasks_core::{
    BackendChoice, BackendKind, MemoryBackend, RandomSource, RedisBackend, SequenceRandom,
    SystemRandom, TaskBackend, TaskDefinition, TasksConfig, TasksModule,
};
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

// ---------------------------------------------------------------------------------------------
// The shared suite

backend_suite! {
    enqueue_then_result,
    pending_answers_202,
    results_expire_to_404,
    request_errors_follow_the_contract,
    list_shows_tasks_and_depths,
    retries_until_success,
    retries_until_exhaustion,
    dead_worker_job_is_taken_over_once,
    dead_worker_on_the_last_attempt_fails_the_job,
    load_test_saturation_does_not_delay_system,
    two_modules_share_results,
    graceful_shutdown_finishes_or_hands_back,
    delayed_jobs_wait_their_turn,
    orchestrator_reports_throughput,
    cleanup_runs_module_hooks,
    job_queue_trait_enqueues,
}

async fn enqueue_then_result(h: Harness) {
    let module = h.module(h.config());
    module
        .register(
            "echo_task",
            "system",
            task(|input| async move { Ok(json!({"args": input.args, "kwargs": input.kwargs})) }),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let (status, body) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "io_simulation_task", "queue_type": "load_test"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["task_id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok());
    assert_eq!(body["task_name"], "io_simulation_task");
    assert_eq!(body["queue_type"], "load_test");
    assert_eq!(body["status"], "queued");
    assert_eq!(
        body["message"],
        "Task 'io_simulation_task' enqueued to load_test queue"
    );
    assert!(body["queued_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(body["estimated_start"], body["queued_at"]);

    let result = finished(&server, id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["task_id"], id);
    assert_eq!(result["attempts"], 1);
    assert_eq!(result["error"], Value::Null);
    assert_eq!(result["result"]["total_concurrent_operations"], 7);
    assert_eq!(result["result"]["operations"].as_array().unwrap().len(), 7);
    assert!(result["result"]["total_duration_ms"].is_number());
    assert!(result["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(result["finished_at"].as_str().unwrap().ends_with('Z'));

    // Arguments reach the task unchanged (the reference's `task_kwargs` spelling too).
    let id = enqueue(
        &server,
        json!({
            "task_name": "echo_task",
            "args": [1, "two", {"three": [3]}, 12345678901234567890u64, 0.1],
            "task_kwargs": {"flag": true, "nested": {"x": null}},
        }),
    )
    .await;
    let result = finished(&server, &id).await;
    assert_eq!(
        result["result"],
        json!({
            "args": [1, "two", {"three": [3]}, 12345678901234567890u64, 0.1],
            "kwargs": {"flag": true, "nested": {"x": null}},
        })
    );
    let id = enqueue(
        &server,
        json!({"task_name": "echo_task", "args": null, "kwargs": null}),
    )
    .await;
    assert_eq!(
        finished(&server, &id).await["result"],
        json!({"args": [], "kwargs": {}})
    );

    // The queue is taken by default from the task.
    let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["queue_type"], "system");
    assert_eq!(result["result"]["status"], "healthy");
    assert_eq!(status_of(&server, &id).await["status"], "completed");

    worker.shutdown(Duration::from_secs(5)).await;
}

async fn pending_answers_202(h: Harness) {
    let module = h.module(h.config());
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    module
        .register("held_task", "system", gated(gate.clone(), started.clone()))
        .unwrap();
    let server = serve(&module);

    // No worker yet: queued.
    let id = enqueue(&server, json!({"task_name": "held_task"})).await;
    let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "queued");
    assert_eq!(body["attempts"], 0);
    assert_eq!(body["result"], Value::Null);
    assert_eq!(body["started_at"], Value::Null);
    assert_eq!(status_of(&server, &id).await["status"], "queued");

    // Running: in_progress, still 202.
    let worker = module.start_worker(&["system"]).unwrap();
    wait_status(&server, &id, "in_progress").await;
    let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "in_progress");
    assert_eq!(body["attempts"], 1);

    gate.add_permits(1);
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    assert_eq!(result["result"], json!({"attempt": 1}));
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn results_expire_to_404(h: Harness) {
    let config = TasksConfig {
        keep_result: Duration::from_secs(1),
        ..h.config()
    };
    let module = h.module(config);
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
    assert_eq!(finished(&server, &id).await["status"], "completed");
    let body = eventually("the result to expire", || async {
        let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
        (status == StatusCode::NOT_FOUND).then_some(body)
    })
    .await;
    assert_eq!(body, json!({"detail": format!("Task not found: {id}")}));
    let (status, _) = get(&server, &format!("/api/v1/tasks/status/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn request_errors_follow_the_contract(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    let path = "/api/v1/tasks/enqueue";

    let (status, body) = post(&server, path, json!({"task_name": "nope"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Unknown task: nope");
    let available = body["available_tasks"].as_array().unwrap();
    assert!(available.contains(&json!("io_simulation_task")));
    assert!(available.contains(&json!("cleanup_expired_data")));

    let (status, body) = post(
        &server,
        path,
        json!({"task_name": "io_simulation_task", "queue_type": "system"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["detail"],
        "Task io_simulation_task runs on queue load_test, not system"
    );

    let (status, body) = post(
        &server,
        path,
        json!({"task_name": "io_simulation_task", "queue_type": "media"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Unknown queue: media");
    assert_eq!(body["available_queues"], json!(["load_test", "system"]));

    let (status, body) = post(
        &server,
        path,
        json!({"task_name": "io_simulation_task", "delay_seconds": 99_999_999}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        "delay_seconds must be between 0 and 2592000"
    );

    let (status, body) = post(&server, path, json!({"queue_type": "system"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("task_name"));

    let response = server
        .client
        .post(server.url(path))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);

    let (status, body) = get(&server, "/api/v1/tasks/result/no-such-task").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"detail": "Task not found: no-such-task"}));
    let (status, body) = get(&server, "/api/v1/tasks/status/no-such-task").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"detail": "Task not found: no-such-task"}));
}

async fn list_shows_tasks_and_depths(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    for _ in 0..2 {
        enqueue(&server, json!({"task_name": "cpu_intensive_task"})).await;
    }
    enqueue(
        &server,
        json!({"task_name": "system_health_check", "delay_seconds": 3600}),
    )
    .await;

    for path in ["/api/v1/tasks", "/api/v1/tasks/"] {
        let (status, body) = get(&server, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(body["total_count"], 7);
        assert_eq!(body["backend"], h.kind.as_str());
        assert_eq!(
            body["queues"]["load_test"],
            json!([
                "cpu_intensive_task",
                "failure_testing_task",
                "io_simulation_task",
                "load_test_orchestrator",
                "memory_operations_task"
            ])
        );
        assert_eq!(
            body["queues"]["system"],
            json!(["cleanup_expired_data", "system_health_check"])
        );
        assert_eq!(
            body["queue_depths"]["load_test"],
            json!({"queued": 2, "scheduled": 0, "in_progress": 0})
        );
        assert_eq!(
            body["queue_depths"]["system"],
            json!({"queued": 0, "scheduled": 1, "in_progress": 0})
        );
    }
}

async fn retries_until_success(h: Harness) {
    // failure_testing_task fails on the first roll (0.05 < 0.2) and passes on the second.
    let module = h.module_with_random(h.config(), Arc::new(SequenceRandom::new(vec![0.05, 0.9])));
    module
        .register(
            "flaky_task",
            "system",
            task(|input| async move {
                if input.attempt < 3 {
                    Err(format!("not yet (attempt {})", input.attempt))
                } else {
                    Ok(json!({"succeeded_on": input.attempt}))
                }
            }),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let id = enqueue(&server, json!({"task_name": "flaky_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 3);
    assert_eq!(result["result"], json!({"succeeded_on": 3}));
    assert_eq!(result["error"], Value::Null);

    let id = enqueue(&server, json!({"task_name": "failure_testing_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 2);
    assert_eq!(result["result"]["roll"], 0.9);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn retries_until_exhaustion(h: Harness) {
    let module = h.module(h.config());
    module
        .register(
            "broken_task",
            "system",
            task(|input| async move { Err(format!("boom on attempt {}", input.attempt)) }),
        )
        .unwrap();
    module
        .register_task(
            TaskDefinition::new(
                "slow_task",
                "system",
                task(|_| async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Value::Null)
                }),
            )
            .with_timeout(Duration::from_millis(50)),
        )
        .unwrap();
    module
        .register(
            "panicking_task",
            "system",
            task(|input| async move {
                if input.attempt > 0 {
                    panic!("kaboom");
                }
                Ok(Value::Null)
            }),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let id = enqueue(&server, json!({"task_name": "broken_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["attempts"], 3);
    assert_eq!(result["error"], "boom on attempt 3");
    assert_eq!(result["result"], Value::Null);
    assert!(result["finished_at"].is_string());

    let id = enqueue(&server, json!({"task_name": "slow_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["attempts"], 3);
    assert_eq!(result["error"], "Task timed out after 50ms");

    let id = enqueue(&server, json!({"task_name": "panicking_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"], "Task panicked: kaboom");
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn dead_worker_job_is_taken_over_once(h: Harness) {
    let config = TasksConfig {
        visibility_timeout: Duration::from_secs(1),
        ..h.config()
    };
    let module = h.module(config);
    let runs = Arc::new(AtomicU32::new(0));
    let completions = Arc::new(AtomicU32::new(0));
    let started = Arc::new(Notify::new());
    {
        let (runs, completions, started) = (runs.clone(), completions.clone(), started.clone());
        module
            .register(
                "fragile_task",
                "system",
                task(move |input| {
                    let (runs, completions, started) =
                        (runs.clone(), completions.clone(), started.clone());
                    async move {
                        let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                        if run == 1 {
                            started.notify_one();
                            // The first run hangs until its worker is killed.
                            std::future::pending::<()>().await;
                        }
                        completions.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"run": run, "attempt": input.attempt}))
                    }
                }),
            )
            .unwrap();
    }
    let server = serve(&module);

    let first = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "fragile_task"})).await;
    started.notified().await;
    first.abort();

    let second = module.start_worker(&["system"]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 2);
    assert_eq!(result["result"], json!({"run": 2, "attempt": 2}));

    // Let more than a visibility timeout pass: nobody takes the settled job again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(completions.load(Ordering::SeqCst), 1);
    assert_eq!(finished(&server, &id).await, result);
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(
        list["queue_depths"]["system"],
        json!({"queued": 0, "scheduled": 0, "in_progress": 0})
    );
    second.shutdown(Duration::from_secs(5)).await;
}

async fn dead_worker_on_the_last_attempt_fails_the_job(h: Harness) {
    let config = TasksConfig {
        visibility_timeout: Duration::from_millis(500),
        max_tries: 1,
        ..h.config()
    };
    let module = h.module(config);
    let started = Arc::new(Notify::new());
    {
        let started = started.clone();
        module
            .register(
                "hanging_task",
                "system",
                task(move |_| {
                    let started = started.clone();
                    async move {
                        started.notify_one();
                        std::future::pending::<()>().await;
                        Ok(Value::Null)
                    }
                }),
            )
            .unwrap();
    }
    let server = serve(&module);
    let first = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "hanging_task"})).await;
    started.notified().await;
    first.abort();

    let second = module.start_worker(&["system"]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["attempts"], 1);
    assert_eq!(
        result["error"],
        "The worker running the task stopped before it finished (attempt 1 of 1)"
    );
    second.shutdown(Duration::from_secs(5)).await;
}

async fn load_test_saturation_does_not_delay_system(h: Harness) {
    let config = TasksConfig {
        worker_threads: 2,
        ..h.config()
    };
    let module = h.module(config);
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    module
        .register(
            "load_gate_task",
            "load_test",
            gated(gate.clone(), started.clone()),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let mut load_ids = Vec::new();
    for _ in 0..10 {
        load_ids.push(enqueue(&server, json!({"task_name": "load_gate_task"})).await);
    }
    eventually("load_test slots to fill", || async {
        (started.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await;

    // load_test is saturated (2 of 2 slots blocked, 8 waiting); system jobs still run.
    for _ in 0..3 {
        let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
        assert_eq!(finished(&server, &id).await["status"], "completed");
    }
    assert_eq!(started.load(Ordering::SeqCst), 2);
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(
        list["queue_depths"]["load_test"],
        json!({"queued": 8, "scheduled": 0, "in_progress": 2})
    );
    for id in &load_ids {
        assert_ne!(status_of(&server, id).await["status"], "completed");
    }

    gate.add_permits(100);
    for id in &load_ids {
        assert_eq!(finished(&server, id).await["status"], "completed");
    }
    assert_eq!(started.load(Ordering::SeqCst), 10);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn two_modules_share_results(h: Harness) {
    // Two servers on the same queue: `a` only serves the API, `b` also runs the worker.
    let a = h.module(h.config());
    let b = h.module(h.config());
    let worker = b.start_worker(&[]).unwrap();
    let (server_a, server_b) = (serve(&a), serve(&b));

    let id = enqueue(&server_a, json!({"task_name": "system_health_check"})).await;
    let on_b = finished(&server_b, &id).await;
    let on_a = finished(&server_a, &id).await;
    assert_eq!(on_a["status"], "completed");
    assert_eq!(on_a, on_b);

    let id = enqueue(
        &server_b,
        json!({"task_name": "memory_operations_task", "kwargs": {"size": 1000}}),
    )
    .await;
    let on_a = finished(&server_a, &id).await;
    assert_eq!(on_a["result"]["elements"], 1000);
    assert_eq!(on_a, finished(&server_b, &id).await);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn graceful_shutdown_finishes_or_hands_back(h: Harness) {
    let module = h.module(h.config());
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    module
        .register("gate_task", "system", gated(gate.clone(), started.clone()))
        .unwrap();
    let server = serve(&module);

    // A running job finishes within the shutdown window.
    let worker = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    wait_status(&server, &id, "in_progress").await;
    let stopping = tokio::spawn(worker.shutdown(Duration::from_secs(30)));
    gate.add_permits(1);
    stopping.await.unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    assert_eq!(result["attempts"], 1);

    // A job still running when the window closes goes back to the queue, uncounted.
    let worker = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    wait_status(&server, &id, "in_progress").await;
    worker.shutdown(Duration::from_millis(100)).await;
    let body = status_of(&server, &id).await;
    assert_eq!(body["status"], "queued", "{body}");
    assert_eq!(body["attempts"], 0);

    let worker = module.start_worker(&["system"]).unwrap();
    gate.add_permits(10);
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    assert_eq!(result["attempts"], 1);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn delayed_jobs_wait_their_turn(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    let (status, body) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "system_health_check", "delay_seconds": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = body["task_id"].as_str().unwrap().to_owned();
    let queued_at =
        chrono::DateTime::parse_from_rfc3339(body["queued_at"].as_str().unwrap()).unwrap();
    let estimated =
        chrono::DateTime::parse_from_rfc3339(body["estimated_start"].as_str().unwrap()).unwrap();
    assert_eq!(estimated - queued_at, chrono::Duration::seconds(1));
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(list["queue_depths"]["system"]["scheduled"], 1);

    let worker = module.start_worker(&[]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    let started =
        chrono::DateTime::parse_from_rfc3339(result["started_at"].as_str().unwrap()).unwrap();
    // Never before it is due (a little slack for clock reads in different places).
    assert!(started >= estimated - chrono::Duration::milliseconds(100));
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn orchestrator_reports_throughput(h: Harness) {
    let module = h.module(h.config());
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = enqueue(
        &server,
        json!({
            "task_name": "load_test_orchestrator",
            "kwargs": {"num_tasks": 6, "task_type": "io_simulation", "batch_size": 4},
        }),
    )
    .await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    let report = &result["result"];
    assert_eq!(report["target_task"], "io_simulation_task");
    assert_eq!(report["enqueued"], 6);
    assert_eq!(report["completed"], 6);
    assert_eq!(report["pending"], 0);
    assert_eq!(report["status"], "completed");
    assert!(report["tasks_per_second"].is_number());
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn cleanup_runs_module_hooks(h: Harness) {
    let module = h.module(h.config());
    module.register_cleanup(
        "webhook_events",
        task(|_| async { Ok(json!({"removed": 3})) }),
    );
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = enqueue(&server, json!({"task_name": "cleanup_expired_data"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"]["hooks"]["webhook_events"]["removed"], 3);
    assert!(result["result"]["expired_items_removed"].is_number());
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn job_queue_trait_enqueues(h: Harness) {
    let module = h.module(h.config());
    let queue = module.queue();
    let id = queue
        .enqueue(EnqueueRequest {
            task_name: "system_health_check".into(),
            ..EnqueueRequest::default()
        })
        .await
        .unwrap();
    let record = module.service().status(&id).await.unwrap();
    assert_eq!(record.queue, "system");
    assert_eq!(
        queue
            .enqueue(EnqueueRequest {
                task_name: "nope".into(),
                ..EnqueueRequest::default()
            })
            .await,
        Err(JobError::UnknownTask("nope".into()))
    );
    assert_eq!(
        queue
            .enqueue(EnqueueRequest {
                task_name: "system_health_check".into(),
                queue: Some("load_test".into()),
                ..EnqueueRequest::default()
            })
            .await,
        Err(JobError::WrongQueue {
            task: "system_health_check".into(),
            expected: "system".into(),
            requested: "load_test".into(),
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Backend choice, Redis down, auth, OpenAPI, CLI

/// A local port with nothing listening.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn down_config(backend: BackendChoice) -> TasksConfig {
    TasksConfig {
        backend,
        redis_url: format!("redis://127.0.0.1:{}", closed_port()),
        redis_connect_timeout: Duration::from_millis(500),
        ..TasksConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_configured_but_down_answers_503() {
    let module = TasksModule::connect(down_config(BackendChoice::Redis))
        .await
        .unwrap();
    assert_eq!(module.backend_kind(), BackendKind::Redis);
    let server = serve(&module);

    let (status, body) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "io_simulation_task"}),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.starts_with("Task queue unavailable: "), "{detail}");
    for path in [
        "/api/v1/tasks/result/x",
        "/api/v1/tasks/status/x",
        "/api/v1/tasks",
    ] {
        let (status, body) = get(&server, path).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .starts_with("Task queue unavailable: ")
        );
    }
    // Validation still answers first.
    let (status, _) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let health = module.health().await;
    assert_eq!(health.status, kernel::health::HealthStatus::Unhealthy);

    // A worker on a Redis that is down keeps trying and stops cleanly.
    let worker = module.start_worker(&[]).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_memory_when_redis_is_down() {
    let module = TasksModule::connect(down_config(BackendChoice::Auto))
        .await
        .unwrap();
    assert_eq!(module.backend_kind(), BackendKind::Memory);
    assert_eq!(
        module.health().await.status,
        kernel::health::HealthStatus::Degraded
    );
    // Other processes cannot see an in-memory queue: the CLI and `keel worker` refuse it.
    let refused = module.cli_enqueue("system_health_check", None, None).await;
    assert!(matches!(
        refused,
        Err(tasks_core::TasksError::Unavailable(_))
    ));
    assert!(module.run_worker_until_signal(&[]).await.is_err());
    assert!(module.cli_list().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_uses_redis_when_it_answers() {
    let Some(h) = Harness::redis() else {
        eprintln!("TEST_REDIS_URL is not set: Redis run skipped");
        return;
    };
    let config = TasksConfig {
        backend: BackendChoice::Auto,
        ..h.config()
    };
    let module = TasksModule::connect(config).await.unwrap();
    assert_eq!(module.backend_kind(), BackendKind::Redis);
    assert_eq!(
        module.health().await.status,
        kernel::health::HealthStatus::Healthy
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_enqueues_and_waits_for_results() {
    let Some(h) = Harness::redis() else {
        eprintln!("TEST_REDIS_URL is not set: Redis run skipped");
        return;
    };
    let module = TasksModule::connect(h.config()).await.unwrap();
    let worker = module.start_worker(&["load_test"]).unwrap();
    // Another process (here: another module instance) enqueues and reads.
    let cli = TasksModule::connect(h.config()).await.unwrap();
    let list = cli.cli_list().await.unwrap();
    assert_eq!(list.backend, "redis");
    let queued = cli
        .cli_enqueue(
            "cpu_intensive_task",
            Some("load_test"),
            Some("{\"limit\": 100}"),
        )
        .await
        .unwrap();
    let result = cli
        .cli_result(&queued.task_id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(result.status, tasks_core::TaskStatus::Completed);
    assert_eq!(result.result.unwrap()["primes_found"], 25);
    assert!(matches!(
        cli.cli_enqueue("nope", None, None).await,
        Err(tasks_core::TasksError::UnknownTask { .. })
    ));
    assert!(matches!(
        cli.cli_result("missing", None).await,
        Err(tasks_core::TasksError::NotFound(_))
    ));
    worker.shutdown(Duration::from_secs(5)).await;
}

struct TokenAuth;

#[async_trait::async_trait]
impl Authenticator for TokenAuth {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        match token {
            "good" => Ok(Principal {
                user_id: 1,
                email: "a@example.com".into(),
                full_name: None,
                role: Role::User,
                is_active: true,
            }),
            "inactive" => Err(AuthFailure::Inactive),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_need_an_active_user_when_auth_is_mounted() {
    let h = Harness::memory();
    let module = h.module(h.config());
    let server = serve_with_auth(&module, Some(Arc::new(TokenAuth)));

    let response = server
        .client
        .get(server.url("/api/v1/tasks"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers().get("www-authenticate").unwrap(),
        "Bearer"
    );
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"detail": "Not authenticated"})
    );

    for (token, detail) in [
        ("bad", "Could not validate credentials"),
        ("inactive", "Inactive user"),
    ] {
        let response = server
            .client
            .post(server.url("/api/v1/tasks/enqueue"))
            .bearer_auth(token)
            .json(&json!({"task_name": "system_health_check"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.json::<Value>().await.unwrap()["detail"], detail);
    }

    let response = server
        .client
        .post(server.url("/api/v1/tasks/enqueue"))
        .bearer_auth("good")
        .json(&json!({"task_name": "system_health_check"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let id = response.json::<Value>().await.unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for path in [
        format!("/api/v1/tasks/result/{id}"),
        format!("/api/v1/tasks/status/{id}"),
    ] {
        let response = server.client.get(server.url(&path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        let response = server
            .client
            .get(server.url(&path))
            .bearer_auth("good")
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{path}");
    }
}

#[tokio::test]
async fn openapi_describes_every_route() {
    use utoipa_actix_web::AppExt;
    let h = Harness::memory();
    let module = h.module(h.config());
    let module: Arc<dyn Module> = Arc::new(module);
    let (_, api) =
        kernel::module::mount(actix_web::App::new().into_utoipa_app(), &module).split_for_parts();
    let paths: Vec<&String> = api.paths.paths.keys().collect();
    for expected in [
        "/api/v1/tasks",
        "/api/v1/tasks/enqueue",
        "/api/v1/tasks/result/{task_id}",
        "/api/v1/tasks/status/{task_id}",
    ] {
        assert!(
            paths.iter().any(|p| p.as_str() == expected),
            "{expected} missing from {paths:?}"
        );
    }
    let schemas = api.components.map(|c| c.schemas).unwrap_or_default();
    for schema in [
        "tasks.EnqueueBody",
        "tasks.EnqueueResponse",
        "tasks.TaskStatusResponse",
        "tasks.TaskListResponse",
    ] {
        assert!(schemas.contains_key(schema), "{schema} missing");
    }
}
