//! The provider clients, each behind a trait, with one real implementation over the outbound
//! `HttpClient` (`kernel::http_client`): Resend for email, Twilio for SMS and calls.

use std::time::Duration;

use kernel::metrics::{CallOutcome, PendingCall};

mod resend;
mod twilio;

pub use resend::Resend;
pub use twilio::Twilio;

/// A provider refused the request, failed, timed out or could not be reached: `message` is what it
/// said (or what went wrong on the way), shown after `<Channel> provider error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub message: String,
    /// The provider's error code when its answer carried one (Twilio's `code`, e.g. `21610`).
    pub code: Option<String>,
    /// The HTTP status of the provider's error answer; `None` when it gave none (no answer, a
    /// timeout, an answer that could not be read).
    pub status: Option<u16>,
}

impl ProviderError {
    pub fn new(message: impl Into<String>) -> Self {
        ProviderError {
            message: message.into(),
            code: None,
            status: None,
        }
    }

    /// A transport failure, in words a deployer can act on.
    fn transport(error: &reqwest::Error, timeout: Duration) -> Self {
        ProviderError::new(kernel::http_client::transport_error(
            error,
            timeout,
            "COMMS_TIMEOUT_SECONDS",
        ))
    }

    /// An error answer: the provider's own `message` field when its body has one, else the status.
    fn from_answer(status: reqwest::StatusCode, body: &[u8]) -> Self {
        let parsed = serde_json::from_slice::<serde_json::Value>(body).ok();
        let message = parsed
            .as_ref()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .filter(|m| !m.is_empty());
        let code = parsed
            .as_ref()
            .and_then(|v| v.get("code"))
            .and_then(|c| match c {
                serde_json::Value::Number(n) => Some(n.to_string()),
                serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
                _ => None,
            });
        ProviderError {
            code,
            status: Some(status.as_u16()),
            ..ProviderError::new(message.unwrap_or_else(|| format!("HTTP {status}")))
        }
    }
}

/// Sends `request` to `provider` and reads the whole answer within the timeout: a success's body
/// parsed as `T`, or the provider's error. Counted in the provider-call metric.
async fn call<T: serde::de::DeserializeOwned>(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<T, ProviderError> {
    let mut call = PendingCall::new(provider);
    let transport = |call: &mut PendingCall, e: reqwest::Error| {
        call.settle(CallOutcome::of_transport(&e));
        ProviderError::transport(&e, timeout)
    };
    let response = match request.timeout(timeout).send().await {
        Ok(response) => response,
        Err(e) => return Err(transport(&mut call, e)),
    };
    let status = response.status();
    let body = match response.bytes().await {
        Ok(body) => body,
        Err(e) => return Err(transport(&mut call, e)),
    };
    if !status.is_success() {
        call.settle(CallOutcome::HttpError);
        return Err(ProviderError::from_answer(status, &body));
    }
    let parsed = serde_json::from_slice(&body)
        .map_err(|e| ProviderError::new(format!("unexpected answer (HTTP {status}): {e}")));
    call.settle(match parsed {
        Ok(_) => CallOutcome::Ok,
        Err(_) => CallOutcome::InvalidResponse,
    });
    parsed
}

/// An email as the provider receives it (addresses already checked).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OutgoingEmail {
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bcc: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reply_to: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<EmailTag>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct EmailTag {
    pub name: String,
    pub value: String,
}

/// Sends email.
#[async_trait::async_trait]
pub trait EmailProvider: Send + Sync {
    /// The provider's id of the accepted email.
    async fn send(&self, email: &OutgoingEmail) -> Result<String, ProviderError>;
}

/// An SMS as the provider receives it.
#[derive(Debug, Clone)]
pub struct OutgoingSms {
    pub to: String,
    /// A number, or `None` to send through the messaging service.
    pub from: Option<String>,
    pub messaging_service_sid: Option<String>,
    pub body: String,
    pub status_callback: Option<String>,
}

/// A voice call as the provider receives it.
#[derive(Debug, Clone)]
pub struct OutgoingCall {
    pub to: String,
    pub from: String,
    pub twiml_url: String,
    pub timeout: u32,
    pub status_callback: Option<String>,
}

/// What the provider answered to an accepted SMS or call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub id: String,
    pub status: String,
}

/// Sends SMS and starts calls.
#[async_trait::async_trait]
pub trait TelephonyProvider: Send + Sync {
    async fn send_sms(&self, sms: &OutgoingSms) -> Result<Receipt, ProviderError>;
    async fn make_call(&self, call: &OutgoingCall) -> Result<Receipt, ProviderError>;
}
