//! The Stripe calls Keel makes: customers, checkout sessions, billing portal sessions, refunds and
//! cancelling a subscription at the end of its period. Requests are form-encoded with Stripe's bracketed keys
//! (`line_items[0][price]`), carry the secret key as a bearer token and an `Idempotency-Key`, and
//! are bounded by the payment timeout; answers are JSON.

use std::fmt;
use std::time::Duration;

use kernel::http_client::HttpClient;
use kernel::metrics::{CallOutcome, PendingCall};
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The setting named when a call runs out of time.
const TIMEOUT_SETTING: &str = "PAYMENT_TIMEOUT_SECONDS";

/// A Stripe call that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StripeError {
    /// Stripe's authentication errors (401): the key is invalid or revoked.
    #[error("{0}")]
    Authentication(String),
    /// invalid_request_error and card_error (4xx other than 401): Stripe's user-facing message.
    #[error("{0}")]
    InvalidRequest(String),
    /// Anything else: Stripe 5xx/api_error, rate limits, network failures, timeouts (the message
    /// says which).
    #[error("{0}")]
    Upstream(String),
}

impl StripeError {
    /// A failure before any answer: the time limit, an unreachable host, or the error chain.
    fn transport(error: &reqwest::Error, timeout: Duration) -> Self {
        StripeError::Upstream(kernel::http_client::transport_error(
            error,
            timeout,
            TIMEOUT_SETTING,
        ))
    }

    /// An error answer, classified by HTTP status and Stripe's `error.type`; the message is
    /// Stripe's `error.message` when there is one.
    fn from_answer(status: StatusCode, body: &[u8]) -> Self {
        let error = serde_json::from_slice::<ErrorBody>(body)
            .map(|b| b.error)
            .unwrap_or_default();
        let kind = error.kind.as_deref();
        let message = error.message.filter(|m| !m.trim().is_empty());
        if status == StatusCode::UNAUTHORIZED || kind == Some("authentication_error") {
            StripeError::Authentication(
                message.unwrap_or_else(|| format!("Stripe refused the secret key (HTTP {status})")),
            )
        } else if matches!(status.as_u16(), 400 | 402 | 404 | 409)
            && matches!(
                kind,
                Some("invalid_request_error" | "card_error" | "idempotency_error")
            )
        {
            StripeError::InvalidRequest(
                message.unwrap_or_else(|| format!("Stripe refused the request (HTTP {status})")),
            )
        } else {
            StripeError::Upstream(
                message.unwrap_or_else(|| format!("Stripe answered HTTP {status}")),
            )
        }
    }

    /// A success whose body is not what the call returns.
    fn unexpected(status: StatusCode, detail: impl fmt::Display) -> Self {
        StripeError::Upstream(format!(
            "unexpected answer from Stripe (HTTP {status}): {detail}"
        ))
    }
}

/// `{"error": {"type", "code", "message", "param", ...}}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Default, Deserialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

/// A new checkout session.
#[derive(Debug, Clone)]
pub struct CheckoutParams {
    /// `payment` or `subscription`.
    pub mode: String,
    pub price_id: String,
    pub quantity: i64,
    /// May contain Stripe's literal `{CHECKOUT_SESSION_ID}` placeholder.
    pub success_url: String,
    pub cancel_url: String,
    /// An existing Stripe customer id.
    pub customer: Option<String>,
    pub client_reference_id: Option<String>,
    /// Written to the session's metadata (and, in subscription mode, the subscription's).
    pub user_id: Option<i64>,
}

/// The session Stripe created: the customer is sent to `url`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckoutSession {
    pub id: String,
    pub url: String,
}

/// A billing portal session Stripe created: the customer is sent to `url`, and Stripe's portal
/// sends them back to `return_url`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PortalSession {
    pub id: String,
    pub url: String,
    #[serde(default)]
    pub return_url: Option<String>,
    #[serde(default)]
    pub created: Option<i64>,
}

