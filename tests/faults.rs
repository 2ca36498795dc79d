//! Faults under real `keel` processes: PostgreSQL connections killed under load, Redis killed and
//! restarted, providers that hang, clients that leave mid-stream and mid-upload, SIGTERM under
//! load. See docs/testing.md ("Fault and multi-process tests").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keel::testing::sign_up;
use keel_tests::keel_bin;
use keel_tests::support::{Hang, Keel, client};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Every provider of every module pointed at a listener that accepts and never answers, with
/// one-second timeouts: each call ends with its module's 502 (an AI stream with its `error`
/// event), well before the client's own bound, and the server stays healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_providers_answer_502_within_their_timeouts() {
    let hang = Hang::start().await;
    let keel = Keel::serve(keel_bin!())
        .env("COMMS_TIMEOUT_SECONDS", 1)
        .env("PAYMENT_TIMEOUT_SECONDS", 1)
        .env("AI_TIMEOUT_SECONDS", 1)
        .env("RESEND_API_KEY", "re_hang")
        .env("RESEND_FROM_EMAIL", "noreply@example.com")
        .env("RESEND_API_BASE", hang.url())
        .env("TWILIO_ACCOUNT_SID", "AC00000000000000000000000000000001")
        .env("TWILIO_AUTH_TOKEN", "0123456789abcdef0123456789abcdef")
        .env("TWILIO_PHONE_NUMBER", "+15005550006")
        .env("TWILIO_API_BASE", hang.url())
        .env("STRIPE_SECRET_KEY", "sk_test_hang")
        .env("STRIPE_API_BASE", hang.url())
        .env("AI_PROVIDER", "openai")
        .env("OPENAI_API_KEY", "sk-hang")
        .env("OPENAI_BASE_URL", format!("{}/v1", hang.url()))
        .spawn()
        .ready()
        .await;
    // The bound no call may reach: far above the one-second timeouts.
    let http = client(Duration::from_secs(20));
    let base = keel.url("");
    let token = sign_up(&http, &base, "hang@example.com").await;
    let calls: Vec<(&str, &str, Value)> = vec![
        (
            "/api/v1/comms/email/send",
            "Email provider error",
            json!({"to": "a@example.com", "subject": "Hi", "text": "Hello"}),
        ),
        (
            "/api/v1/comms/sms/send",
            "SMS provider error",
            json!({"to": "+15005550010", "body": "Hello"}),
        ),
        (
            "/api/v1/comms/call/make",
            "Voice provider error",
            json!({"to": "+15005550010", "twiml_url": "https://example.com/twiml"}),
        ),
        (
            "/api/v1/payment/checkout",
            "",
            json!({"price_id": "price_one_time", "mode": "payment"}),
        ),
        ("/ai/chat", "AI provider error", json!({"message": "Hello"})),
    ];
    let answers = futures_util::future::join_all(calls.iter().map(|(path, _, body)| {
        http.post(keel.url(path))
            .bearer_auth(&token)
            .json(body)
            .send()
    }))
    .await;
    for ((path, detail, _), answer) in calls.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|e| panic!("{path}: no answer within the bound: {e}"));
        assert_eq!(answer.status(), StatusCode::BAD_GATEWAY, "{path}");
        let body: Value = answer.json().await.unwrap();
        let text = body["detail"].as_str().unwrap_or_default();
        assert!(text.starts_with(detail), "{path}: {body}");
    }
    // A stream has started (200) before the provider is called: it ends with one error event.
    let stream = http
        .post(keel.url("/ai/chat/stream"))
        .bearer_auth(&token)
        .json(&json!({"message": "Hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let events = keel_tests::support::read_events(stream).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["connect", "error"], "{events:?}");
    assert!(events[1].1.contains("AI provider error"), "{events:?}");
    assert!(
        hang.accepted() >= 5,
        "the calls reached the hanging provider"
    );
    let health = http.get(keel.url("/health/ready")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(keel.failures_in_log(), Vec::<String>::new());
}

/// `SELECT pg_terminate_backend(...)` on every other connection to the test's database.
async fn terminate_backends(db_url: &str) {
    use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
    let mut admin = AsyncPgConnection::establish(db_url).await.unwrap();
    admin
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .await
        .unwrap();
}

/// PostgreSQL connections killed (`pg_terminate_backend`) again and again while reads and writes
/// run: every request ends well within the client's bound (waiting for a connection is bounded by
/// `DATABASE_TIMEOUT_SECONDS`), none answers 500 (a lost connection
/// is a 503 with `Retry-After`), and once the killing stops every request succeeds again, without
/// a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_database_connections_answer_503_and_the_server_recovers() {
    let Some(db) = kernel::testing::TestDb::postgres().await else {
        eprintln!("TEST_DATABASE_URL is not set: PostgreSQL fault test skipped");
        return;
    };
    let keel = Keel::serve(keel_bin!())
        .env("DATABASE_URL", &db.url)
        .env("DATABASE_POOL_SIZE", 4)
        // The configured bound on waiting for a connection, far below the client's.
        .env("DATABASE_TIMEOUT_SECONDS", 2)
        // Every read goes to the database.
        .env("READ_CACHE", "off")
        .spawn()
        .ready()
        .await;
    let bound = Duration::from_secs(30);
    let http = client(bound);
    let base = keel.url("");
    let token = sign_up(&http, &base, "pg@example.com").await;
    let request = |i: usize| {
        let r = match i % 3 {
            0 => http.get(keel.url("/api/v1/auth/me")),
            1 => http.get(keel.url("/api/v1/blog/posts?page_size=5")),
            _ => http
                .post(keel.url("/api/v1/blog/posts"))
                .json(&json!({"title": format!("Post {i}"), "content": "Body"})),
        };
        r.bearer_auth(&token).send()
    };
    let mut unavailable = 0;
    for round in 0..6 {
        let killer = async {
            for _ in 0..3 {
                terminate_backends(&db.url).await;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        };
        let (answers, ()) = tokio::join!(
            futures_util::future::join_all((round * 24..(round + 1) * 24).map(request)),
            killer
        );
        for answer in answers {
            let answer = answer.unwrap_or_else(|e| panic!("round {round}: no answer: {e}"));
            let status = answer.status();
            if status == StatusCode::SERVICE_UNAVAILABLE {
                unavailable += 1;
                assert!(
                    answer.headers().contains_key("retry-after"),
                    "round {round}"
                );
                let body: Value = answer.json().await.unwrap();
                let detail = body["detail"].as_str().unwrap_or_default();
                assert!(detail.contains("temporarily unavailable"), "{body}");
            } else {
                assert!(status.is_success(), "round {round}: {status}");
            }
        }
    }
    assert!(unavailable > 0, "no request met a killed connection");
    // Recovered, without a restart: every request succeeds.
    for i in 0..12 {
        let status = request(1000 + i).await.unwrap().status();
        assert!(status.is_success(), "after the kills: {status}");
    }
    let ready = http.get(keel.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(keel.failures_in_log(), Vec::<String>::new());
}

/// Enqueues an `io_simulation_task` of about `ms` milliseconds; the answer.
async fn enqueue(
    http: &reqwest::Client,
    base: &str,
    ms: u32,
) -> reqwest::Result<reqwest::Response> {
    http.post(format!("{base}/api/v1/tasks/enqueue"))
        .json(&json!({"task_name": "io_simulation_task", "kwargs": {"latency_scale": ms}}))
        .send()
        .await
}

/// A task's status body (`GET /api/v1/tasks/status/{id}`), when the queue answers.
async fn task_status(http: &reqwest::Client, base: &str, id: &str) -> Option<Value> {
    let r = http
        .get(format!("{base}/api/v1/tasks/status/{id}"))
        .send()
        .await
        .ok()?;
    if r.status() != StatusCode::OK {
        return None;
    }
    r.json().await.ok()
}

/// Redis of the test's own (append-only, fsync on every write) killed with SIGKILL and restarted
/// on the same port, under `keel serve` and a `keel worker`: while it is down enqueue answers 503
/// `Task queue unavailable` within the bound; once it is back enqueue works again without a
/// restart, the worker resumes, and every job that was accepted (200) runs to completion, the one
/// running during the kill included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_loses_no_accepted_job() {
    if std::env::var_os("TEST_REDIS_URL").is_none() {
        eprintln!("TEST_REDIS_URL is not set: Redis fault test skipped");
        return;
    }
    let mut redis = keel_tests::support::RedisServer::start()
        .await
        .expect("redis-server on the PATH (the Redis tests run: TEST_REDIS_URL is set)");
    let queue = |keel: Keel| {
        keel.env("KEEL_MODULES", "tasks")
            .env("TASKS_BACKEND", "redis")
            .env("REDIS_URL", redis.url())
            .env("WORKER_VISIBILITY_TIMEOUT_SECONDS", 2)
            .env("WORKER_RETRY_BACKOFF_SECONDS", "0.2")
    };
    let server = queue(Keel::serve(keel_bin!()))
        .env("WORKER_EMBEDDED", "false")
        .spawn()
        .ready()
        .await;
    let mut worker = queue(Keel::worker(keel_bin!())).spawn();
    worker.wait_for_log("worker started").await;
    let http = client(Duration::from_secs(20));
    let base = server.url("");
    let mut accepted = Vec::new();
    let mut accept = |body: Value| {
        accepted.push(body["task_id"].as_str().unwrap().to_owned());
        accepted.last().cloned().unwrap()
    };
    // One job running while Redis dies, a few done before.
    let long = enqueue(&http, &base, 1500).await.unwrap();
    assert_eq!(long.status(), StatusCode::OK);
    let long = accept(long.json().await.unwrap());
    for _ in 0..4 {
        let r = enqueue(&http, &base, 10).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        accept(r.json().await.unwrap());
    }
    keel_tests::support::eventually("the long job starts", Duration::from_secs(20), || async {
        task_status(&http, &base, &long)
            .await
            .filter(|s| s["status"] == "in_progress")
    })
    .await;

    redis.kill();
    for _ in 0..3 {
        let r = enqueue(&http, &base, 10)
            .await
            .expect("enqueue answers while Redis is down");
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body: Value = r.json().await.unwrap();
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with("Task queue unavailable"), "{body}");
    }
    let ready = http.get(server.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let status = http
        .get(server.url(&format!("/api/v1/tasks/status/{long}")))
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), StatusCode::SERVICE_UNAVAILABLE);

    redis.restart().await;
    for _ in 0..4 {
        let r = enqueue(&http, &base, 10).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "enqueue after Redis is back");
        accept(r.json().await.unwrap());
    }
    for id in &accepted {
        let done = keel_tests::support::eventually(
            &format!("job {id} finishes"),
            Duration::from_secs(30),
            || async {
                task_status(&http, &base, id)
                    .await
                    .filter(|s| s["status"] == "completed" || s["status"] == "failed")
            },
        )
        .await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    assert!(
        worker.logs().contains("task queue reachable again"),
        "the worker saw Redis go and come back: {}",
        worker.logs()
    );
    for process in [&server, &worker] {
        assert_eq!(process.failures_in_log(), Vec::<String>::new());
    }
}

/// A client that leaves in the middle of an AI stream, and clients that cut blog imports half
/// way: the server stays healthy with no panic in its log, nothing half-written is kept (no
/// conversation from the cut stream, no post from a cut upload), the import slots and the pool
/// serve the next requests, and the same stream and upload sent whole are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_leave_mid_stream_or_mid_upload_leave_nothing_behind() {
    let sim = provider_sim::ProviderSim::start(provider_sim::SimConfig {
        chunk_delay: Duration::from_millis(100),
        ..Default::default()
    })
    .unwrap();
    let keel = Keel::serve(keel_bin!())
        .envs(sim.settings())
        .env("AI_PROVIDER", "openai")
        .env("AI_CONVERSATION_STORE", "database")
        .env("BLOG_IMPORT_CONCURRENCY", 2)
        .spawn()
        .ready()
        .await;
    let http = client(Duration::from_secs(30));
    let base = keel.url("");
    let token = sign_up(&http, &base, "leaver@example.com").await;
    let conversations = || async {
        let r = http
            .get(keel.url("/ai/conversations"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        body.as_array()
            .or_else(|| body["conversations"].as_array())
            .map(Vec::len)
            .unwrap_or_else(|| panic!("a list of conversations: {body}"))
    };
    // Twenty words at 100 ms each: a two-second stream.
    let message = (1..=20)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let stream = || {
        http.post(keel.url("/ai/chat/stream"))
            .bearer_auth(&token)
            .json(&json!({"message": message}))
            .send()
    };

    // Mid-stream: read until the first chunk, then hang up.
    let mut cut = stream().await.unwrap();
    assert_eq!(cut.status(), StatusCode::OK);
    let mut seen = String::new();
    while !seen.contains("event: chunk") {
        let chunk = cut.chunk().await.unwrap().expect("the stream goes on");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(cut);

    // Mid-upload: a JSON import of 200 posts, its connection closed half way, more times than
    // there are import slots.
    let posts: Vec<Value> = (0..200)
        .map(|i| {
            json!({"title": format!("Imported {i}"), "slug": format!("imported-{i}"),
                   "content": "x".repeat(4000), "status": "published"})
        })
        .collect();
    let boundary = "keel-fault-boundary";
    let mut upload = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"posts.json\"\r\n\
         Content-Type: application/json\r\n\r\n"
    )
    .into_bytes();
    upload.extend(serde_json::to_vec(&posts).unwrap());
    upload.extend(format!("\r\n--{boundary}--\r\n").into_bytes());
    for _ in 0..3 {
        use tokio::io::AsyncWriteExt;
        let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", keel.port()))
            .await
            .unwrap();
        let head = format!(
            "POST /api/v1/blog/import HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Authorization: Bearer {token}\r\n\
             Content-Type: multipart/form-data; boundary={boundary}\r\n\
             Content-Length: {}\r\n\r\n",
            upload.len()
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(&upload[..upload.len() / 2]).await.unwrap();
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(socket);
    }

    // Past the end the cut stream would have had: nothing was stored.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(conversations().await, 0, "the cut stream stored nothing");
    let public = || async {
        let body: Value = http
            .get(keel.url("/api/v1/blog/posts"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["total"].as_i64().unwrap()
    };
    assert_eq!(public().await, 0, "no post from a cut upload");

    // The same upload whole: imported, every post (the slots were given back).
    let r = http
        .post(keel.url("/api/v1/blog/import"))
        .bearer_auth(&token)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(upload)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let result: Value = r.json().await.unwrap();
    assert_eq!(result["created"], 200, "{result}");
    assert_eq!(public().await, 200);
    // The same stream read to its end is stored.
    let events = keel_tests::support::read_events(stream().await.unwrap()).await;
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("complete"));
    assert_eq!(conversations().await, 1);
    let ready = http.get(keel.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(keel.failures_in_log(), Vec::<String>::new());
}

/// SIGTERM while requests and jobs run: the requests in flight (an AI stream, an email send to a
/// slow provider, plain reads) complete with 200; the embedded worker's job that ends within
/// `WORKER_SHUTDOWN_TIMEOUT_SECONDS` completes, the one that does not goes back to the queue (its
/// attempt not counted) and another worker runs it; the process exits cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_requests_in_flight_finish_and_hands_jobs_back() {
    if std::env::var_os("TEST_REDIS_URL").is_none() {
        eprintln!("TEST_REDIS_URL is not set: SIGTERM test with Redis skipped");
        return;
    }
    let redis = keel_tests::support::RedisServer::start()
        .await
        .expect("redis-server on the PATH (the Redis tests run: TEST_REDIS_URL is set)");
    let sim = provider_sim::ProviderSim::start(provider_sim::SimConfig {
        chunk_delay: Duration::from_millis(100),
        ..Default::default()
    })
    .unwrap();
    let mut keel = Keel::serve(keel_bin!())
        .envs(sim.settings())
        .env("AI_PROVIDER", "openai")
        .env("TASKS_BACKEND", "redis")
        .env("REDIS_URL", redis.url())
        .env("SHUTDOWN_TIMEOUT_SECONDS", 20)
        .env("WORKER_SHUTDOWN_TIMEOUT_SECONDS", 1)
        .spawn()
        .ready()
        .await;
    let http = client(Duration::from_secs(30));
    let base = keel.url("");
    let token = sign_up(&http, &base, "term@example.com").await;
    let enqueue = |ms: u32| {
        http.post(keel.url("/api/v1/tasks/enqueue"))
            .bearer_auth(&token)
            .json(&json!({"task_name": "io_simulation_task", "kwargs": {"latency_scale": ms}}))
            .send()
    };
    let id = |r: reqwest::Response| async move {
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        body["task_id"].as_str().unwrap().to_owned()
    };
    // About 1.5 s: done while the server drains. About 8 s: still running when the worker's
    // shutdown time is up.
    let short = id(enqueue(1500).await.unwrap()).await;
    let long = id(enqueue(8000).await.unwrap()).await;
    let status = |id: String| {
        let http = http.clone();
        let url = keel.url(&format!("/api/v1/tasks/status/{id}"));
        let token = token.clone();
        async move {
            let body: Value = http
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (body["status"] == "in_progress").then_some(())
        }
    };
    for job in [&short, &long] {
        keel_tests::support::eventually("the job starts", Duration::from_secs(20), || {
            status(job.clone())
        })
        .await;
    }

    // Requests in flight: a two-second stream, an email the provider answers after 1.5 s, reads.
    sim.push_fault(
        provider_sim::Provider::Resend,
        provider_sim::Fault::default().delay_ms(1500),
    );
    let message = (1..=20)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut stream = http
        .post(keel.url("/ai/chat/stream"))
        .bearer_auth(&token)
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut streamed = String::new();
    while !streamed.contains("event: chunk") {
        let chunk = stream.chunk().await.unwrap().expect("the stream goes on");
        streamed.push_str(&String::from_utf8_lossy(&chunk));
    }
    let email = tokio::spawn(
        http.post(keel.url("/api/v1/comms/email/send"))
            .bearer_auth(&token)
            .json(&json!({"to": "a@example.com", "subject": "Hi", "text": "Hello"}))
            .send(),
    );
    keel_tests::support::eventually(
        "the email reaches the provider",
        Duration::from_secs(10),
        // This send's own request: registration already mailed a verification link.
        || async {
            sim.journal_for(provider_sim::Provider::Resend)
                .iter()
                .any(|e| e.body.contains("\"subject\":\"Hi\""))
                .then_some(())
        },
    )
    .await;

    keel.sigterm();

    let email = email.await.unwrap().expect("the email send answers");
    assert_eq!(
        email.status(),
        StatusCode::OK,
        "the send in flight completed"
    );
    while let Some(chunk) = stream.chunk().await.expect("the stream reads to its end") {
        streamed.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events = keel_tests::support::api::parse_events(&streamed);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.last(), Some(&"complete"), "{streamed}");
    assert!(names.contains(&"final"), "{streamed}");
    let exit = keel
        .wait_exit(Duration::from_secs(40))
        .await
        .expect("keel stops after SIGTERM");
    assert!(exit.success(), "exit status {exit}: {}", keel.logs());
    assert!(
        keel.logs()
            .contains("unfinished task handed back to the queue"),
        "{}",
        keel.logs()
    );
    assert_eq!(keel.failures_in_log(), Vec::<String>::new());

    // What the queue holds now, read through another server (no worker of its own).
    let reader = Keel::serve(keel_bin!())
        .env("KEEL_MODULES", "tasks")
        .env("TASKS_BACKEND", "redis")
        .env("REDIS_URL", redis.url())
        .env("WORKER_EMBEDDED", "false")
        .spawn()
        .ready()
        .await;
    let base = reader.url("");
    let done = task_status(&http, &base, &short)
        .await
        .expect("the short job");
    assert_eq!(done["status"], "completed", "{done}");
    let back = task_status(&http, &base, &long)
        .await
        .expect("the long job");
    assert_eq!(back["status"], "queued", "{back}");
    assert_eq!(
        back["attempts"], 0,
        "the interrupted attempt is not counted: {back}"
    );
    // Another worker takes it and runs it to the end.
    let _worker = Keel::worker(keel_bin!())
        .env("KEEL_MODULES", "tasks")
        .env("TASKS_BACKEND", "redis")
        .env("REDIS_URL", redis.url())
        .spawn();
    let finished = keel_tests::support::eventually(
        "the handed-back job completes on another worker",
        Duration::from_secs(40),
        || async {
            task_status(&http, &base, &long)
                .await
                .filter(|s| s["status"] == "completed")
        },
    )
    .await;
    assert_eq!(finished["attempts"], 1, "{finished}");
}
