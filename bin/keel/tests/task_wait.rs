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

/// The connections the server on `port` has accepted and still holds (their sockets' inodes, from
/// the kernel's TCP table), and how many descriptors of this process point at them: one each, or
/// two when the server keeps a duplicate. Other tests' connections, to other ports, do not count.
fn server_side_descriptors(port: u16) -> (usize, usize) {
    let mut inodes = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // 01: established (the listening socket is 0A).
            if local_port == Some(port) && fields[3] == "01" {
                inodes.insert(format!("socket:[{}]", fields[9]));
            }
        }
    }
    let descriptors = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| inodes.contains(target.to_string_lossy().as_ref()))
        .count();
    (inodes.len(), descriptors)
}

/// The server side of `COUNT` kept-alive connections with one answered request each: how many
/// connections, and how many descriptors the server holds for them.
async fn descriptors_per_connection(modules: &[&'static str]) -> (usize, usize) {
    const COUNT: usize = 40;
    let db = TestDb::sqlite().await;
    let s = TestConfig::new(&db).modules(modules).spawn().await;
    let port: u16 = s.base_url.rsplit(':').next().unwrap().parse().unwrap();
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
    let counted = server_side_descriptors(port);
    drop(sockets);
    counted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_duplicated_only_for_a_module_that_watches_its_clients() {
    // One descriptor per accepted connection; with the tasks module, its duplicate as well.
    let (connections, descriptors) = descriptors_per_connection(&["auth", "blog"]).await;
    assert_eq!((connections, descriptors), (40, 40));
    let (connections, descriptors) = descriptors_per_connection(&["auth", "tasks"]).await;
    assert_eq!((connections, descriptors), (40, 80));
}
