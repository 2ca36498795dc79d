//! Settings of the auth module.

use std::path::PathBuf;

use chrono::TimeDelta;
use kernel::ConfigError;
use kernel::config::{flag, is_published_secret, parse_in_range, var};
use kernel::module::Deployment;

/// Minimum length of `SECRET_KEY` in production.
pub const MIN_SECRET_BYTES: usize = 32;
/// Lowest `BCRYPT_COST` accepted in production (OWASP's minimum; the default is 12).
pub const MIN_PRODUCTION_BCRYPT_COST: u32 = 10;
/// `PUBLIC_BASE_URL`'s default with the default port (`kernel::config::public_base_url`): where
/// the mails' links point when nothing else is set.
pub const DEFAULT_PUBLIC_BASE_URL: &str = "http://localhost:8000";
/// The path of the verification page under `PUBLIC_BASE_URL` (`AUTH_VERIFY_EMAIL_URL`'s default).
pub const DEFAULT_VERIFY_PATH: &str = "/verify-email";
/// The path of the password-reset page under `PUBLIC_BASE_URL` (`AUTH_RESET_PASSWORD_URL`'s default).
pub const DEFAULT_RESET_PATH: &str = "/reset-password";

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
    /// `REFRESH_TOKEN_EXPIRE_DAYS` (default 30): how long a refresh token may be used; each
    /// refresh hands out a new one with the full lifetime.
    pub refresh_lifetime: TimeDelta,
    /// `PASSWORD_RESET_EXPIRE_MINUTES` (default 30).
    pub reset_lifetime: TimeDelta,
    /// `EMAIL_VERIFICATION_EXPIRE_HOURS` (default 48).
    pub verify_lifetime: TimeDelta,
    /// `AUTH_REQUIRE_VERIFIED_EMAIL` (default false): login and refresh refuse an account whose
    /// address is not verified.
    pub require_verified_email: bool,
    /// `AUTH_MAIL_LIMIT_PER_HOUR` (default 5): verification and reset requests per address and
    /// hour, each kind counted apart.
    pub mail_limit_per_hour: u64,
    /// `AUTH_MAIL_TEMPLATES`: a folder of mail templates overriding the built-in ones.
    pub mail_templates: Option<PathBuf>,
    /// `AUTH_VERIFY_EMAIL_URL` (default `PUBLIC_BASE_URL` + `/verify-email`): the page a
    /// verification link opens, with `token=...` added to its query.
    pub verify_email_url: String,
    /// `AUTH_RESET_PASSWORD_URL` (default `PUBLIC_BASE_URL` + `/reset-password`): the page a
    /// reset link opens, with `token=...` added to its query.
    pub reset_password_url: String,
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
            .field("refresh_lifetime", &self.refresh_lifetime)
            .field("reset_lifetime", &self.reset_lifetime)
            .field("verify_lifetime", &self.verify_lifetime)
            .field("require_verified_email", &self.require_verified_email)
            .field("mail_limit_per_hour", &self.mail_limit_per_hour)
            .field("mail_templates", &self.mail_templates)
            .field("verify_email_url", &self.verify_email_url)
            .field("reset_password_url", &self.reset_password_url)
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

    fn production_problems(&self, _: &Deployment) -> Vec<ConfigError> {
        AuthConfig::production_problems(self)
    }
}

