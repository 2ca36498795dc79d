//! Prometheus metrics of the composed server (`METRICS_ENABLED`, `METRICS_ADDR`).
//!
//! The recorder is global to the process, so every test here reports into the same one and
//! others may run at the same time: counters are checked for having moved by at least what the
//! test did, and only one test opens AI streams.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keel::testing::{TestConfig, serve, sign_up};
use keel::{Application, Config};
use kernel::testing::{TestDb, TestServer};
use provider_sim::{ProviderSim, SimConfig, SimHandle};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The test's settings with metrics on, every module mounted, tasks in memory with quick retries.
fn config(db: &TestDb) -> TestConfig {
    TestConfig::new(db)
        .with(|c| c.metrics_enabled = true)
        .setting(|tasks: &mut tasks_core::TasksConfig| {
            tasks.max_tries = 2;
            tasks.retry_backoff = Duration::from_millis(10);
            tasks.retry_backoff_max = Duration::from_millis(10);
        })
}

/// The server and what runs beside it; the metrics port when it has its own.
async fn spawn(config: TestConfig) -> (TestServer, Option<u16>) {
    let app = Application::build(config.build())
        .await
        .expect("the server starts");
    let metrics_port = app.metrics_port();
    (serve(app), metrics_port)
}

/// One scrape of `/metrics`.
struct Scrape(String);

impl Scrape {
    async fn of(client: &reqwest::Client, url: &str) -> Scrape {
        let r = client.get(url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let content_type = r.headers()[reqwest::header::CONTENT_TYPE].clone();
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        Scrape(r.text().await.unwrap())
    }

    /// The value of the series `name` whose labels include every one of `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0.lines().find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, rest) = series.split_once('{').unwrap_or((series, ""));
            let matches = series_name == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            matches.then(|| value.parse().ok()).flatten()
        })
    }

    /// Like [`value`](Self::value), 0 for a series not there yet.
    fn count(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or(0.0)
    }
}

const REQUESTS: &str = "keel_http_requests_total";
const JOBS: &str = "keel_task_jobs_total";
const CALLS: &str = "keel_provider_calls_total";

kernel::backend_tests! {
    requests_and_the_pool_are_measured,
}

