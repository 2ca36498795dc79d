//! Billing self-service: a Stripe billing portal session for the caller's customer, and the
//! caller's invoices as Stripe's events told them.

use kernel::FieldError;
use kernel::pagination::Page;

use super::{Caller, PaymentServiceImpl, check_status, idempotency_key};
use crate::config::PaymentConfig;
use crate::error::PaymentError;
use crate::store::{self, InvoiceRow};
use crate::webhook::INVOICE_STATUSES;

/// The longest `return_url` taken.
pub const MAX_RETURN_URL_CHARS: usize = 2048;

/// The billing portal session Stripe opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Portal {
    /// Stripe's session id (`bps_...`).
    pub id: String,
    /// Where to send the customer: Stripe's portal, valid for a short time.
    pub url: String,
    /// Where the portal sends them back.
    pub return_url: String,
}

/// The origins a requested `return_url` may name: `PUBLIC_BASE_URL`'s and
/// `PAYMENT_PORTAL_RETURN_URL`'s, each with the setting that allows it.
fn allowed_origins(config: &PaymentConfig) -> Vec<(reqwest::Url, &'static str)> {
    [
        (Some(config.public_base_url.as_str()), "PUBLIC_BASE_URL"),
        (
            config.portal_return_url.as_deref(),
            "PAYMENT_PORTAL_RETURN_URL",
        ),
    ]
    .into_iter()
    .filter_map(|(url, setting)| Some((reqwest::Url::parse(url?).ok()?, setting)))
    .collect()
}

/// Where the portal returns: the request's `return_url` when it is on an allowed origin (never
/// elsewhere: the portal would otherwise send a signed-in customer to any site a link names),
/// else `PAYMENT_PORTAL_RETURN_URL`, else the built-in `/payment/return` page.
pub fn portal_return_url(
    config: &PaymentConfig,
    requested: Option<&str>,
) -> Result<String, PaymentError> {
    let Some(requested) = requested else {
        return Ok(config.portal_return_url.clone().unwrap_or_else(|| {
            format!(
                "{}/payment/return",
                config.public_base_url.trim_end_matches('/')
            )
        }));
    };
    let origins = allowed_origins(config);
    let refuse = || {
        let named: Vec<String> = origins
            .iter()
            .map(|(url, setting)| format!("{} ({setting})", url.origin().ascii_serialization()))
            .collect();
        PaymentError::Invalid(FieldError::new(
            "return_url",
            format!(
                "return_url must be an absolute http(s) URL of at most {MAX_RETURN_URL_CHARS} \
                 characters on {}",
                named.join(" or ")
            ),
        ))
    };
    if requested.chars().count() > MAX_RETURN_URL_CHARS
        || requested.chars().any(char::is_control)
        || requested.trim() != requested
    {
        return Err(refuse());
    }
    let url = reqwest::Url::parse(requested).map_err(|_| refuse())?;
    let allowed = matches!(url.scheme(), "http" | "https")
        && url.username().is_empty()
        && url.password().is_none()
        && origins.iter().any(|(o, _)| o.origin() == url.origin());
    if allowed {
        Ok(url.into())
    } else {
        Err(refuse())
    }
}

impl PaymentServiceImpl {
    /// [`super::PaymentService::portal`].
    pub(super) async fn open_portal(
        &self,
        caller: Caller,
        return_url: Option<&str>,
    ) -> Result<Portal, PaymentError> {
        let return_url = portal_return_url(&self.config, return_url)?;
        let stripe = self.stripe()?;
        let customer = match caller.user() {
            Some(user) => {
                let mut pooled = self.pool.read().await?;
                store::customer_of_user(&mut pooled.conn(), user).await?
            }
            None => None,
        };
        let Some(customer) = customer else {
            return Err(PaymentError::Conflict(NO_CUSTOMER.to_owned()));
        };
        let session = stripe
            .create_portal_session(
                &customer,
                &return_url,
                self.config.portal_configuration.as_deref(),
                &idempotency_key(),
            )
            .await?;
        Ok(Portal {
            id: session.id,
            url: session.url,
            return_url: session.return_url.unwrap_or(return_url),
        })
    }

    /// [`super::PaymentService::invoices`].
    pub(super) async fn list_invoices(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<(Vec<InvoiceRow>, i64), PaymentError> {
        check_status(status, &INVOICE_STATUSES)?;
        let mut pooled = self.pool.read().await?;
        Ok(store::list_invoices(
            &mut pooled.conn(),
            caller.user(),
            status,
            page.offset(),
            page.limit(),
        )
        .await?)
    }
}

/// The 409 of a caller without a Stripe customer.
pub const NO_CUSTOMER: &str =
    "No billing account yet: the billing portal opens once a first checkout has created one";

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PaymentConfig {
        PaymentConfig {
            public_base_url: "https://api.example.com".to_owned(),
            ..PaymentConfig::default()
        }
    }

    #[test]
    fn the_return_url_defaults_to_the_setting_then_the_built_in_page() {
        assert_eq!(
            portal_return_url(&config(), None).ok().as_deref(),
            Some("https://api.example.com/payment/return")
        );
        let set = PaymentConfig {
            portal_return_url: Some("https://app.example.com/billing".to_owned()),
            ..config()
        };
        assert_eq!(
            portal_return_url(&set, None).ok().as_deref(),
            Some("https://app.example.com/billing")
        );
        // The setting's origin may be named too; PUBLIC_BASE_URL's still may.
        for ok in [
            "https://app.example.com/account?tab=billing#top",
            "https://api.example.com/",
            "https://API.example.com:443/x",
        ] {
            assert!(portal_return_url(&set, Some(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_return_url_elsewhere_is_refused() {
        for bad in [
            "",
            "/relative",
            "//evil.example/",
            "https://evil.example/",
            "https://api.example.com.evil.example/",
            "https://api.example.com@evil.example/",
            "https://user:pw@api.example.com/",
            "http://api.example.com/",
            "https://api.example.com:8443/",
            "javascript:alert(1)",
            "https://api.example.com/\u{0}",
            "https://api.example.com/\n",
            " https://api.example.com/",
            &format!(
                "https://api.example.com/{}",
                "a".repeat(MAX_RETURN_URL_CHARS)
            ),
        ] {
            let refused = portal_return_url(&config(), Some(bad));
            assert!(
                matches!(&refused, Err(PaymentError::Invalid(f)) if f.field == "return_url"
                    && f.message.contains("https://api.example.com (PUBLIC_BASE_URL)")),
                "{bad:?}: {refused:?}"
            );
        }
    }
}
