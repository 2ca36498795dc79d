//! Outgoing webhook deliveries (Stripe events, Twilio status callbacks) and their log.

use serde::{Deserialize, Serialize};

use crate::journal::Provider;

/// One webhook POST the simulator made, with the receiver's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    pub provider: Provider,
    pub url: String,
    /// Stripe event id, or the Twilio sid the callback is about.
    pub id: Option<String>,
    /// Stripe event type, or the Twilio status.
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
