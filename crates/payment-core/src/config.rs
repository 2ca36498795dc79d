//! Settings of the payment module.

use std::collections::BTreeMap;
use std::time::Duration;

use kernel::ConfigError;
use kernel::config::{is_published_secret, parse_in_range, var};
use kernel::module::Deployment;

pub const DEFAULT_STRIPE_API_BASE: &str = "https://api.stripe.com";
pub const DEFAULT_PUBLIC_BASE_URL: &str = "http://localhost:8000";

#[derive(Clone, PartialEq, Eq)]
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
    /// `PAYMENT_PORTAL_RETURN_URL`: where Stripe's billing portal sends the customer back when the
    /// request names no URL (else the built-in `/payment/return` page). Its origin is also one a
    /// request's `return_url` may name.
    pub portal_return_url: Option<String>,
    /// `PAYMENT_PORTAL_CONFIGURATION` (`bpc_...`): the Stripe portal configuration; without it,
    /// the account's default one.
    pub portal_configuration: Option<String>,
    /// `PUBLIC_BASE_URL` (default `http://localhost:<PORT>`): the built-in pages' address.
    pub public_base_url: String,
    /// `PAYMENT_TIMEOUT_SECONDS` (default 30): the longest a Stripe call may take.
    pub timeout: Duration,
    /// `PAYMENT_PLANS` (`price_monthly=pro,price_yearly=pro`): the plan each Stripe price (or
    /// subscription `plan_name`) gives. A subscription whose price is not listed gives its
    /// `plan_name` (the price's nickname, lookup key or id).
    pub plans: BTreeMap<String, String>,
}

/// The secrets show as `<redacted>`: settings may end up in a log or a panic message.
impl std::fmt::Debug for PaymentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("PaymentConfig")
            .field("secret_key", &redacted(&self.secret_key))
            .field("webhook_secret", &redacted(&self.webhook_secret))
            .field("api_base", &self.api_base)
            .field("success_url", &self.success_url)
            .field("cancel_url", &self.cancel_url)
            .field("portal_return_url", &self.portal_return_url)
            .field("portal_configuration", &self.portal_configuration)
            .field("public_base_url", &self.public_base_url)
            .field("timeout", &self.timeout)
            .field("plans", &self.plans)
            .finish()
    }
}

impl Default for PaymentConfig {
    fn default() -> Self {
        PaymentConfig {
            secret_key: None,
            webhook_secret: None,
            api_base: DEFAULT_STRIPE_API_BASE.to_owned(),
            success_url: None,
            cancel_url: None,
            portal_return_url: None,
            portal_configuration: None,
            public_base_url: DEFAULT_PUBLIC_BASE_URL.to_owned(),
            timeout: Duration::from_secs(30),
            plans: BTreeMap::new(),
        }
    }
}

impl PaymentConfig {
    /// What is unsafe in production: a `STRIPE_WEBHOOK_SECRET` published in this repository, with
    /// which anyone could sign webhook events (payments marked paid, refunds, disputes).
    pub fn production_problems(&self) -> Vec<ConfigError> {
        match &self.webhook_secret {
            Some(secret) if is_published_secret(secret) => vec![ConfigError::new(
                "STRIPE_WEBHOOK_SECRET",
                "is a value published in Keel's repository (anyone could sign Stripe's webhooks \
                 with it); set the signing secret Stripe shows for this endpoint",
            )],
            _ => Vec::new(),
        }
    }

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

/// Reads `PAYMENT_PLANS`: `<price id or plan_name>=<plan>` pairs separated by commas. A plan name
/// is 1 to 64 ASCII letters, digits, `_` or `-` (the AI module's `AI_DAILY_TOKENS_<PLAN>` names
/// it); a price listed twice is refused.
pub fn parse_plans(raw: &str) -> Result<BTreeMap<String, String>, String> {
    let mut plans = BTreeMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((price, plan)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not <price>=<plan>"));
        };
        let (price, plan) = (price.trim(), plan.trim());
        if price.is_empty() {
            return Err(format!("{entry:?} names no price"));
        }
        let valid = (1..=64).contains(&plan.len())
            && plan
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "{plan:?} (for {price}) is not a plan name: 1 to 64 ASCII letters, digits, _ or -"
            ));
        }
        if plans.insert(price.to_owned(), plan.to_owned()).is_some() {
            return Err(format!("{price} is listed twice"));
        }
    }
    Ok(plans)
}

