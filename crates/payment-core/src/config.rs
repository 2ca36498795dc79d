//! Settings of the payment module.

use std::time::Duration;

use kernel::ConfigError;
use kernel::config::{parse_in_range, var};

pub const DEFAULT_STRIPE_API_BASE: &str = "https://api.stripe.com";
pub const DEFAULT_PUBLIC_BASE_URL: &str = "http://localhost:8000";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentConfig {
    /// `STRIPE_SECRET_KEY`: without it checkout, refunds and cancels answer 503.
    pub secret_key: Option<String>,
    /// `STRIPE_WEBHOOK_SECRET` (`whsec_...`): without it every webhook is refused.
    pub webhook_secret: Option<String>,
    /// `STRIPE_API_BASE` (default `https://api.stripe.com`).
    pub api_base: String,
    /// `PAYMENT_SUCCESS_URL` / `PAYMENT_CANCEL_URL`: where checkout returns when the request names
    /// no URL (else the built-in pages).
    pub success_url: Option<String>,
    pub cancel_url: Option<String>,
    /// `PUBLIC_BASE_URL` (default `http://localhost:8000`): the built-in pages' address.
    pub public_base_url: String,
    /// `PAYMENT_TIMEOUT_SECONDS` (default 30): the longest a Stripe call may take.
    pub timeout: Duration,
}

impl Default for PaymentConfig {
    fn default() -> Self {
        PaymentConfig {
            secret_key: None,
            webhook_secret: None,
            api_base: DEFAULT_STRIPE_API_BASE.to_owned(),
            success_url: None,
            cancel_url: None,
            public_base_url: DEFAULT_PUBLIC_BASE_URL.to_owned(),
            timeout: Duration::from_secs(30),
        }
    }
}

impl PaymentConfig {
    /// A test key (`sk_test_`, `rk_test_`) or none at all.
    pub fn is_test_mode(&self) -> bool {
        self.secret_key
            .as_deref()
            .is_none_or(|k| k.starts_with("sk_test_") || k.starts_with("rk_test_"))
    }
}

fn url(name: &str, default: Option<&str>) -> Result<Option<String>, ConfigError> {
    match var(name).or_else(|| default.map(str::to_owned)) {
        None => Ok(None),
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            Ok(Some(u.trim_end_matches('/').to_owned()))
        }
        Some(u) => Err(ConfigError::new(
            name,
            format!("{u:?} is not an http(s) URL"),
        )),
    }
}

impl kernel::ModuleConfig for PaymentConfig {
    fn from_env() -> Result<Self, ConfigError> {
        Ok(PaymentConfig {
            secret_key: var("STRIPE_SECRET_KEY"),
            webhook_secret: var("STRIPE_WEBHOOK_SECRET"),
            api_base: url("STRIPE_API_BASE", Some(DEFAULT_STRIPE_API_BASE))?
                .unwrap_or_else(|| DEFAULT_STRIPE_API_BASE.to_owned()),
            success_url: var("PAYMENT_SUCCESS_URL"),
            cancel_url: var("PAYMENT_CANCEL_URL"),
            public_base_url: url("PUBLIC_BASE_URL", Some(DEFAULT_PUBLIC_BASE_URL))?
                .unwrap_or_else(|| DEFAULT_PUBLIC_BASE_URL.to_owned()),
            timeout: Duration::from_secs(parse_in_range("PAYMENT_TIMEOUT_SECONDS", 30, 1..=120)?),
        })
    }
}
