//! Twilio's Messages and Calls resources: form-encoded (so `+` travels as `%2B`), basic auth.

use std::time::Duration;

use kernel::http_client::HttpClient;

use super::{OutgoingCall, OutgoingSms, ProviderError, Receipt, TelephonyProvider};

const API_VERSION: &str = "2010-04-01";

pub struct Twilio {
    http: HttpClient,
    /// `TWILIO_API_BASE` without a trailing slash.
    base: String,
    account_sid: String,
    auth_token: String,
    timeout: Duration,
}

impl Twilio {
    pub fn new(
        http: HttpClient,
        base: &str,
        account_sid: &str,
        auth_token: &str,
        timeout: Duration,
    ) -> Self {
        Twilio {
            http,
            base: base.trim_end_matches('/').to_owned(),
            account_sid: account_sid.to_owned(),
            auth_token: auth_token.to_owned(),
            timeout,
        }
    }

    async fn create(
        &self,
        resource: &str,
        form: &[(&str, &str)],
    ) -> Result<Receipt, ProviderError> {
        let url = format!(
            "{}/{API_VERSION}/Accounts/{}/{resource}.json",
            self.base, self.account_sid
        );
        let request = self
            .http
            .get()
            .post(url)
            .basic_auth(&self.account_sid, Some(&self.auth_token))
            .form(form);
        let created: Created = super::call("twilio", request, self.timeout).await?;
        Ok(Receipt {
            id: created.sid,
            status: created.status,
        })
    }
}

#[derive(serde::Deserialize)]
struct Created {
    sid: String,
    status: String,
}

#[async_trait::async_trait]
impl TelephonyProvider for Twilio {
    async fn send_sms(&self, sms: &OutgoingSms) -> Result<Receipt, ProviderError> {
        let mut form = vec![("To", sms.to.as_str()), ("Body", sms.body.as_str())];
        match (&sms.from, &sms.messaging_service_sid) {
            (Some(from), _) => form.push(("From", from)),
            (None, Some(service)) => form.push(("MessagingServiceSid", service)),
            (None, None) => {}
        }
        if let Some(url) = &sms.status_callback {
            form.push(("StatusCallback", url));
        }
        self.create("Messages", &form).await
    }

    async fn make_call(&self, call: &OutgoingCall) -> Result<Receipt, ProviderError> {
        let timeout = call.timeout.to_string();
        let mut form = vec![
            ("To", call.to.as_str()),
            ("From", call.from.as_str()),
            ("Url", call.twiml_url.as_str()),
            ("Timeout", timeout.as_str()),
        ];
        if let Some(url) = &call.status_callback {
            form.push(("StatusCallback", url));
            for event in ["initiated", "ringing", "answered", "completed"] {
                form.push(("StatusCallbackEvent", event));
            }
        }
        self.create("Calls", &form).await
    }
}
