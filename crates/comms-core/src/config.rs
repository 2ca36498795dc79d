//! Settings of the communications module.

use std::time::Duration;

use kernel::ConfigError;
use kernel::config::{parse_in_range, var};

pub const DEFAULT_RESEND_API_BASE: &str = "https://api.resend.com";
pub const DEFAULT_TWILIO_API_BASE: &str = "https://api.twilio.com";
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 15;

/// Channel settings. A channel whose settings are missing answers 503 naming the first one missing;
/// `Default` reads no environment and configures no channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommsConfig {
    /// `RESEND_API_KEY`.
    pub resend_api_key: Option<String>,
    /// `RESEND_FROM_EMAIL`: the default sender (`"Name <a@example.com>"` or a bare address).
    pub resend_from_email: Option<String>,
    /// `RESEND_API_BASE` (default `https://api.resend.com`).
    pub resend_api_base: String,
    /// `RESEND_WEBHOOK_SECRET` (`whsec_...`): verifies Resend's delivery events.
    pub resend_webhook_secret: Option<String>,
    /// `TWILIO_ACCOUNT_SID`.
    pub twilio_account_sid: Option<String>,
    /// `TWILIO_AUTH_TOKEN`: authenticates calls to Twilio and verifies its status callbacks.
    pub twilio_auth_token: Option<String>,
    /// `TWILIO_PHONE_NUMBER`: the default sender and caller id (E.164).
    pub twilio_phone_number: Option<String>,
    /// `TWILIO_MESSAGING_SERVICE_SID`: when set, SMS go through the service instead of a number.
    pub twilio_messaging_service_sid: Option<String>,
    /// `TWILIO_API_BASE` (default `https://api.twilio.com`).
    pub twilio_api_base: String,
    /// `PUBLIC_BASE_URL`: where providers reach this service; status callbacks are requested and
    /// verified against it.
    pub public_base_url: Option<String>,
    /// `COMMS_TIMEOUT_SECONDS` (default 15, 1..=120): the longest a provider call may take.
    pub timeout: Duration,
}

impl Default for CommsConfig {
    fn default() -> Self {
        CommsConfig {
            resend_api_key: None,
            resend_from_email: None,
            resend_api_base: DEFAULT_RESEND_API_BASE.to_owned(),
            resend_webhook_secret: None,
            twilio_account_sid: None,
            twilio_auth_token: None,
            twilio_phone_number: None,
            twilio_messaging_service_sid: None,
            twilio_api_base: DEFAULT_TWILIO_API_BASE.to_owned(),
            public_base_url: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
        }
    }
}

impl kernel::ModuleConfig for CommsConfig {
    fn from_env() -> Result<Self, ConfigError> {
        let base = |name: &str, default: &str| -> Result<String, ConfigError> {
            let value = var(name).unwrap_or_else(|| default.to_owned());
            if value.starts_with("http://") || value.starts_with("https://") {
                Ok(value.trim_end_matches('/').to_owned())
            } else {
                Err(ConfigError::new(
                    name,
                    format!("{value:?} is not an http(s) URL"),
                ))
            }
        };
        let public_base_url = match var("PUBLIC_BASE_URL") {
            None => None,
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
                Some(url.trim_end_matches('/').to_owned())
            }
            Some(url) => {
                return Err(ConfigError::new(
                    "PUBLIC_BASE_URL",
                    format!("{url:?} is not an http(s) URL"),
                ));
            }
        };
        let webhook_secret = var("RESEND_WEBHOOK_SECRET");
        if let Some(secret) = &webhook_secret
            && crate::webhooks::svix_key(secret).is_none()
        {
            return Err(ConfigError::new(
                "RESEND_WEBHOOK_SECRET",
                "expected whsec_ followed by base64 (as Resend shows it)",
            ));
        }
        Ok(CommsConfig {
            resend_api_key: var("RESEND_API_KEY"),
            resend_from_email: var("RESEND_FROM_EMAIL"),
            resend_api_base: base("RESEND_API_BASE", DEFAULT_RESEND_API_BASE)?,
            resend_webhook_secret: webhook_secret,
            twilio_account_sid: var("TWILIO_ACCOUNT_SID"),
            twilio_auth_token: var("TWILIO_AUTH_TOKEN"),
            twilio_phone_number: var("TWILIO_PHONE_NUMBER"),
            twilio_messaging_service_sid: var("TWILIO_MESSAGING_SERVICE_SID"),
            twilio_api_base: base("TWILIO_API_BASE", DEFAULT_TWILIO_API_BASE)?,
            public_base_url,
            timeout: Duration::from_secs(parse_in_range(
                "COMMS_TIMEOUT_SECONDS",
                DEFAULT_TIMEOUT_SECONDS,
                1..=120,
            )?),
        })
    }
}

impl CommsConfig {
    /// The first setting a channel misses: its 503 names it.
    pub fn missing(&self, channel: crate::Channel) -> Option<&'static str> {
        self.all_missing(channel).into_iter().next()
    }

    /// Every missing setting of a channel, for the health report.
    pub fn all_missing(&self, channel: crate::Channel) -> Vec<&'static str> {
        let settings: Vec<(&'static str, bool)> = match channel {
            crate::Channel::Email => vec![
                ("RESEND_API_KEY", self.resend_api_key.is_some()),
                ("RESEND_FROM_EMAIL", self.resend_from_email.is_some()),
            ],
            crate::Channel::Sms => vec![
                ("TWILIO_ACCOUNT_SID", self.twilio_account_sid.is_some()),
                ("TWILIO_AUTH_TOKEN", self.twilio_auth_token.is_some()),
                (
                    "TWILIO_PHONE_NUMBER",
                    self.twilio_phone_number.is_some()
                        || self.twilio_messaging_service_sid.is_some(),
                ),
            ],
            crate::Channel::Voice => vec![
                ("TWILIO_ACCOUNT_SID", self.twilio_account_sid.is_some()),
                ("TWILIO_AUTH_TOKEN", self.twilio_auth_token.is_some()),
                ("TWILIO_PHONE_NUMBER", self.twilio_phone_number.is_some()),
            ],
        };
        settings
            .into_iter()
            .filter(|(_, set)| !set)
            .map(|(name, _)| name)
            .collect()
    }
}
