//! bcrypt hashing, always on tokio's blocking pool (a cost-12 hash takes a quarter of a second).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Hasher {
    pub async fn new(cost: u32) -> Result<Self, AuthError> {
        let mut random = [0u8; 24];
        getrandom::fill(&mut random).map_err(|e| AuthError::Internal(e.to_string()))?;
        let dummy_hash = hash_blocking(hex::encode(random), cost).await?;
        Ok(Self {
            cost,
            dummy_hash,
            verifications: Arc::default(),
        })
    }

    pub async fn hash(&self, password: &str) -> Result<String, AuthError> {
        hash_blocking(password.to_owned(), self.cost).await
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
        let matched = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))?
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        Ok(known && matched)
    }

    pub fn verifications(&self) -> u64 {
        self.verifications.load(Ordering::Relaxed)
    }
}

async fn hash_blocking(password: String, cost: u32) -> Result<String, AuthError> {
    tokio::task::spawn_blocking(move || bcrypt::hash(password, cost))
        .await
        .map_err(|e| AuthError::Internal(e.to_string()))?
        .map_err(|e| AuthError::Internal(e.to_string()))
}
