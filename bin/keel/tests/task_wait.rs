//! `GET /api/v1/tasks/result/{id}?wait=` through the composed server: answered when the
//! embedded worker finishes the job, and given up when the client closes its side of the
//! connection (the server's connection hook records it for the handler).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keel::testing::{TestConfig, sign_up};
use kernel::testing::TestDb;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_waits_for_its_job_and_a_client_that_leaves_ends_the_wait() {
    let db = TestDb::sqlite().await;
    let s = TestConfig::new(&db).spawn().await;
    let token = sign_up(&s.client, &s.base_url, "waiter@example.com").await;
    let enqueue = |body: Value| {
        let request = s
            .client
            .post(s.url("/api/v1/tasks/enqueue"))
            .bearer_auth(&token)
            .json(&body)
            .send();
        async move {
            let body: Value = request.await.unwrap().json().await.unwrap();
            body["task_id"].as_str().unwrap().to_owned()
        }
    };

    // One request: the answer is the finished job.
    let id = enqueue(json!({"task_name": "system_health_check"})).await;
    let answer = s
        .client
        .get(s.url(&format!("/api/v1/tasks/result/{id}?wait=30")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.json::<Value>().await.unwrap()["status"], "completed");

    // A job that waits a minute; the client sends its request and closes its side.
    let id = enqueue(json!({"task_name": "system_health_check", "delay_seconds": 60})).await;
    let port = s.base_url.rsplit(':').next().unwrap();
    let mut socket = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    let request = format!(
        "GET /api/v1/tasks/result/{id}?wait=30 HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {token}\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    socket.shutdown().await.unwrap();
    // The server stops waiting at once (well before the 30 s) and says so.
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer))
        .await
        .expect("the wait outlived its client")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
}

/// Open descriptors of this process (the test and the server it runs).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// How many descriptors `count` kept-alive connections with one answered request each add.
async fn descriptors_per_connection(modules: &[&'static str]) -> f64 {
    const COUNT: usize = 40;
    let db = TestDb::sqlite().await;
    let s = TestConfig::new(&db).modules(modules).spawn().await;
    let port = s.base_url.rsplit(':').next().unwrap().to_owned();
    let before = open_fds();
    let mut sockets = Vec::new();
    for _ in 0..COUNT {
        let mut socket = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        // Answered: the server has accepted the connection and run its hook.
        socket
            .write_all(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        socket.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        sockets.push(socket);
    }
    let added = open_fds() - before;
    drop(sockets);
    added as f64 / COUNT as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_duplicated_only_for_a_module_that_watches_its_clients() {
    // The client's socket and the server's; with the tasks module, the duplicate as well.
    let without = descriptors_per_connection(&["auth", "blog"]).await;
    assert!(
        (1.9..2.5).contains(&without),
        "{without} descriptors a connection"
    );
    let with = descriptors_per_connection(&["auth", "tasks"]).await;
    assert!(
        (2.9..3.5).contains(&with),
        "{with} descriptors a connection"
    );
}