/// A refund to ask for: of a payment intent (preferred when both are given) or of a charge.
#[derive(Debug, Clone, Default)]
pub struct RefundParams {
    pub payment_intent: Option<String>,
    pub charge: Option<String>,
    /// In the smallest currency unit; `None` refunds what is left.
    pub amount: Option<i64>,
    /// One of Stripe's reasons: `duplicate`, `fraudulent`, `requested_by_customer`.
    pub reason: Option<String>,
    /// Sent as `metadata[<key>]=<value>`.
    pub metadata: Vec<(String, String)>,
}

/// The refund Stripe created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub id: String,
    pub amount: i64,
    pub currency: String,
    /// `pending`, `requires_action`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    pub charge: Option<String>,
    pub payment_intent: Option<String>,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct RefundAnswer {
    id: String,
    amount: i64,
    currency: String,
    /// Documented as nullable: a refund without a status has not completed yet.
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    charge: Option<String>,
    #[serde(default)]
    payment_intent: Option<String>,
}

/// A form body in order, keys written as Stripe spells them (`metadata[user_id]`).
#[derive(Default)]
struct Form(Vec<(String, String)>);

impl Form {
    fn add(&mut self, key: impl Into<String>, value: impl ToString) {
        self.0.push((key.into(), value.to_string()));
    }

    fn add_opt(&mut self, key: impl Into<String>, value: Option<impl ToString>) {
        if let Some(value) = value {
            self.add(key, value);
        }
    }
}

/// Stripe's REST API on the outbound HTTP client.
#[derive(Clone)]
pub struct Stripe {
    http: HttpClient,
    /// `STRIPE_API_BASE` without a trailing slash (paths start with `/v1`).
    base: String,
    secret_key: String,
    timeout: Duration,
}

