//! Two `keel serve` and two `keel worker` processes on one PostgreSQL database and one Redis, as a
//! deployment with several instances runs. See docs/testing.md ("Fault and multi-process tests").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel::testing::{PASSWORD, login, register};
use keel_tests::keel_bin;
use keel_tests::support::{Keel, client, eventually};
use kernel::testing::TestDb;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The Redis database this test uses alone on the shared server (emptied with FLUSHDB, never
/// FLUSHALL).
const REDIS_DB: i64 = 13;
const SECRET: &str = "two-instances-secret-two-instances-secret";

/// Empties this test's Redis database.
async fn flush_redis_db(url: &str) {
    let pool = kernel::redis::SharedRedis::new(url, Some(REDIS_DB))
        .answering()
        .await
        .expect("TEST_REDIS_URL answers");
    let mut conn = pool.get().await.unwrap();
    deadpool_redis::redis::cmd("FLUSHDB")
        .query_async::<()>(&mut *conn)
        .await
        .unwrap();
}

/// Every migration version of the workspace's PostgreSQL tree.
fn migration_count() -> i64 {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/postgres");
    let mut count = 0;
    for module in std::fs::read_dir(root).unwrap() {
        count += std::fs::read_dir(module.unwrap().path()).unwrap().count();
    }
    i64::try_from(count).unwrap()
}

/// `(rows, distinct versions)` of diesel's migrations table.
async fn migrations_applied(db_url: &str) -> (i64, i64) {
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    let mut conn = AsyncPgConnection::establish(db_url).await.unwrap();
    diesel::select((
        diesel::dsl::sql::<BigInt>("(SELECT count(*) FROM __diesel_schema_migrations)"),
        diesel::dsl::sql::<BigInt>(
            "(SELECT count(DISTINCT version) FROM __diesel_schema_migrations)",
        ),
    ))
    .get_result(&mut conn)
    .await
    .unwrap()
}

/// Waits, when the current hour is about to end, until it has: the auth rate limits count in
/// fixed one-hour windows, and the check below must stay inside one.
async fn stay_inside_one_rate_limit_window() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let left = 3600 - now % 3600;
    if left < 20 {
        tokio::time::sleep(Duration::from_secs(left + 1)).await;
    }
}

