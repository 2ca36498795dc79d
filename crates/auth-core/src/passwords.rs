//! bcrypt hashing, always on tokio's blocking pool (a cost-12 hash takes a quarter of a second),
//! at most `concurrency` at a time: a burst of logins queues for those threads instead of taking
//! every core from the requests that need no hashing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Semaphore;

use crate::domain::PASSWORD_MAX_BYTES;
use crate::error::AuthError;

#[derive(Clone)]
pub struct Hasher {
    cost: u32,
    /// A hash of a random password, verified against when the user is unknown so that an unknown
    /// address costs the same work as a known one (no user enumeration by timing).
    dummy_hash: String,
    /// How many bcrypt verifications ran (lets tests see that unknown users cost the same work).
    verifications: Arc<AtomicU64>,
    /// Permits for hashes running at once.
    slots: Arc<Semaphore>,
}

impl Hasher {
    /// A hasher at bcrypt `cost` running at most `concurrency` hashes at once.
    pub async fn new(cost: u32, concurrency: usize) -> Result<Self, AuthError> {
        let mut random = [0u8; 24];
        getrandom::fill(&mut random).map_err(|e| AuthError::Internal(e.to_string()))?;
        let password = hex::encode(random);
        let dummy_hash = blocking(move || dummy_hash(&password, cost)).await?;
        Ok(Self {
            cost,
            dummy_hash,
            verifications: Arc::default(),
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
        })
    }

    pub async fn hash(&self, password: &str) -> Result<String, AuthError> {
        let (password, cost) = (password.to_owned(), self.cost);
        self.limited(move || bcrypt::hash(password, cost)).await
    }

    /// Runs one bcrypt operation on the blocking pool once a slot is free.
    async fn limited<T: Send + 'static>(
        &self,
        op: impl FnOnce() -> bcrypt::BcryptResult<T> + Send + 'static,
    ) -> Result<T, AuthError> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        blocking(op).await
    }

    /// Checks `password` against `hash`, or against the dummy hash when `hash` is `None`
    /// (then always false). Passwords over bcrypt's 72 bytes never match.
    pub async fn verify(&self, password: &str, hash: Option<&str>) -> Result<bool, AuthError> {
        let too_long = password.len() > PASSWORD_MAX_BYTES;
        let known = hash.is_some() && !too_long;
        let hash = hash.unwrap_or(&self.dummy_hash).to_owned();
        let mut password = password.to_owned();
        if too_long {
            let mut end = PASSWORD_MAX_BYTES;
            while !password.is_char_boundary(end) {
                end -= 1;
            }
            password.truncate(end);
        }
        self.verifications.fetch_add(1, Ordering::Relaxed);
        let matched = self
            .limited(move || bcrypt::verify(password, &hash))
            .await?;
        Ok(known && matched)
    }

    pub fn verifications(&self) -> u64 {
        self.verifications.load(Ordering::Relaxed)
    }
}

/// bcrypt's lowest cost.
const LOWEST_COST: u32 = 4;

/// A hash of `password` that costs `cost`'s work to check, as a stored hash does, and that no
/// other password matches. bcrypt reads the work from the hash's cost field, so a hash made at
/// the lowest cost with its field set to `cost` serves: making one at `cost` itself would take a
/// quarter of a second of every start with the auth module (CLI commands included).
fn dummy_hash(password: &str, cost: u32) -> bcrypt::BcryptResult<String> {
    let cheap = bcrypt::hash(password, LOWEST_COST)?;
    let salt_and_hash = cheap
        .strip_prefix(&format!("$2b${LOWEST_COST:02}$"))
        .ok_or(bcrypt::BcryptError::InvalidHash("not a $2b$ hash"))?;
    Ok(format!("$2b${cost:02}${salt_and_hash}"))
}

async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> bcrypt::BcryptResult<T> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| AuthError::Internal(e.to_string()))?
        .map_err(|e| AuthError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bcrypt reads 72 bytes: a longer password whose first 72 bytes are the stored one would
    /// match if it were handed to bcrypt as is. It never matches, and still costs a verification.
    #[tokio::test]
    async fn passwords_over_72_bytes_never_match() {
        let hasher = Hasher::new(4, 1).await.unwrap_or_else(|e| panic!("{e:?}"));
        let stored = "é".repeat(36); // 72 bytes
        assert_eq!(stored.len(), PASSWORD_MAX_BYTES);
        let hash = hasher.hash(&stored).await.unwrap_or_default();
        let check = |password: String| {
            let (hasher, hash) = (hasher.clone(), hash.clone());
            async move { hasher.verify(&password, Some(&hash)).await.ok() }
        };
        assert_eq!(check(stored.clone()).await, Some(true));
        let before = hasher.verifications();
        assert_eq!(check(format!("{stored}x")).await, Some(false));
        assert_eq!(check(format!("{stored}é")).await, Some(false));
        assert_eq!(hasher.verifications() - before, 2);
        // The dummy hash of unknown users never matches either.
        assert_eq!(hasher.verify(&stored, None).await.ok(), Some(false));
    }

    /// The dummy hash checked for unknown users costs the hasher's work, as a stored hash does:
    /// bcrypt reads it from the hash, which it accepts as one of its own.
    #[tokio::test]
    async fn the_dummy_hash_costs_the_hashers_work() {
        for cost in [5, 12] {
            let hasher = Hasher::new(cost, 1)
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let parts: bcrypt::HashParts =
                hasher.dummy_hash.parse().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parts.get_cost(), cost);
            assert_eq!(hasher.dummy_hash.len(), 60);
        }
        let hasher = Hasher::new(5, 1).await.unwrap_or_else(|e| panic!("{e:?}"));
        let checked = bcrypt::verify("any password", &hasher.dummy_hash);
        assert!(matches!(checked, Ok(false)), "{checked:?}");
    }
}
