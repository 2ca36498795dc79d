//! Settings of the communications module.

use std::time::Duration;

use kernel::ConfigError;
use kernel::config::{is_published_secret, parse_in_range, var};
use kernel::module::Deployment;

pub const DEFAULT_RESEND_API_BASE: &str = "https://api.resend.com";
pub const DEFAULT_TWILIO_API_BASE: &str = "https://api.twilio.com";
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 15;

/// Channel settings. A channel whose settings are missing answers 503 naming the first one missing;
/// `Default` reads no environment and configures no channel.
#[derive(Clone, PartialEq, Eq)]
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
    /// `TWILIO_WEBHOOK_SHARED_KEYS` (`<SharedKey id>=<secret>`, comma-separated): verify callbacks
    /// that Twilio signs with a SharedKey (those with `X-Twilio-Webhooks-Signature-Settings`).
    pub twilio_webhook_shared_keys: Vec<(String, String)>,
    /// `PUBLIC_BASE_URL` when it is set (`kernel::config::public_base_url`; its default, a
    /// localhost address, is left out): where providers reach this service; status callbacks are
    /// requested and verified against it.
    pub public_base_url: Option<String>,
    /// `COMMS_TIMEOUT_SECONDS` (default 15, 1..=120): the longest a provider call may take.
    pub timeout: Duration,
}

/// The secrets show as `<redacted>`: settings may end up in a log or a panic message.
impl std::fmt::Debug for CommsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("CommsConfig")
            .field("resend_api_key", &redacted(&self.resend_api_key))
            .field("resend_from_email", &self.resend_from_email)
            .field("resend_api_base", &self.resend_api_base)
            .field(
                "resend_webhook_secret",
                &redacted(&self.resend_webhook_secret),
            )
            .field("twilio_account_sid", &self.twilio_account_sid)
            .field("twilio_auth_token", &redacted(&self.twilio_auth_token))
            .field("twilio_phone_number", &self.twilio_phone_number)
            .field(
                "twilio_messaging_service_sid",
                &self.twilio_messaging_service_sid,
            )
            .field("twilio_api_base", &self.twilio_api_base)
            .field(
                "twilio_webhook_shared_keys",
                &self
                    .twilio_webhook_shared_keys
                    .iter()
                    .map(|(id, _)| (id.as_str(), "<redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("public_base_url", &self.public_base_url)
            .field("timeout", &self.timeout)
            .finish()
    }
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
            twilio_webhook_shared_keys: Vec::new(),
            public_base_url: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
        }
    }
}

impl kernel::ModuleConfig for CommsConfig {
    fn production_problems(&self, _: &Deployment) -> Vec<ConfigError> {
        CommsConfig::production_problems(self)
    }

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
        // Only an address set on purpose: Twilio cannot reach the default `http://localhost`.
        let public_base = kernel::config::public_base_url()?;
        let public_base_url = public_base.is_set.then_some(public_base.url);
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
            twilio_webhook_shared_keys: match var("TWILIO_WEBHOOK_SHARED_KEYS") {
                Some(value) => shared_keys(&value)?,
                None => Vec::new(),
            },
            public_base_url,
            timeout: Duration::from_secs(parse_in_range(
                "COMMS_TIMEOUT_SECONDS",
                DEFAULT_TIMEOUT_SECONDS,
                1..=120,
            )?),
        })
    }
}

/// `<SharedKey id>=<secret>` entries separated by commas (a secret may hold `=`).
fn shared_keys(value: &str) -> Result<Vec<(String, String)>, ConfigError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| match entry.split_once('=') {
            Some((id, secret)) if !id.trim().is_empty() && !secret.trim().is_empty() => {
                Ok((id.trim().to_owned(), secret.trim().to_owned()))
            }
            _ => Err(ConfigError::new(
                "TWILIO_WEBHOOK_SHARED_KEYS",
                "expected <SharedKey id>=<secret>, several separated by commas",
            )),
        })
        .collect()
}

impl CommsConfig {
    /// What is unsafe in production: a webhook signing secret (`RESEND_WEBHOOK_SECRET`, or
    /// `TWILIO_AUTH_TOKEN`, which also signs Twilio's callbacks) published in this repository, with
    /// which anyone could forge delivery events.
    pub fn production_problems(&self) -> Vec<ConfigError> {
        [
            (
                "RESEND_WEBHOOK_SECRET",
                &self.resend_webhook_secret,
                "Resend",
            ),
            ("TWILIO_AUTH_TOKEN", &self.twilio_auth_token, "Twilio"),
        ]
        .into_iter()
        .filter(|(_, value, _)| value.as_deref().is_some_and(is_published_secret))
        .map(|(setting, _, provider)| {
            ConfigError::new(
                setting,
                format!(
                    "is a value published in Keel's repository (anyone could sign {provider}'s \
                     webhooks with it); set the one {provider} shows for this account"
                ),
            )
        })
        .collect()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_refuses_published_webhook_secrets() {
        let config = CommsConfig {
            resend_webhook_secret: Some("whsec_cHJvdmlkZXItc2ltLXJlc2VuZC1ob29r".to_owned()),
            twilio_auth_token: Some("0123456789abcdef0123456789abcdef".to_owned()),
            ..CommsConfig::default()
        };
        let settings: Vec<String> = config
            .production_problems()
            .into_iter()
            .map(|p| p.setting)
            .collect();
        assert_eq!(settings, ["RESEND_WEBHOOK_SECRET", "TWILIO_AUTH_TOKEN"]);
        let own = CommsConfig {
            resend_webhook_secret: Some("whsec_b3duLXNlY3JldC1vZi10aGlzLWFjY291bnQ=".to_owned()),
            twilio_auth_token: Some("f00dfeedf00dfeedf00dfeedf00dfeed".to_owned()),
            ..CommsConfig::default()
        };
        assert!(own.production_problems().is_empty());
        assert!(CommsConfig::default().production_problems().is_empty());
    }

    #[test]
    fn shared_keys_are_ids_with_their_secrets() {
        let keys = shared_keys(" webhooks_sharedkey_a=c2VjcmV0==, webhooks_sharedkey_b = two ,");
        assert_eq!(
            keys.ok(),
            Some(vec![
                ("webhooks_sharedkey_a".to_owned(), "c2VjcmV0==".to_owned()),
                ("webhooks_sharedkey_b".to_owned(), "two".to_owned()),
            ])
        );
        assert_eq!(shared_keys("").ok(), Some(Vec::new()));
        for bad in ["secret-without-id", "=secret", "id=", "a=1,b"] {
            let setting = shared_keys(bad).err().map(|e| e.setting);
            assert_eq!(
                setting.as_deref(),
                Some("TWILIO_WEBHOOK_SHARED_KEYS"),
                "{bad}"
            );
        }
    }

    #[test]
    fn debug_output_hides_the_secrets() {
        let config = CommsConfig {
            resend_api_key: Some("re_hidden".to_owned()),
            resend_webhook_secret: Some("whsec_aGlkZGVu".to_owned()),
            twilio_account_sid: Some("AC123".to_owned()),
            twilio_auth_token: Some("hidden-token".to_owned()),
            twilio_webhook_shared_keys: vec![("webhooks_sharedkey_a".into(), "hidden-key".into())],
            ..CommsConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(shown.contains("webhooks_sharedkey_a"), "{shown}");
        for secret in ["re_hidden", "whsec_aGlkZGVu", "hidden-token", "hidden-key"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("<redacted>") && shown.contains("AC123"),
            "{shown}"
        );
    }
}
