//! Requests that actix-http refuses before the application runs (and URLs over the limit) are
//! answered with the `{"detail": ...}` envelope, over raw TCP against the composed server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keel::Application;
use keel::listener::MAX_URL_BYTES;
use keel::testing::{TestConfig, serve};
use kernel::testing::{TestDb, TestServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A server with no module mounted (the refusals happen before routing), on a fresh SQLite file.
async fn spawn(db: &TestDb) -> (TestServer, u16) {
    let config = TestConfig::new(db).modules(&[]).http_workers(1).build();
    let app = Application::build(config).await.expect("the server starts");
    let port = app.port();
    (serve(app), port)
}

/// One parsed response.
#[derive(Debug)]
struct Response {
    status: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{self:?}"
        );
        serde_json::from_slice(&self.body).unwrap()
    }

    fn detail(&self) -> String {
        self.json()["detail"].as_str().unwrap().to_owned()
    }
}

/// Splits `bytes` into the responses it holds (each framed by its `content-length`, which must
/// be present and exact), leaving no byte over.
fn responses(mut bytes: &[u8]) -> Vec<Response> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no complete head in {:?}", String::from_utf8_lossy(bytes)));
        let head = std::str::from_utf8(&bytes[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().to_owned();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(": ").unwrap();
                (n.to_owned(), v.to_owned())
            })
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or_else(|| panic!("no content-length in {head:?}"));
        let rest = &bytes[end + 4..];
        assert!(
            rest.len() >= length,
            "a body shorter than content-length: {head:?}"
        );
        out.push(Response {
            status,
            headers,
            body: rest[..length].to_vec(),
        });
        bytes = &rest[length..];
    }
    out
}

/// Sends `request` on a new connection and reads until the server closes it. The server may
/// close (and reset) before it has read everything, so writing happens beside reading and its
/// failure is not an error.
async fn exchange(port: u16, request: Vec<u8>) -> Vec<u8> {
    exchange_in_pieces(port, request, 1).await
}

/// The one response of a refused request.
async fn refusal(port: u16, request: Vec<u8>) -> Response {
    let bytes = exchange(port, request).await;
    let mut all = responses(&bytes);
    assert_eq!(all.len(), 1, "{all:?}");
    let response = all.remove(0);
    assert_eq!(response.header("connection"), Some("close"));
    response
}

fn get(target: &str, extra_headers: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{extra_headers}\r\n").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_get_431_with_a_detail() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let big = format!("X-Big: {}\r\n", "a".repeat(140 * 1024));
    let r = refusal(port, get("/health/live", &big)).await;
    assert_eq!(r.status, "HTTP/1.1 431 Request Header Fields Too Large");
    let detail = r.detail();
    assert!(detail.starts_with("Request headers too large"), "{detail}");
    assert!(
        detail.contains("128 KiB") && detail.contains("96 headers"),
        "{detail}"
    );

    let many: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    let r = refusal(port, get("/health/live", &many)).await;
    assert_eq!(r.status, "HTTP/1.1 431 Request Header Fields Too Large");
    assert!(r.detail().starts_with("Request headers too large"));
}

/// Sends `request` on a new connection in `pieces` writes, with a pause between them so that
/// each arrives in a read of its own, and reads until the server closes the connection.
async fn exchange_in_pieces(port: u16, request: Vec<u8>, pieces: usize) -> Vec<u8> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let size = request.len().div_ceil(pieces.max(1)).max(1);
    let writing = tokio::spawn(async move {
        for piece in request.chunks(size) {
            if writer.write_all(piece).await.is_err() || writer.flush().await.is_err() {
                break;
            }
            if pieces > 1 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        writer
    });
    let mut received = Vec::new();
    let read = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the server closes the connection");
    drop(writing.await);
    received
}

/// A GET of `/health/live` whose head is exactly `size` bytes, closing the connection after.
fn head_of(size: usize) -> Vec<u8> {
    let fixed = get("/health/live", "Connection: close\r\nX-Big: \r\n").len();
    get(
        "/health/live",
        &format!(
            "Connection: close\r\nX-Big: {}\r\n",
            "a".repeat(size - fixed)
        ),
    )
}