impl fmt::Debug for Stripe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stripe")
            .field("base", &self.base)
            .field("secret_key", &"<redacted>")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Stripe {
    pub fn new(http: HttpClient, base: &str, secret_key: &str, timeout: Duration) -> Self {
        Stripe {
            http,
            base: base.trim_end_matches('/').to_owned(),
            secret_key: secret_key.to_owned(),
            timeout,
        }
    }

    /// POST /v1/customers with `email` (if any) and `metadata[user_id]` (if any). Returns the
    /// customer id.
    pub async fn create_customer(
        &self,
        email: Option<&str>,
        user_id: Option<i64>,
        idempotency_key: &str,
    ) -> Result<String, StripeError> {
        let mut form = Form::default();
        form.add_opt("email", email);
        form.add_opt("metadata[user_id]", user_id);
        let created: Created = self.post(&["customers"], &form, idempotency_key).await?;
        Ok(created.id)
    }

    /// POST /v1/checkout/sessions: `mode`, `line_items[0][price]`, `line_items[0][quantity]`,
    /// `success_url`, `cancel_url`, `customer` (if any), `client_reference_id` (if any),
    /// `metadata[user_id]` (if any), and for `mode=subscription` also
    /// `subscription_data[metadata][user_id]` (if any).
    pub async fn create_checkout_session(
        &self,
        params: &CheckoutParams,
        idempotency_key: &str,
    ) -> Result<CheckoutSession, StripeError> {
        let mut form = Form::default();
        form.add("mode", &params.mode);
        form.add("line_items[0][price]", &params.price_id);
        form.add("line_items[0][quantity]", params.quantity);
        form.add("success_url", &params.success_url);
        form.add("cancel_url", &params.cancel_url);
        form.add_opt("customer", params.customer.as_ref());
        form.add_opt("client_reference_id", params.client_reference_id.as_ref());
        form.add_opt("metadata[user_id]", params.user_id);
        if params.mode == "subscription" {
            form.add_opt("subscription_data[metadata][user_id]", params.user_id);
        }
        self.post(&["checkout", "sessions"], &form, idempotency_key)
            .await
    }

    /// POST /v1/billing_portal/sessions: customer, return_url, and configuration (a `bpc_...`
    /// id; without one Stripe uses the account's default portal configuration).
    pub async fn create_portal_session(
        &self,
        customer: &str,
        return_url: &str,
        configuration: Option<&str>,
        idempotency_key: &str,
    ) -> Result<PortalSession, StripeError> {
        let mut form = Form::default();
        form.add("customer", customer);
        form.add("return_url", return_url);
        form.add_opt("configuration", configuration);
        self.post(&["billing_portal", "sessions"], &form, idempotency_key)
            .await
    }

    /// POST /v1/refunds: payment_intent (or, without one, charge), amount (if any), reason (if
    /// any), and the metadata pairs given.
    pub async fn create_refund(
        &self,
        params: &RefundParams,
        idempotency_key: &str,
    ) -> Result<Refund, StripeError> {
        let mut form = Form::default();
        match (&params.payment_intent, &params.charge) {
            (Some(payment_intent), _) => form.add("payment_intent", payment_intent),
            (None, Some(charge)) => form.add("charge", charge),
            (None, None) => {}
        }
        form.add_opt("amount", params.amount);
        form.add_opt("reason", params.reason.as_ref());
        for (key, value) in &params.metadata {
            form.add(format!("metadata[{key}]"), value);
        }
        let refund: RefundAnswer = self.post(&["refunds"], &form, idempotency_key).await?;
        Ok(Refund {
            id: refund.id,
            amount: refund.amount,
            currency: refund.currency,
            status: refund.status.unwrap_or_else(|| "pending".to_owned()),
            charge: refund.charge,
            payment_intent: refund.payment_intent,
        })
    }

    /// POST /v1/subscriptions/{id} with cancel_at_period_end=true. Returns the subscription
    /// object as JSON (still `active`, `cancel_at_period_end` true).
    pub async fn cancel_at_period_end(
        &self,
        subscription_id: &str,
        idempotency_key: &str,
    ) -> Result<Value, StripeError> {
        let mut form = Form::default();
        form.add("cancel_at_period_end", true);
        let subscription: Value = self
            .post(&["subscriptions", subscription_id], &form, idempotency_key)
            .await?;
        if !subscription.get("id").is_some_and(Value::is_string) {
            return Err(StripeError::unexpected(
                StatusCode::OK,
                "not a subscription object",
            ));
        }
        Ok(subscription)
    }

    /// `<base>/v1/<segments...>`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Result<reqwest::Url, StripeError> {
        let invalid = |detail: &dyn fmt::Display| {
            StripeError::Upstream(format!("invalid STRIPE_API_BASE {:?}: {detail}", self.base))
        };
        let mut url = reqwest::Url::parse(&self.base).map_err(|e| invalid(&e))?;
        url.path_segments_mut()
            .map_err(|()| invalid(&"not a base URL"))?
            .pop_if_empty()
            .push("v1")
            .extend(segments);
        Ok(url)
    }

    /// POSTs `form` and reads the whole answer within the timeout: a success's body parsed as
    /// `T`, or Stripe's error.
    async fn post<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        form: &Form,
        idempotency_key: &str,
    ) -> Result<T, StripeError> {
        let url = self.url(segments)?;
        let body = serde_urlencoded::to_string(&form.0)
            .map_err(|e| StripeError::Upstream(format!("cannot encode the request: {e}")))?;
        let mut call = PendingCall::new("stripe");
        let transport = |call: &mut PendingCall, e: reqwest::Error| {
            call.settle(CallOutcome::of_transport(&e));
            StripeError::transport(&e, self.timeout)
        };
        let sent = self
            .http
            .get()
            .post(url)
            .bearer_auth(&self.secret_key)
            .header("Idempotency-Key", idempotency_key)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .timeout(self.timeout)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => return Err(transport(&mut call, e)),
        };
        let status = response.status();
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes,
            Err(e) => return Err(transport(&mut call, e)),
        };
        if !status.is_success() {
            call.settle(CallOutcome::HttpError);
            return Err(StripeError::from_answer(status, &bytes));
        }
        let parsed = serde_json::from_slice(&bytes).map_err(|e| StripeError::unexpected(status, e));
        call.settle(match parsed {
            Ok(_) => CallOutcome::Ok,
            Err(_) => CallOutcome::InvalidResponse,
        });
        parsed
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn client(base: &str, secret_key: &str) -> Stripe {
        let http = kernel::http_client::HttpClientSettings::default()
            .build()
            .unwrap();
        Stripe::new(http, base, secret_key, Duration::from_secs(1))
    }

    fn classify(status: u16, body: &str) -> StripeError {
        StripeError::from_answer(StatusCode::from_u16(status).unwrap(), body.as_bytes())
    }

    #[test]
    fn errors_are_classified_by_status_and_type() {
        assert_eq!(
            classify(
                401,
                r#"{"error":{"message":"Invalid API Key provided: sk_test_****1234","type":"invalid_request_error"}}"#
            ),
            StripeError::Authentication("Invalid API Key provided: sk_test_****1234".into())
        );
        assert_eq!(
            classify(401, "not json"),
            StripeError::Authentication(
                "Stripe refused the secret key (HTTP 401 Unauthorized)".into()
            )
        );
        assert_eq!(
            classify(
                403,
                r#"{"error":{"message":"Expired key","type":"authentication_error"}}"#
            ),
            StripeError::Authentication("Expired key".into())
        );
        for (status, kind) in [
            (400, "invalid_request_error"),
            (402, "card_error"),
            (404, "invalid_request_error"),
            (409, "idempotency_error"),
            (400, "idempotency_error"),
        ] {
            let body = format!(r#"{{"error":{{"message":"Said so","type":"{kind}","code":"x"}}}}"#);
            assert_eq!(
                classify(status, &body),
                StripeError::InvalidRequest("Said so".into()),
                "{status} {kind}"
            );
        }
        assert_eq!(
            classify(
                429,
                r#"{"error":{"message":"Request rate limit exceeded.","type":"invalid_request_error","code":"rate_limit"}}"#
            ),
            StripeError::Upstream("Request rate limit exceeded.".into())
        );
        assert_eq!(
            classify(
                500,
                r#"{"error":{"message":"An unknown error occurred","type":"api_error"}}"#
            ),
            StripeError::Upstream("An unknown error occurred".into())
        );
        assert_eq!(
            classify(400, r#"{"error":{"message":"Odd","type":"api_error"}}"#),
            StripeError::Upstream("Odd".into())
        );
        assert_eq!(
            classify(502, "<html>Bad gateway</html>"),
            StripeError::Upstream("Stripe answered HTTP 502 Bad Gateway".into())
        );
        assert_eq!(
            classify(400, r#"{"error":{"type":"invalid_request_error"}}"#),
            StripeError::InvalidRequest("Stripe refused the request (HTTP 400 Bad Request)".into())
        );
    }

    #[test]
    fn the_url_keeps_the_base_path_and_encodes_ids() {
        let stripe = client("http://127.0.0.1:9/stripe/", "sk_test_x");
        assert_eq!(
            stripe
                .url(&["subscriptions", "sub_1/../x?y"])
                .map(String::from)
                .ok()
                .as_deref(),
            Some("http://127.0.0.1:9/stripe/v1/subscriptions/sub_1%2F..%2Fx%3Fy")
        );
        let plain = client("https://api.stripe.com", "sk_test_x");
        assert_eq!(
            plain
                .url(&["checkout", "sessions"])
                .map(String::from)
                .ok()
                .as_deref(),
            Some("https://api.stripe.com/v1/checkout/sessions")
        );
        let broken = client("not a url", "sk_test_x");
        assert!(matches!(
            broken.url(&["refunds"]),
            Err(StripeError::Upstream(m)) if m.starts_with("invalid STRIPE_API_BASE")
        ));
    }

    #[test]
    fn debug_hides_the_secret_key() {
        let stripe = client("https://api.stripe.com", "sk_test_secret");
        assert!(!format!("{stripe:?}").contains("sk_test_secret"));
    }
}
