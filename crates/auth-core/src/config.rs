//! Settings of the auth module.

use kernel::ConfigError;
use kernel::config::{flag, parse_in_range, var};

/// Minimum length of `SECRET_KEY` in production.
pub const MIN_SECRET_BYTES: usize = 32;

#[derive(Clone)]
pub struct AuthConfig {
    /// HS256 signing key (`SECRET_KEY`); random per process when not set.
    pub secret_key: Vec<u8>,
    /// True when `secret_key` was generated at start (tokens die with the process).
    pub secret_generated: bool,
    /// `ACCESS_TOKEN_EXPIRE_MINUTES` (default 30).
    pub token_minutes: i64,
    /// `BCRYPT_COST` (default 12).
    pub bcrypt_cost: u32,
    /// `AUTH_RATE_LIMIT` (default false).
    pub rate_limit: bool,
    /// `BCRYPT_CONCURRENCY`: bcrypt operations running at once (default: CPU cores less one, at
    /// least one), so a burst of logins leaves a core to every other request.
    pub bcrypt_concurrency: usize,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("secret_key", &"<redacted>")
            .field("secret_generated", &self.secret_generated)
            .field("token_minutes", &self.token_minutes)
            .field("bcrypt_cost", &self.bcrypt_cost)
            .field("rate_limit", &self.rate_limit)
            .field("bcrypt_concurrency", &self.bcrypt_concurrency)
            .finish()
    }
}

/// The defaults, without reading the environment: a random signing key (tokens end with the
/// process), 30-minute tokens, bcrypt cost 12, no rate limits.
impl Default for AuthConfig {
    fn default() -> Self {
        let secret = random_secret()
            .unwrap_or_else(|_| uuid::Uuid::new_v4().simple().to_string().into_bytes());
        Self {
            secret_generated: true,
            bcrypt_cost: 12,
            ..Self::with_secret_bytes(secret)
        }
    }
}

impl kernel::ModuleConfig for AuthConfig {
    fn from_env() -> Result<Self, ConfigError> {
        AuthConfig::from_env()
    }
}

impl AuthConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        let production = var("APP_ENV").is_some_and(|v| v.eq_ignore_ascii_case("production"));
        let (secret_key, secret_generated) = match var("SECRET_KEY") {
            Some(key) if production && key.len() < MIN_SECRET_BYTES => {
                return Err(ConfigError::new(
                    "SECRET_KEY",
                    format!("must be at least {MIN_SECRET_BYTES} bytes when APP_ENV=production"),
                ));
            }
            Some(key) => (key.into_bytes(), false),
            None if production => {
                return Err(ConfigError::new(
                    "SECRET_KEY",
                    "is required when APP_ENV=production",
                ));
            }
            None => (
                random_secret().map_err(|e| ConfigError::new("SECRET_KEY", e))?,
                true,
            ),
        };
        Ok(Self {
            secret_key,
            secret_generated,
            token_minutes: parse_in_range("ACCESS_TOKEN_EXPIRE_MINUTES", 30, 1..=525_600)?,
            bcrypt_cost: parse_in_range("BCRYPT_COST", 12, 4..=31)?,
            rate_limit: flag("AUTH_RATE_LIMIT", false)?,
            bcrypt_concurrency: parse_in_range(
                "BCRYPT_CONCURRENCY",
                default_bcrypt_concurrency(),
                1..=1024,
            )?,
        })
    }

    /// A configuration for tests and embedding: the given key, 30-minute tokens, bcrypt cost 4.
    pub fn with_secret(secret: &str) -> Self {
        Self::with_secret_bytes(secret.as_bytes().to_vec())
    }

    fn with_secret_bytes(secret_key: Vec<u8>) -> Self {
        Self {
            secret_key,
            secret_generated: false,
            token_minutes: 30,
            bcrypt_cost: 4,
            rate_limit: false,
            bcrypt_concurrency: default_bcrypt_concurrency(),
        }
    }
}

fn default_bcrypt_concurrency() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    cores.saturating_sub(1).max(1)
}

fn random_secret() -> Result<Vec<u8>, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(hex::encode(bytes).into_bytes())
}