/// Two servers (no embedded worker) and two workers (one of them running two processes) on one
/// scratch PostgreSQL database and one Redis database, with rate limits on and the AI
/// conversations in the database:
/// - both servers started at the same instant on the empty database come up, and every migration
///   ran exactly once;
/// - the register limit (5 per IP and hour) is counted across both servers;
/// - a token issued by one server works on the other;
/// - a user deactivated through one server is refused by the other within a second (read cache
///   on, the user cached there before);
/// - tasks enqueued on one server are run by the workers and read as completed on the other;
/// - an AI conversation started on one server is read and continued on the other;
/// - SIGTERM stops the workers cleanly, and no process logged a panic or a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_and_two_workers_share_one_database_and_one_redis() {
    let (Some(db), Ok(redis_url)) = (TestDb::postgres().await, std::env::var("TEST_REDIS_URL"))
    else {
        eprintln!(
            "TEST_DATABASE_URL and TEST_REDIS_URL are both needed: two-instance test skipped"
        );
        return;
    };
    flush_redis_db(&redis_url).await;
    let sim = provider_sim::ProviderSim::start(provider_sim::SimConfig::default()).unwrap();
    let deployment = |keel: Keel| {
        keel.envs(sim.settings())
            .env("DATABASE_URL", &db.url)
            .env("SECRET_KEY", SECRET)
            .env("TASKS_BACKEND", "redis")
            .env("REDIS_URL", &redis_url)
            .env("REDIS_DB", REDIS_DB)
            .env("WORKER_EMBEDDED", "false")
            .env("AUTH_RATE_LIMIT", "true")
            .env("AI_PROVIDER", "openai")
            .env("AI_CONVERSATION_STORE", "database")
    };

    // Both servers at the same instant on an empty database.
    let a = deployment(Keel::serve(keel_bin!()))
        .named("serve a")
        .spawn();
    let b = deployment(Keel::serve(keel_bin!()))
        .named("serve b")
        .spawn();
    let (a, b) = tokio::join!(a.ready(), b.ready());
    let expected = migration_count();
    assert!(expected > 0);
    assert_eq!(
        migrations_applied(&db.url).await,
        (expected, expected),
        "every migration applied once"
    );
    let mut workers = vec![
        deployment(Keel::worker(keel_bin!()))
            .named("worker 1")
            .spawn(),
        deployment(Keel::worker(keel_bin!()))
            .env("WORKER_PROCESSES", 2)
            .named("worker 2 (two processes)")
            .spawn(),
    ];
    for worker in &mut workers {
        worker.wait_for_log("worker started").await;
    }
    let http = client(Duration::from_secs(30));
    let (base_a, base_b) = (a.url(""), b.url(""));

    // Register: five attempts per IP and hour across both servers, then 429 on either.
    stay_inside_one_rate_limit_window().await;
    assert_eq!(
        register(&http, &base_a, "user@example.com", PASSWORD).await,
        StatusCode::CREATED
    );
    for (i, base) in [&base_b, &base_a, &base_b, &base_a].into_iter().enumerate() {
        let email = format!("extra{i}@example.com");
        assert_eq!(
            register(&http, base, &email, PASSWORD).await,
            StatusCode::CREATED,
            "attempt {} of 5",
            i + 2
        );
    }
    for base in [&base_b, &base_a] {
        let r = http
            .post(format!("{base}/api/v1/auth/register"))
            .json(&json!({"email": "late@example.com", "password": PASSWORD}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{base}");
        assert!(r.headers().contains_key("retry-after"));
    }

    // A token from one server works on the other.
    let token = login(&http, &base_a, "user@example.com", PASSWORD).await;
    let me = |base: &str| {
        http.get(format!("{base}/api/v1/auth/me"))
            .bearer_auth(&token)
            .send()
    };
    let user: Value = me(&base_b).await.unwrap().json().await.unwrap();
    assert_eq!(user["email"], "user@example.com", "{user}");

    // Deactivated through one server, refused by the other within a second.
    let (ok, out) = deployment(Keel::new(
        keel_bin!(),
        &[
            "users",
            "create",
            "--email",
            "admin@example.com",
            "--role",
            "admin",
        ],
    ))
    .env("KEEL_USER_PASSWORD", PASSWORD)
    .env("RUST_LOG", "warn")
    .run()
    .await;
    assert!(ok, "{out}");
    let admin = login(&http, &base_b, "admin@example.com", PASSWORD).await;
    let r = http
        .patch(format!("{base_a}/api/v1/auth/users/{}", user["id"]))
        .bearer_auth(&admin)
        .json(&json!({"is_active": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        me(&base_a).await.unwrap().status(),
        StatusCode::UNAUTHORIZED,
        "at once on the server that made the change"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let r = me(&base_b).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "within a second");
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "Inactive user");

    // Tasks enqueued on one server, run by the workers, read on the other.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (on, read_on) = if i % 2 == 0 {
            (&base_a, &base_b)
        } else {
            (&base_b, &base_a)
        };
        let r = http
            .post(format!("{on}/api/v1/tasks/enqueue"))
            .bearer_auth(&admin)
            .json(&json!({"task_name": "io_simulation_task", "kwargs": {"latency_scale": 20}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        tasks.push((body["task_id"].as_str().unwrap().to_owned(), read_on));
    }
    for (id, read_on) in &tasks {
        let done = eventually(
            &format!("task {id} completes"),
            Duration::from_secs(30),
            || async {
                let r = http
                    .get(format!("{read_on}/api/v1/tasks/result/{id}"))
                    .bearer_auth(&admin)
                    .send()
                    .await
                    .ok()?;
                if r.status() != StatusCode::OK {
                    return None;
                }
                r.json::<Value>().await.ok()
            },
        )
        .await;
        assert_eq!(done["status"], "completed", "{done}");
    }

    // An AI conversation started on one server, read and continued on the other.
    let chat = |base: &str, body: Value| {
        http.post(format!("{base}/ai/chat"))
            .bearer_auth(&admin)
            .json(&body)
            .send()
    };
    let first: Value = chat(&base_a, json!({"message": "Hello from a"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conversation = first["conversation_id"].as_str().unwrap().to_owned();
    let read = |base: &str| {
        let url = format!("{base}/ai/conversations/{conversation}");
        let request = http.get(url).bearer_auth(&admin);
        async move {
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            r.json::<Value>().await.unwrap()
        }
    };
    let seen = read(&base_b).await;
    assert_eq!(seen["messages"].as_array().map(Vec::len), Some(2), "{seen}");
    let r = chat(
        &base_b,
        json!({"message": "Hello from b", "conversation_id": conversation}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let seen = read(&base_a).await;
    assert_eq!(seen["messages"].as_array().map(Vec::len), Some(4), "{seen}");

    for worker in &mut workers {
        worker.sigterm();
        let status = worker
            .wait_exit(Duration::from_secs(30))
            .await
            .unwrap_or_else(|| panic!("{} stops on SIGTERM", worker.name()));
        assert!(status.success(), "{}: {status}", worker.name());
    }
    for process in workers.iter().chain([&a, &b]) {
        assert_eq!(
            process.failures_in_log(),
            Vec::<String>::new(),
            "{}",
            process.name()
        );
    }
    flush_redis_db(&redis_url).await;
}