async fn requests_and_the_pool_are_measured(db: TestDb) {
    let pool_size = Config::default().db_pool_size;
    let (s, metrics_port) = spawn(config(&db)).await;
    assert_eq!(metrics_port, None, "served on the main port");
    let scrape_url = s.url("/metrics");
    let health = [("route", "/health"), ("method", "GET"), ("status", "200")];
    let unmatched = [("route", "unmatched"), ("method", "GET"), ("status", "404")];
    let refused = [
        ("route", "/api/v1/tasks/status/{task_id}"),
        ("method", "GET"),
        ("status", "401"),
    ];
    let before = Scrape::of(&s.client, &scrape_url).await;
    for _ in 0..3 {
        let r = s.client.get(s.url("/health")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    for path in ["/no/such/page", "/another/unknown/path"] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
    let r = s
        .client
        .get(s.url("/api/v1/tasks/status/some-task"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let after = Scrape::of(&s.client, &scrape_url).await;

    assert!(after.count(REQUESTS, &health) >= before.count(REQUESTS, &health) + 3.0);
    // Unknown paths share one series: their paths are not labels.
    assert!(after.count(REQUESTS, &unmatched) >= before.count(REQUESTS, &unmatched) + 2.0);
    assert!(!after.0.contains("/no/such/page"), "{}", after.0);
    assert!(after.count(REQUESTS, &refused) >= before.count(REQUESTS, &refused) + 1.0);
    // The scrape itself is a request like another.
    let scrapes = [("route", "/metrics"), ("method", "GET"), ("status", "200")];
    assert!(after.count(REQUESTS, &scrapes) >= 1.0);

    let bucket = "keel_http_request_duration_seconds_bucket";
    let fastest = after.value(bucket, &[health[0], health[1], health[2], ("le", "0.001")]);
    let all = after.value(bucket, &[health[0], health[1], health[2], ("le", "+Inf")]);
    let samples = after.value("keel_http_request_duration_seconds_count", &health);
    assert!(fastest.is_some(), "{}", after.0);
    assert!(all >= Some(3.0) && all == samples, "{}", after.0);

    let max = after.value("keel_db_pool_connections_max", &[]);
    assert_eq!(max, Some(pool_size as f64), "{}", after.0);
    for gauge in [
        "keel_db_pool_connections_in_use",
        "keel_db_pool_connections_idle",
        "keel_db_pool_waiting",
    ] {
        let value = after.value(gauge, &[]);
        assert!(value.is_some_and(|v| v >= 0.0), "{gauge}: {}", after.0);
    }
    // Help text comes with the metrics.
    assert!(after.0.contains("# TYPE keel_http_requests_total counter"));
    assert!(after.0.contains("# HELP keel_http_requests_total "));
}

/// Polls a task's result until it is finished (bounded).
async fn finished(s: &TestServer, token: &str, id: &str) -> Value {
    for _ in 0..400 {
        let r = s
            .client
            .get(s.url(&format!("/api/v1/tasks/result/{id}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::OK {
            return r.json().await.unwrap();
        }
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_outcomes_and_queue_depths_are_measured() {
    let db = TestDb::sqlite().await;
    let (s, _) = spawn(config(&db)).await;
    let token = sign_up(&s.client, &s.base_url, "tasks@example.com").await;
    let scrape_url = s.url("/metrics");
    let outcome = |o| [("queue", "load_test"), ("outcome", o)];
    let before = Scrape::of(&s.client, &scrape_url).await;
    let mut ids = Vec::new();
    for body in [
        json!({"task_name": "io_simulation_task", "queue_type": "load_test"}),
        // Fails every attempt: retried once, then failed (two tries).
        json!({"task_name": "failure_testing_task", "queue_type": "load_test",
               "kwargs": {"failure_rate": 1.0}}),
    ] {
        let r = s
            .client
            .post(s.url("/api/v1/tasks/enqueue"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let queued: Value = r.json().await.unwrap();
        ids.push(queued["task_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(finished(&s, &token, &ids[0]).await["status"], "completed");
    assert_eq!(finished(&s, &token, &ids[1]).await["status"], "failed");
    let after = Scrape::of(&s.client, &scrape_url).await;
    for (name, moved) in [("succeeded", 1.0), ("retried", 1.0), ("failed", 1.0)] {
        let labels = outcome(name);
        assert!(
            after.count(JOBS, &labels) >= before.count(JOBS, &labels) + moved,
            "{name}: {}",
            after.0
        );
    }
    // Depths are sampled at each scrape, for every queue.
    for queue in ["load_test", "system"] {
        for state in ["queued", "scheduled", "in_progress"] {
            let depth = after.value(
                "keel_task_queue_depth",
                &[("queue", queue), ("state", state)],
            );
            assert!(depth.is_some(), "{queue} {state}: {}", after.0);
        }
    }
}

/// Comms against the simulator (SMS against a port nobody listens on), AI against the simulator.
fn provider_config(db: &TestDb, sim: &SimHandle, closed: &str) -> TestConfig {
    let comms = comms_core::CommsConfig {
        resend_api_key: Some(sim.config().resend_api_key.clone()),
        resend_from_email: Some("Keel <noreply@example.com>".into()),
        resend_api_base: sim.base_url().to_owned(),
        twilio_account_sid: Some(sim.config().twilio_account_sid.clone()),
        twilio_auth_token: Some(sim.config().twilio_auth_token.clone()),
        twilio_phone_number: Some("+15005550006".into()),
        twilio_api_base: closed.to_owned(),
        timeout: Duration::from_secs(5),
        ..comms_core::CommsConfig::default()
    };
    let mut ai = ai_core::AiConfig {
        provider: ai_core::config::provider("openai").unwrap(),
        timeout: Duration::from_secs(10),
        ..ai_core::AiConfig::default()
    };
    ai.api_keys.insert("openai", "sk-test".into());
    ai.base_urls
        .insert("openai", format!("{}/openai/v1", sim.base_url()));
    config(db).set(comms).set(ai)
}

/// A URL on 127.0.0.1 where nothing listens (a port bound, then released).
fn closed_url() -> String {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Reads a streamed answer until its text contains `needle` (bounded).
async fn read_until(response: &mut reqwest::Response, needle: &str) -> String {
    let mut text = String::new();
    let read = async {
        while !text.contains(needle) {
            match response.chunk().await.unwrap() {
                Some(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
                None => break,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the stream answers");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_calls_and_open_ai_streams_are_measured() {
    let db = TestDb::sqlite().await;
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let (s, _) = spawn(provider_config(&db, &sim, &closed_url())).await;
    let token = sign_up(&s.client, &s.base_url, "providers@example.com").await;
    let scrape_url = s.url("/metrics");
    let call = |provider, outcome| [("provider", provider), ("outcome", outcome)];
    let before = Scrape::of(&s.client, &scrape_url).await;

    let r = s
        .client
        .post(s.url("/api/v1/comms/email/send"))
        .bearer_auth(&token)
        .json(&json!({"to": ["a@example.com"], "subject": "Hi", "text": "Hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = s
        .client
        .post(s.url("/api/v1/comms/sms/send"))
        .bearer_auth(&token)
        .json(&json!({"to": "+15005550010", "body": "Hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);

    // A slow stream: open while its chunks come, closed when the client leaves.
    sim.set_chunk_delay(Duration::from_millis(100));
    let mut slow = s
        .client
        .post(s.url("/ai/chat/stream"))
        .json(&json!({"message": "one two three four five six seven eight nine ten"}))
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status(), StatusCode::OK);
    read_until(&mut slow, "event: chunk").await;
    let during = Scrape::of(&s.client, &scrape_url).await;
    assert_eq!(
        during.value("keel_ai_open_streams", &[]),
        Some(1.0),
        "{}",
        during.0
    );
    drop(slow);
    let mut closed = false;
    for _ in 0..300 {
        let now = Scrape::of(&s.client, &scrape_url).await;
        if now.value("keel_ai_open_streams", &[]) == Some(0.0) {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        closed,
        "a client that left no longer counts as an open stream"
    );

    sim.set_chunk_delay(Duration::ZERO);
    let mut whole = s
        .client
        .post(s.url("/ai/chat/stream"))
        .json(&json!({"message": "hello there"}))
        .send()
        .await
        .unwrap();
    let text = read_until(&mut whole, "event: complete").await;
    assert!(text.contains("event: final"), "{text}");

    let after = Scrape::of(&s.client, &scrape_url).await;
    for (provider, outcome) in [
        ("resend", "ok"),
        ("twilio", "unreachable"),
        ("openai", "cancelled"),
        ("openai", "ok"),
    ] {
        let labels = call(provider, outcome);
        assert!(
            after.count(CALLS, &labels) >= before.count(CALLS, &labels) + 1.0,
            "{provider} {outcome}: {}",
            after.0
        );
    }
    assert_eq!(after.value("keel_ai_open_streams", &[]), Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_addr_serves_metrics_on_its_own_port() {
    let db = TestDb::sqlite().await;
    let (s, metrics_port) =
        spawn(config(&db).with(|c| c.metrics_addr = Some("127.0.0.1:0".to_owned()))).await;
    let port = metrics_port.expect("a metrics server of its own");
    assert_ne!(s.url("/"), format!("http://127.0.0.1:{port}/"));
    let r = s.client.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"], "Not Found");

    let r = s.client.get(s.url("/health/live")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let scrape = Scrape::of(&s.client, &format!("http://127.0.0.1:{port}/metrics")).await;
    let live = [
        ("route", "/health/live"),
        ("method", "GET"),
        ("status", "200"),
    ];
    assert!(scrape.count(REQUESTS, &live) >= 1.0, "{}", scrape.0);
    assert!(scrape.value("keel_db_pool_connections_max", &[]).is_some());

    let r = s
        .client
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "only /metrics is served there"
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"], "Not Found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_off_by_default() {
    let db = TestDb::sqlite().await;
    let defaults = Config::default();
    assert!(!defaults.metrics_enabled);
    assert_eq!(defaults.metrics_addr, None);
    let (s, metrics_port) = spawn(config(&db).with(|c| {
        c.metrics_enabled = false;
        // Ignored while metrics are off.
        c.metrics_addr = Some("127.0.0.1:0".to_owned());
    }))
    .await;
    assert_eq!(metrics_port, None);
    let r = s.client.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"], "Not Found");
}
