//! What the multi-process tests share: real `keel` processes ([`process`]), a Redis server of the
//! test's own ([`redis`]), a provider that never answers and free ports ([`net`]), and small HTTP
//! helpers ([`api`]).
//!
//! Every process is started in a process group of its own and killed with its group when its
//! handle is dropped, so nothing outlives a test, even one that panics.
// Test support: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod api;
pub mod net;
pub mod process;
pub mod redis;

pub use api::{Events, client, read_events};
pub use net::{Hang, free_port};
pub use process::{Keel, Running};
pub use redis::RedisServer;

use std::time::Duration;

/// Polls `check` every 50 ms until it returns `Some`, for at most `bound`; panics naming `what`
/// when the bound passes.
pub async fn eventually<T, F, Fut>(what: &str, bound: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