impl AuthConfig {
    /// Reads the settings. A missing or weak `SECRET_KEY` and a low `BCRYPT_COST` are not refused
    /// here: [`AuthConfig::production_problems`] names them, and the server refuses them with
    /// `APP_ENV=production`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let (secret_key, secret_generated) = match var("SECRET_KEY") {
            Some(key) => (key.into_bytes(), false),
            None => (
                random_secret().map_err(|e| ConfigError::new("SECRET_KEY", e))?,
                true,
            ),
        };
        let base = kernel::config::public_base_url()?.url;
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
            refresh_lifetime: TimeDelta::days(parse_in_range(
                "REFRESH_TOKEN_EXPIRE_DAYS",
                30,
                1..=3650,
            )?),
            reset_lifetime: TimeDelta::minutes(parse_in_range(
                "PASSWORD_RESET_EXPIRE_MINUTES",
                30,
                1..=10_080,
            )?),
            verify_lifetime: TimeDelta::hours(parse_in_range(
                "EMAIL_VERIFICATION_EXPIRE_HOURS",
                48,
                1..=8_760,
            )?),
            require_verified_email: flag("AUTH_REQUIRE_VERIFIED_EMAIL", false)?,
            mail_limit_per_hour: parse_in_range("AUTH_MAIL_LIMIT_PER_HOUR", 5, 1..=10_000)?,
            mail_templates: var("AUTH_MAIL_TEMPLATES").map(PathBuf::from),
            verify_email_url: http_url("AUTH_VERIFY_EMAIL_URL")?
                .unwrap_or_else(|| format!("{base}{DEFAULT_VERIFY_PATH}")),
            reset_password_url: http_url("AUTH_RESET_PASSWORD_URL")?
                .unwrap_or_else(|| format!("{base}{DEFAULT_RESET_PATH}")),
        })
    }

    /// What is unsafe in production: no `SECRET_KEY` (a random key per process: tokens die with
    /// it, and instances do not accept each other's), one shorter than [`MIN_SECRET_BYTES`] or
    /// published in this repository (anyone could sign tokens), and a `BCRYPT_COST` below
    /// [`MIN_PRODUCTION_BCRYPT_COST`] (leaked hashes crack fast).
    pub fn production_problems(&self) -> Vec<ConfigError> {
        let mut problems = Vec::new();
        let set_key = format!(
            "set a random value of at least {MIN_SECRET_BYTES} bytes (e.g. the output of \
             `openssl rand -hex 32`)"
        );
        if self.secret_generated {
            problems.push(ConfigError::new(
                "SECRET_KEY",
                format!("is not set; {set_key}"),
            ));
        } else if self.secret_key.len() < MIN_SECRET_BYTES {
            problems.push(ConfigError::new(
                "SECRET_KEY",
                format!("is {} bytes; {set_key}", self.secret_key.len()),
            ));
        } else if std::str::from_utf8(&self.secret_key).is_ok_and(is_published_secret) {
            problems.push(ConfigError::new(
                "SECRET_KEY",
                format!("is a value published in Keel's repository; {set_key}"),
            ));
        }
        if self.bcrypt_cost < MIN_PRODUCTION_BCRYPT_COST {
            problems.push(ConfigError::new(
                "BCRYPT_COST",
                format!(
                    "{} is below {MIN_PRODUCTION_BCRYPT_COST}; set {MIN_PRODUCTION_BCRYPT_COST} \
                     or more (default 12)",
                    self.bcrypt_cost
                ),
            ));
        }
        problems
    }

    /// A configuration for tests and embedding: the given key, 30-minute tokens, bcrypt cost 4,
    /// the lifecycle's defaults (links under `http://localhost:8000`).
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
            refresh_lifetime: TimeDelta::days(30),
            reset_lifetime: TimeDelta::minutes(30),
            verify_lifetime: TimeDelta::hours(48),
            require_verified_email: false,
            mail_limit_per_hour: 5,
            mail_templates: None,
            verify_email_url: format!("{DEFAULT_PUBLIC_BASE_URL}{DEFAULT_VERIFY_PATH}"),
            reset_password_url: format!("{DEFAULT_PUBLIC_BASE_URL}{DEFAULT_RESET_PATH}"),
        }
    }
}

/// An absolute http(s) URL setting, without a trailing `/`; `None` when unset.
fn http_url(name: &str) -> Result<Option<String>, ConfigError> {
    match var(name) {
        None => Ok(None),
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            Ok(Some(url.trim_end_matches('/').to_owned()))
        }
        Some(url) => Err(ConfigError::new(
            name,
            format!("{url:?} is not an http(s) URL"),
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(problems: Vec<ConfigError>) -> Vec<String> {
        problems.into_iter().map(|p| p.setting).collect()
    }

    #[test]
    fn production_refuses_a_missing_short_or_published_key_and_a_low_cost() {
        let strong = AuthConfig {
            bcrypt_cost: 12,
            ..AuthConfig::with_secret("a-long-random-secret-nobody-else-has-42")
        };
        assert!(strong.production_problems().is_empty());
        let at_minimum = AuthConfig {
            bcrypt_cost: MIN_PRODUCTION_BCRYPT_COST,
            ..AuthConfig::with_secret(&"k".repeat(MIN_SECRET_BYTES))
        };
        assert!(at_minimum.production_problems().is_empty());
        // The defaults: a generated key, cost 12.
        assert_eq!(
            settings(AuthConfig::default().production_problems()),
            ["SECRET_KEY"]
        );
        let short = AuthConfig {
            bcrypt_cost: 12,
            ..AuthConfig::with_secret(&"k".repeat(MIN_SECRET_BYTES - 1))
        };
        assert_eq!(settings(short.production_problems()), ["SECRET_KEY"]);
        let published = AuthConfig {
            bcrypt_cost: 12,
            ..AuthConfig::with_secret("bench-secret-bench-secret-bench-secret")
        };
        let problems = published.production_problems();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("published"), "{problems:?}");
        // with_secret's cost 4 (tests) is too low; both problems are named.
        let weak = AuthConfig::with_secret("short");
        assert_eq!(
            settings(weak.production_problems()),
            ["SECRET_KEY", "BCRYPT_COST"]
        );
    }
}
