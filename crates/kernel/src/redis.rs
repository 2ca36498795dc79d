//! The deployment's Redis, for state that several instances of the service share (such as the
//! auth module's rate-limit counters). It is looked for once, when a module first asks, so a
//! deployment whose modules need no Redis never connects to one.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::{Config, Pool, Runtime};
use tokio::sync::OnceCell;

/// The longest the first look for Redis may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A handle on the deployment's Redis (`REDIS_URL`, `REDIS_DB`); cheap to clone.
#[derive(Clone, Default)]
pub struct SharedRedis {
    url: Option<String>,
    answering: Arc<OnceCell<Option<Pool>>>,
}

impl SharedRedis {
    /// No Redis: [`SharedRedis::answering`] is always `None`.
    pub fn none() -> SharedRedis {
        SharedRedis::default()
    }

    /// The Redis at `url`, with `db` overriding the URL's database number.
    pub fn new(url: &str, db: Option<i64>) -> SharedRedis {
        let url = match db {
            Some(db) => with_db(url, db),
            None => url.to_owned(),
        };
        SharedRedis {
            url: Some(url),
            answering: Arc::default(),
        }
    }

    /// A pool on Redis when it answered a `PING` the first time this was asked; `None` when it
    /// did not (or none is configured). The answer is kept for the life of the process.
    pub async fn answering(&self) -> Option<Pool> {
        let url = self.url.as_deref()?;
        self.answering
            .get_or_init(|| async move {
                let pool = Config::from_url(url)
                    .create_pool(Some(Runtime::Tokio1))
                    .ok()?;
                let ping = async {
                    let mut conn = pool.get().await.ok()?;
                    deadpool_redis::redis::cmd("PING")
                        .query_async::<String>(&mut *conn)
                        .await
                        .ok()
                };
                match tokio::time::timeout(PROBE_TIMEOUT, ping).await {
                    Ok(Some(_)) => Some(pool),
                    _ => {
                        tracing::info!(
                            "Redis (REDIS_URL) does not answer: shared state stays in this process"
                        );
                        None
                    }
                }
            })
            .await
            .clone()
    }
}

/// `redis://host:port/3` with its database number replaced by `db`.
fn with_db(url: &str, db: i64) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{host}/{db}?{q}"),
        None => format!("{host}/{db}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_numbers_override_the_url() {
        assert_eq!(with_db("redis://h:6379", 2), "redis://h:6379/2");
        assert_eq!(with_db("redis://h:6379/5", 2), "redis://h:6379/2");
        assert_eq!(with_db("redis://h/1?x=y", 0), "redis://h/0?x=y");
    }

    #[tokio::test]
    async fn no_redis_answers_none() {
        assert!(SharedRedis::none().answering().await.is_none());
        // A port nothing listens on.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let redis = SharedRedis::new(&format!("redis://127.0.0.1:{closed}"), None);
        assert!(redis.answering().await.is_none());
    }
}
