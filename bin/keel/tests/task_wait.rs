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
