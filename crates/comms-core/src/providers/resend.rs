//! Resend's `POST /emails`: JSON, a bearer key.

use std::time::Duration;

use super::{EmailProvider, OutgoingEmail, ProviderError};

pub struct Resend {
    http: reqwest::Client,
    /// `RESEND_API_BASE` without a trailing slash.
    base: String,
    api_key: String,
    timeout: Duration,
}

impl Resend {
    pub fn new(http: reqwest::Client, base: &str, api_key: &str, timeout: Duration) -> Self {
        Resend {
            http,
            base: base.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            timeout,
        }
    }
}

#[derive(serde::Deserialize)]
struct Sent {
    id: String,
}

#[async_trait::async_trait]
impl EmailProvider for Resend {
    async fn send(&self, email: &OutgoingEmail) -> Result<String, ProviderError> {
        let request = self
            .http
            .post(format!("{}/emails", self.base))
            .bearer_auth(&self.api_key)
            .json(email);
        let sent: Sent = super::call("resend", request, self.timeout).await?;
        Ok(sent.id)
    }
}