/// Reads `PAYMENT_PORTAL_CONFIGURATION`: a Stripe portal configuration id, `bpc_` then letters,
/// digits or `_` (at most 255 characters), or nothing.
pub fn parse_portal_configuration(raw: Option<String>) -> Result<Option<String>, String> {
    match raw {
        Some(id)
            if !id.starts_with("bpc_")
                || id.len() > 255
                || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            Err(format!(
                "{id:?} is not a Stripe portal configuration id (bpc_...)"
            ))
        }
        other => Ok(other),
    }
}

impl kernel::ModuleConfig for PaymentConfig {
    fn production_problems(&self, _: &Deployment) -> Vec<ConfigError> {
        PaymentConfig::production_problems(self)
    }

    fn from_env() -> Result<Self, ConfigError> {
        Ok(PaymentConfig {
            secret_key: var("STRIPE_SECRET_KEY"),
            webhook_secret: var("STRIPE_WEBHOOK_SECRET"),
            api_base: url("STRIPE_API_BASE", Some(DEFAULT_STRIPE_API_BASE))?
                .unwrap_or_else(|| DEFAULT_STRIPE_API_BASE.to_owned()),
            success_url: var("PAYMENT_SUCCESS_URL"),
            cancel_url: var("PAYMENT_CANCEL_URL"),
            portal_return_url: url("PAYMENT_PORTAL_RETURN_URL", None)?,
            portal_configuration: parse_portal_configuration(var("PAYMENT_PORTAL_CONFIGURATION"))
                .map_err(|e| {
                ConfigError::new("PAYMENT_PORTAL_CONFIGURATION", e)
            })?,
            public_base_url: kernel::config::public_base_url()?.url,
            timeout: Duration::from_secs(parse_in_range("PAYMENT_TIMEOUT_SECONDS", 30, 1..=120)?),
            plans: match var("PAYMENT_PLANS") {
                None => BTreeMap::new(),
                Some(raw) => parse_plans(&raw).map_err(|e| ConfigError::new("PAYMENT_PLANS", e))?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_refuses_a_published_webhook_secret() {
        for published in ["whsec_provider_sim", "whsec_bench"] {
            let config = PaymentConfig {
                webhook_secret: Some(published.to_owned()),
                ..PaymentConfig::default()
            };
            let problems = config.production_problems();
            assert_eq!(problems.len(), 1, "{published}");
            assert_eq!(problems[0].setting, "STRIPE_WEBHOOK_SECRET");
        }
        let own = PaymentConfig {
            secret_key: Some("sk_live_own".to_owned()),
            webhook_secret: Some("whsec_0wn5ecret0f7h1sEndp01nt".to_owned()),
            ..PaymentConfig::default()
        };
        assert!(own.production_problems().is_empty());
        // No secret at all: every delivery is refused (400), which is safe.
        assert!(PaymentConfig::default().production_problems().is_empty());
    }

    #[test]
    fn plans_map_prices_to_plan_names() {
        let plans = parse_plans(" price_monthly=pro, price_yearly = pro ,Team plan=team-2,")
            .unwrap_or_default();
        assert_eq!(plans.len(), 3);
        assert_eq!(plans["price_monthly"], "pro");
        assert_eq!(plans["price_yearly"], "pro");
        assert_eq!(plans["Team plan"], "team-2");
        assert_eq!(parse_plans(""), Ok(BTreeMap::new()));
        for bad in [
            "price_monthly",
            "=pro",
            "price_monthly=",
            "price_monthly=pro plan",
            "price_monthly=pro,price_monthly=max",
            &format!("p={}", "x".repeat(65)),
        ] {
            assert!(parse_plans(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_portal_configuration_is_a_stripe_id() {
        assert_eq!(parse_portal_configuration(None), Ok(None));
        assert_eq!(
            parse_portal_configuration(Some("bpc_1Abc".into())),
            Ok(Some("bpc_1Abc".to_owned()))
        );
        for bad in [
            "bps_1Abc",
            "1Abc",
            "bpc_a b",
            "bpc_a&x=1",
            &format!("bpc_{}", "a".repeat(252)),
        ] {
            assert!(
                parse_portal_configuration(Some(bad.to_owned())).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn debug_output_hides_the_secrets() {
        let config = PaymentConfig {
            secret_key: Some("sk_live_hidden".to_owned()),
            webhook_secret: Some("whsec_hidden".to_owned()),
            ..PaymentConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("hidden"), "{shown}");
        assert!(shown.contains("<redacted>") && shown.contains("api.stripe.com"));
    }
}
