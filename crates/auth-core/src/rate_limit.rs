//! Rate limits, in fixed one-hour windows: the optional per-IP limits of register and login
//! (`AUTH_RATE_LIMIT=true`), and the per-address limits of the mails a client can trigger
//! (verification and password reset, always on). Counted in the deployment's Redis when it
//! answers (shared by every server instance; the `redis` feature), else in this process.

use std::collections::HashMap;
use std::sync::Mutex;

#[cfg(feature = "redis")]
use deadpool_redis::redis;
use kernel::Deps;
#[cfg(feature = "redis")]
use kernel::redis::SharedRedis;

use crate::error::AuthError;

const WINDOW_SECONDS: u64 = 3600;

/// What is limited, and how many attempts per IP and hour are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Register,
    Login,
    /// A verification mail asked for an address.
    VerifyEmail,
    /// A password-reset mail asked for an address.
    PasswordReset,
}

impl Action {
    /// The spec's production targets of the per-IP limits; the mail limits are a setting
    /// (`AUTH_MAIL_LIMIT_PER_HOUR`), given to [`RateLimiter::check_limit`].
    pub fn limit(self) -> u64 {
        match self {
            Action::Register => 5,
            Action::Login => 10,
            Action::VerifyEmail | Action::PasswordReset => 5,
        }
    }

    #[cfg(feature = "redis")]
    fn name(self) -> &'static str {
        match self {
            Action::Register => "register",
            Action::Login => "login",
            Action::VerifyEmail => "verify_email",
            Action::PasswordReset => "password_reset",
        }
    }
}

type Counters = Mutex<HashMap<(Action, String), (u64, u64)>>;

pub enum RateLimiter {
    Off,
    Memory(Counters),
    #[cfg(feature = "redis")]
    Redis(deadpool_redis::Pool),
    /// Redis when the deployment's answers (looked for at the first check), else this process.
    #[cfg(feature = "redis")]
    Shared(SharedRedis, Counters),
}

impl RateLimiter {
    pub fn memory() -> Self {
        RateLimiter::Memory(Mutex::new(HashMap::new()))
    }

    /// Counts in the deployment's Redis when it answers, else in this process; Redis is looked
    /// for at the first check, not before.
    #[cfg(feature = "redis")]
    pub fn shared(redis: SharedRedis) -> Self {
        RateLimiter::Shared(redis, Mutex::new(HashMap::new()))
    }

    /// The limiter of a module built with `deps`: the deployment's Redis when it answers now,
    /// else this process.
    pub async fn of_deployment(deps: &Deps) -> Self {
        #[cfg(feature = "redis")]
        if let Some(redis) = deps.redis.answering().await {
            return RateLimiter::Redis(redis);
        }
        let _ = deps;
        RateLimiter::memory()
    }

    /// [`of_deployment`](Self::of_deployment), with Redis looked for at the first check.
    pub fn of_deployment_later(deps: &Deps) -> Self {
        #[cfg(feature = "redis")]
        return RateLimiter::shared(deps.redis.clone());
        #[cfg(not(feature = "redis"))]
        {
            let _ = deps;
            RateLimiter::memory()
        }
    }

    /// Counts one attempt of `action` from `ip`; `RateLimited` once over the hourly limit.
    pub async fn check(&self, action: Action, ip: &str) -> Result<(), AuthError> {
        self.check_limit(action, ip, action.limit()).await
    }

    /// Counts one attempt of `action` for `key`; `RateLimited` once over `limit` in the hour.
    pub async fn check_limit(
        &self,
        action: Action,
        key: &str,
        limit: u64,
    ) -> Result<(), AuthError> {
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        let window = now / WINDOW_SECONDS;
        let retry_after_seconds = (window + 1) * WINDOW_SECONDS - now;
        let count = match self {
            RateLimiter::Off => return Ok(()),
            #[cfg(feature = "redis")]
            RateLimiter::Shared(redis, counters) => match redis.answering().await {
                Some(pool) => count_in_redis(&pool, action, key, window).await?,
                None => count_in_memory(counters, action, key, window)?,
            },
            RateLimiter::Memory(counters) => count_in_memory(counters, action, key, window)?,
            #[cfg(feature = "redis")]
            RateLimiter::Redis(pool) => count_in_redis(pool, action, key, window).await?,
        };
        if count > limit {
            Err(AuthError::RateLimited {
                retry_after_seconds,
            })
        } else {
            Ok(())
        }
    }
}

fn count_in_memory(
    counters: &Counters,
    action: Action,
    key: &str,
    window: u64,
) -> Result<u64, AuthError> {
    let mut counters = counters
        .lock()
        .map_err(|_| AuthError::Internal("rate limiter lock poisoned".into()))?;
    if counters.len() > 100_000 {
        counters.retain(|_, (w, _)| *w == window);
    }
    let entry = counters
        .entry((action, key.to_owned()))
        .or_insert((window, 0));
    if entry.0 != window {
        *entry = (window, 0);
    }
    entry.1 += 1;
    Ok(entry.1)
}

#[cfg(feature = "redis")]
async fn count_in_redis(
    pool: &deadpool_redis::Pool,
    action: Action,
    key: &str,
    window: u64,
) -> Result<u64, AuthError> {
    let key = format!("keel:auth:ratelimit:{}:{key}:{window}", action.name());
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
    Ok(count)
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

    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn mail_limits_count_per_key_with_the_given_limit() {
        let limiter = RateLimiter::shared(SharedRedis::none());
        for _ in 0..2 {
            assert!(
                limiter
                    .check_limit(Action::PasswordReset, "k1", 2)
                    .await
                    .is_ok()
            );
        }
        assert!(matches!(
            limiter.check_limit(Action::PasswordReset, "k1", 2).await,
            Err(AuthError::RateLimited { .. })
        ));
        assert!(
            limiter
                .check_limit(Action::PasswordReset, "k2", 2)
                .await
                .is_ok()
        );
        assert!(
            limiter
                .check_limit(Action::VerifyEmail, "k1", 2)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn off_never_limits() {
        for _ in 0..50 {
            assert!(RateLimiter::Off.check(Action::Login, "x").await.is_ok());
        }
    }
}
