//! Outgoing webhook deliveries (Stripe events, Resend events, Twilio status callbacks), their
//! log, and the knobs for Resend and Twilio callbacks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::journal::Provider;

/// How Resend events and Twilio status callbacks are delivered. `Default` is a correct delivery.
/// Fields apply to both providers unless they say otherwise. As JSON (control API) the delay is
/// `delay_ms`, and `wrong_token` is accepted for `wrong_secret`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CallbackOptions {
    /// Deliver here instead of the configured Resend webhook URL or the message's or call's
    /// `StatusCallback` (Twilio signs the URL it actually calls).
    pub url: Option<String>,
    /// Pause before each delivery; in background lifecycles it replaces
    /// [`crate::SimConfig::callback_delay`].
    #[serde(rename = "delay_ms", with = "millis")]
    pub delay: Option<Duration>,
    /// Deliver each event or callback twice: same id, same body, same signature.
    pub duplicate: bool,
    /// Background lifecycles post their events last first (e.g. `delivered` before `sent`).
    pub out_of_order: bool,
    /// Sign with the wrong key: another `whsec_` secret (Resend), another auth token (Twilio).
    #[serde(alias = "wrong_token")]
    pub wrong_secret: bool,
    /// Resend only: sign with a `svix-timestamp` 10 minutes old, outside Svix's 5-minute tolerance.
    pub stale: bool,
    /// Resend only: send two space-separated `v1,` values, one made with another secret, then the
    /// right one (a valid delivery, as during a secret rotation).
    pub two_signatures: bool,
    /// Send no signature header (`svix-signature`, `X-Twilio-Signature`).
    pub no_signature: bool,
    /// Change the body after signing it (Resend: the subject; Twilio: the `To` number).
    pub tamper: bool,
    /// Resend only: the `bounce.type` of an `email.bounced` event (default `Permanent`; Resend
    /// also reports `Transient` and `Undetermined`).
    pub bounce_type: Option<String>,
    /// Twilio only: the `ErrorCode` of a `failed` or `undelivered` message callback (default
    /// the message's own, else 30003; 21610 is an unsubscribed recipient).
    pub error_code: Option<String>,
}

/// `Option<Duration>` as a number of milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(delay: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        delay
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// One webhook POST the simulator made, with the receiver's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    pub provider: Provider,
    pub url: String,
    /// Stripe event id, the Resend email id the event is about (the Svix message id is the
    /// `svix-id` header), or the Twilio sid the callback is about.
    pub id: Option<String>,
    /// Stripe or Resend event type, or the Twilio status.
    pub kind: Option<String>,
    /// The request headers that matter (signature, content type).
    pub headers: Vec<(String, String)>,
    /// The exact body sent.
    pub body: String,
    /// The receiver's HTTP status; `None` when it could not be reached.
    pub status: Option<u16>,
    pub response: String,
    pub error: Option<String>,
}

impl Delivery {
    /// The value of a header that was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the receiver answered 2xx.
    pub fn accepted(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// POSTs `body` to `url` with `headers` and returns the delivery record.
pub(crate) async fn post(
    client: &reqwest::Client,
    provider: Provider,
    url: &str,
    headers: Vec<(String, String)>,
    body: String,
    id: Option<String>,
    kind: Option<String>,
) -> Delivery {
    let mut request = client.post(url).body(body.clone());
    for (k, v) in &headers {
        request = request.header(k.as_str(), v.as_str());
    }
    let (status, response, error) = match request.send().await {
        Ok(res) => {
            let status = res.status().as_u16();
            match res.text().await {
                Ok(text) => (Some(status), text, None),
                Err(e) => (Some(status), String::new(), Some(e.to_string())),
            }
        }
        Err(e) => (None, String::new(), Some(e.to_string())),
    };
    Delivery {
        provider,
        url: url.to_owned(),
        id,
        kind,
        headers,
        body,
        status,
        response,
        error,
    }
}
