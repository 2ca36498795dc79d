//! Behind a reverse proxy (`TRUSTED_PROXIES`): real `keel serve` processes with the auth rate
//! limits on (register: 5 per client address and hour). The test itself plays the proxy, or a
//! client that forges the proxy's headers. See docs/deploy.md ("Behind a proxy").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel::testing::PASSWORD;
use keel_tests::keel_bin;
use keel_tests::support::{Keel, client, free_port};
use reqwest::StatusCode;
use serde_json::json;

/// A register with these extra headers; returns the status.
async fn register_via(
    http: &reqwest::Client,
    base: &str,
    email: &str,
    headers: &[(&str, &str)],
) -> StatusCode {
    let mut request = http
        .post(format!("{base}/api/v1/auth/register"))
        .json(&json!({"email": email, "password": PASSWORD}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status()
}

/// A fresh address from 198.18.0.0/15 (benchmarking space) for this run: rate-limit counters in
/// the shared Redis outlive a run, so every run counts against addresses of its own.
fn fresh_address() -> String {
    let n = uuid::Uuid::new_v4().as_u128();
    format!(
        "198.{}.{}.{}",
        18 + (n & 1),
        (n >> 8) & 0xff,
        (n >> 16) & 0xff
    )
}

/// Waits, when the current hour is about to end, until it has: the limits count in fixed
/// one-hour windows, and each check below must stay inside one.
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

/// A server with rate limits counted in its own process (its `REDIS_URL` answers nothing).
fn limited(trusted: Option<&str>) -> Keel {
    let keel = Keel::serve(keel_bin!())
        .env("AUTH_RATE_LIMIT", "true")
        .env("REDIS_URL", format!("redis://127.0.0.1:{}", free_port()));
    match trusted {
        Some(list) => keel.env("TRUSTED_PROXIES", list),
        None => keel,
    }
}

/// With no trusted proxy, or with one that is not the connecting peer, forged `X-Forwarded-For`
/// and `Forwarded` headers change nothing: every attempt counts against the peer's address, the
/// sixth is refused, and the request log names the peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_forwarding_headers_from_an_untrusted_peer_change_nothing() {
    let http = client(Duration::from_secs(30));
    for trusted in [None, Some("192.0.2.0/24, 10.0.0.0/8")] {
        let server = limited(trusted).spawn().ready().await;
        let base = server.url("");
        stay_inside_one_rate_limit_window().await;
        for i in 0..5 {
            let forged = fresh_address();
            let forwarded = format!("for={}", fresh_address());
            let status = register_via(
                &http,
                &base,
                &format!("forged{i}@example.com"),
                &[
                    ("x-forwarded-for", forged.as_str()),
                    ("forwarded", forwarded.as_str()),
                ],
            )
            .await;
            assert_eq!(
                status,
                StatusCode::CREATED,
                "attempt {} ({trusted:?})",
                i + 1
            );
        }
        let forged = fresh_address();
        let status = register_via(
            &http,
            &base,
            "sixth@example.com",
            &[("x-forwarded-for", forged.as_str())],
        )
        .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{trusted:?}");
        let logs = server.logs();
        assert!(logs.contains("\"client\":\"127.0.0.1\""), "{logs}");
        assert!(
            !logs.contains(&format!("\"client\":\"{forged}\"")),
            "{logs}"
        );
    }
}

/// Behind a trusted proxy, each client is counted apart by the address the proxy appended (the
/// right-most hop), not by what the client wrote to the left of it, and the log names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_each_client_is_counted_apart() {
    let http = client(Duration::from_secs(30));
    let server = limited(Some("127.0.0.1/32, ::1")).spawn().ready().await;
    let base = server.url("");
    let client_a = fresh_address();
    let client_b = fresh_address();
    stay_inside_one_rate_limit_window().await;
    for i in 0..5 {
        // The client forges a different first hop each time; the proxy appends its address.
        let chain = format!("{}, {client_a}", fresh_address());
        let status = register_via(
            &http,
            &base,
            &format!("a{i}@example.com"),
            &[("x-forwarded-for", chain.as_str())],
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "attempt {} of client a", i + 1);
    }
    let chain = format!("{}, {client_a}", fresh_address());
    let status = register_via(
        &http,
        &base,
        "a5@example.com",
        &[("x-forwarded-for", chain.as_str())],
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "client a's sixth");
    let status = register_via(
        &http,
        &base,
        "b0@example.com",
        &[("x-forwarded-for", client_b.as_str())],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "client b has its own count");
    let logs = server.logs();
    assert!(
        logs.contains(&format!("\"client\":\"{client_a}\"")),
        "{logs}"
    );
    assert!(
        logs.contains(&format!("\"client\":\"{client_b}\"")),
        "{logs}"
    );
}

/// Two servers behind one proxy share the counts in Redis: five registrations of one client
/// spread over both, then the sixth is refused by either, while another client still registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_behind_a_proxy_share_one_count_per_client() {
    let Ok(redis_url) = std::env::var("TEST_REDIS_URL") else {
        eprintln!("TEST_REDIS_URL is not set: the two-instance proxy test is skipped");
        return;
    };
    let instance = || {
        Keel::serve(keel_bin!())
            .env("AUTH_RATE_LIMIT", "true")
            .env("REDIS_URL", &redis_url)
            .env("TRUSTED_PROXIES", "127.0.0.1")
            .spawn()
    };
    let (a, b) = tokio::join!(instance().ready(), instance().ready());
    let (base_a, base_b) = (a.url(""), b.url(""));
    let http = client(Duration::from_secs(30));
    let address = fresh_address();
    let forwarded = [("x-forwarded-for", address.as_str())];
    stay_inside_one_rate_limit_window().await;
    for (i, base) in [&base_a, &base_b, &base_a, &base_b, &base_a]
        .into_iter()
        .enumerate()
    {
        let status = register_via(&http, base, &format!("c{i}@example.com"), &forwarded).await;
        assert_eq!(status, StatusCode::CREATED, "attempt {} of 5", i + 1);
    }
    for base in [&base_b, &base_a] {
        let status = register_via(&http, base, "late@example.com", &forwarded).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{base}");
    }
    let other = fresh_address();
    let status = register_via(
        &http,
        &base_b,
        "other@example.com",
        &[("x-forwarded-for", other.as_str())],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "another client is counted apart"
    );
}
