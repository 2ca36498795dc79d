//! Optional per-IP rate limits of register and login (`AUTH_RATE_LIMIT=true`): fixed one-hour
//! windows, counted in Redis when a pool is given (shared by every server instance), else in
//! this process.

use std::collections::HashMap;
use std::sync::Mutex;

use deadpool_redis::redis;

use crate::error::AuthError;

const WINDOW_SECONDS: u64 = 3600;

/// What is limited, and how many attempts per IP and hour are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Register,
    Login,
}

impl Action {
    pub fn limit(self) -> u64 {
        match self {
            Action::Register => 5,
            Action::Login => 10,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Action::Register => "register",
            Action::Login => "login",
        }
    }
}

pub enum RateLimiter {
    Off,
    Memory(Mutex<HashMap<(Action, String), (u64, u64)>>),
    Redis(deadpool_redis::Pool),
}

impl RateLimiter {
    pub fn memory() -> Self {
        RateLimiter::Memory(Mutex::new(HashMap::new()))
    }

    /// Counts one attempt of `action` from `ip`; `RateLimited` once over the hourly limit.
    pub async fn check(&self, action: Action, ip: &str) -> Result<(), AuthError> {
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        let window = now / WINDOW_SECONDS;
        let retry_after_seconds = (window + 1) * WINDOW_SECONDS - now;
        let count = match self {
            RateLimiter::Off => return Ok(()),
            RateLimiter::Memory(counters) => {
                let mut counters = counters
                    .lock()
                    .map_err(|_| AuthError::Internal("rate limiter lock poisoned".into()))?;
                if counters.len() > 100_000 {
                    counters.retain(|_, (w, _)| *w == window);
                }
                let entry = counters
                    .entry((action, ip.to_owned()))
                    .or_insert((window, 0));
                if entry.0 != window {
                    *entry = (window, 0);
                }
                entry.1 += 1;
                entry.1
            }
            RateLimiter::Redis(pool) => {
                let key = format!("keel:auth:ratelimit:{}:{ip}:{window}", action.name());
                let mut conn = pool
                    .get()
                    .await
                    .map_err(|e| AuthError::Internal(format!("rate limit store: {e}")))?;
                let (count,): (u64,) = redis::pipe()
                    .atomic()
                    .incr(&key, 1)
                    .expire(&key, WINDOW_SECONDS as i64)
                    .ignore()
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| AuthError::Internal(format!("rate limit store: {e}")))?;
                count
            }
        };
        if count > action.limit() {
            Err(AuthError::RateLimited {
                retry_after_seconds,
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_limits_per_ip_and_action() {
        let limiter = RateLimiter::memory();
        for _ in 0..5 {
            assert!(limiter.check(Action::Register, "1.2.3.4").await.is_ok());
        }
        assert!(matches!(
            limiter.check(Action::Register, "1.2.3.4").await,
            Err(AuthError::RateLimited { .. })
        ));
        assert!(limiter.check(Action::Register, "5.6.7.8").await.is_ok());
        assert!(limiter.check(Action::Login, "1.2.3.4").await.is_ok());
    }

    #[tokio::test]
    async fn off_never_limits() {
        for _ in 0..50 {
            assert!(RateLimiter::Off.check(Action::Login, "x").await.is_ok());
        }
    }
}