/// The limit holds however the head arrives: whole in one read (which actix-http itself would
/// parse and pass on) or in many (which it refuses once 128 KiB are buffered). A head of exactly
/// 128 KiB is served, one byte more is a 431, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_head_limit_holds_in_one_read_or_many() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let limit = keel::listener::MAX_HEAD_BYTES;
    for round in 0..3 {
        for pieces in [1, 8, 200] {
            for size in [limit + 1, limit + 40 * 1024, 200 * 1024] {
                let bytes = exchange_in_pieces(port, head_of(size), pieces).await;
                let all = responses(&bytes);
                assert_eq!(all.len(), 1, "{size} bytes in {pieces} pieces: {all:?}");
                assert_eq!(
                    all[0].status, "HTTP/1.1 431 Request Header Fields Too Large",
                    "{size} bytes in {pieces} pieces (round {round})"
                );
                assert!(all[0].detail().starts_with("Request headers too large"));
            }
            let bytes = exchange_in_pieces(port, head_of(limit), pieces).await;
            let all = responses(&bytes);
            assert_eq!(
                all[0].status, "HTTP/1.1 200 OK",
                "{limit} bytes in {pieces} pieces"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_400_with_a_detail() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let requests = [
        get("/health/live", "NoColonHere\r\n"),
        b"G(T /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
        b"GET /health/live HTTP/1.1\r\n\r\n".to_vec(),
    ];
    for request in requests {
        let r = refusal(port, request).await;
        assert_eq!(r.status, "HTTP/1.1 400 Bad Request");
        let detail = r.detail();
        assert!(detail.starts_with("Malformed request"), "{detail}");
    }
}

/// A head that stops arriving: actix-http answers 408 once its client request timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_get_408_with_a_detail() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let r = refusal(port, b"GET /health/live HTTP/1.1\r\nHost: loc".to_vec()).await;
    assert_eq!(r.status, "HTTP/1.1 408 Request Timeout");
    let detail = r.detail();
    assert!(
        detail.starts_with("Request timed out") && detail.contains("5 seconds"),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_urls_get_414_or_a_parser_refusal_with_a_detail() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let target = format!("/health/live?q={}", "a".repeat(10 * 1024));
    let bytes = exchange(port, get(&target, "Connection: close\r\n")).await;
    let all = responses(&bytes);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].status, "HTTP/1.1 414 URI Too Long");
    assert_eq!(
        all[0].detail(),
        format!(
            "URL too long: {} bytes (at most {MAX_URL_BYTES}); shorten the path and query string",
            target.len()
        )
    );

    // Longer than `http::Uri` takes: actix-http refuses it while parsing.
    let target = format!("/health/live?q={}", "a".repeat(70 * 1024));
    let r = refusal(port, get(&target, "")).await;
    assert!(
        r.status == "HTTP/1.1 400 Bad Request"
            || r.status == "HTTP/1.1 431 Request Header Fields Too Large",
        "{r:?}"
    );
    assert!(!r.detail().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_after_a_pipelined_request_follows_its_answer_intact() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let mut request = get("/health/live", "");
    let big = format!("X-Big: {}\r\n", "a".repeat(140 * 1024));
    request.extend_from_slice(&get("/health/live", &big));
    let bytes = exchange(port, request).await;
    let all = responses(&bytes);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0].status, "HTTP/1.1 200 OK");
    assert_eq!(all[0].json(), serde_json::json!({"status": "alive"}));
    assert_eq!(
        all[1].status,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    assert_eq!(all[1].header("connection"), Some("close"));
    assert!(all[1].detail().starts_with("Request headers too large"));

    let mut request = get("/health/live", "");
    request.extend_from_slice(b"NOT HTTP\r\n\r\n");
    let all = responses(&exchange(port, request).await);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0].status, "HTTP/1.1 200 OK");
    assert_eq!(all[1].status, "HTTP/1.1 400 Bad Request");
    assert!(all[1].detail().starts_with("Malformed request"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_requests_keep_the_connection_alive() {
    let db = TestDb::sqlite().await;
    let (_server, port) = spawn(&db).await;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    for _ in 0..2 {
        stream.write_all(&get("/health/live", "")).await.unwrap();
        let mut received = Vec::new();
        let mut buf = [0u8; 4096];
        let read = async {
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the server closed a keep-alive connection");
                received.extend_from_slice(&buf[..n]);
                let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&received[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                if received.len() >= end + 4 + length {
                    break;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap();
        let all = responses(&received);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].status, "HTTP/1.1 200 OK");
        assert_eq!(all[0].header("connection"), None);
        assert_eq!(all[0].json(), serde_json::json!({"status": "alive"}));
    }
}
