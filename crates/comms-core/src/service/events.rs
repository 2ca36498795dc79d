//! The providers' signed webhooks: Twilio's status callbacks and inbound SMS, Resend's events.
//! Each is verified before it is read; then it moves the message log forward and, for a hard
//! bounce, a complaint, an opt-out error or a STOP reply, adds its recipient to the suppression
//! list (an opt-in keyword takes a number off it).

use chrono::Utc;

use super::{CommsServiceImpl, EventOutcome, EventReport, InboundReport};
use crate::domain::suppression::{self, Keyword, Reason};
use crate::domain::{self, Channel};
use crate::error::CommsError;
use crate::store::MessageKey;
use crate::webhooks::{
    self, SvixRefusal, TwilioBody, TwilioCallback, TwilioKeys, TwilioPayload, TwilioRefusal,
    TwilioRequest,
};

/// A form's fields by name.
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl CommsServiceImpl {
    /// Verifies a Twilio request (see `webhooks::twilio_verify`), then reads its fields.
    fn twilio_fields(&self, callback: TwilioCallback) -> Result<Fields, CommsError> {
        let keys = TwilioKeys {
            auth_token: self.config.twilio_auth_token.as_deref(),
            shared_keys: &self.config.twilio_webhook_shared_keys,
        };
        let request = TwilioRequest {
            base: self.config.public_base_url.as_deref(),
            path_and_query: &callback.path_and_query,
            body: match &callback.body {
                TwilioPayload::Form(params) => TwilioBody::Form(params),
                TwilioPayload::Json(raw) => TwilioBody::Json(raw),
            },
            signature: callback.signature.as_deref(),
            signature_settings: callback.signature_settings.as_deref(),
        };
        match webhooks::twilio_verify(keys, &request) {
            Ok(()) => {}
            Err(TwilioRefusal::NotConfigured(setting)) => {
                return Err(CommsError::WebhookNotConfigured {
                    provider: "Twilio",
                    setting,
                });
            }
            Err(TwilioRefusal::BadSignature) => return Err(CommsError::BadSignature),
        }
        Ok(Fields(match callback.body {
            TwilioPayload::Form(params) => params,
            TwilioPayload::Json(raw) => webhooks::json_fields(&raw).map_err(|e| {
                CommsError::BadPayload(format!("the JSON body cannot be read: {e}"))
            })?,
        }))
    }

    pub(super) async fn apply_twilio_status(
        &self,
        callback: TwilioCallback,
    ) -> Result<EventReport, CommsError> {
        let fields = self.twilio_fields(callback)?;
        let message_sid = fields.get("MessageSid").or_else(|| fields.get("SmsSid"));
        let sid = message_sid.or_else(|| fields.get("CallSid"));
        let status = fields
            .get("MessageStatus")
            .or_else(|| fields.get("SmsStatus"))
            .or_else(|| fields.get("CallStatus"));
        let code = fields.get("ErrorCode");
        let error = match (code, fields.get("ErrorMessage")) {
            (Some(code), Some(message)) => Some(format!("{code}: {message}")),
            (Some(code), None) => Some(format!("Twilio error {code}")),
            (None, Some(message)) => Some(message.to_owned()),
            (None, None) => None,
        };
        let mut report = EventReport::default();
        // A message Twilio did not deliver because its recipient unsubscribed: no later SMS to
        // that number, whether or not the message is in the log.
        if message_sid.is_some()
            && code.map(str::trim) == Some(suppression::TWILIO_UNSUBSCRIBED)
            && let Some(to) = fields.get("To").and_then(suppression::phone)
            && self
                .suppress(
                    Channel::Sms,
                    &to,
                    Reason::Unsubscribed,
                    error.as_deref(),
                    message_sid,
                )
                .await?
        {
            report.suppressed.push(to);
        }
        if let (Some(sid), Some(status)) = (sid, status) {
            report.outcome = self
                .advance(
                    MessageKey::Provider {
                        provider: "twilio",
                        id: sid,
                    },
                    status,
                    error.as_deref(),
                )
                .await?;
        }
        Ok(report)
    }

    pub(super) async fn apply_twilio_inbound(
        &self,
        callback: TwilioCallback,
    ) -> Result<InboundReport, CommsError> {
        let fields = self.twilio_fields(callback)?;
        let body = fields.get("Body").unwrap_or("");
        let keyword = suppression::keyword(fields.get("OptOutType"), body);
        let Some(keyword) = keyword else {
            return Ok(InboundReport::default());
        };
        let Some(from) = fields.get("From").and_then(suppression::phone) else {
            // A short code, a channel address (`whatsapp:...`): not a number the list holds.
            return Ok(InboundReport {
                keyword: Some(keyword),
                changed: false,
            });
        };
        let changed = match keyword {
            Keyword::OptOut => {
                let word = body.trim();
                let detail = format!("replied {}", if word.is_empty() { "STOP" } else { word });
                let sid = fields.get("MessageSid").or_else(|| fields.get("SmsSid"));
                self.suppress(Channel::Sms, &from, Reason::Stop, Some(&detail), sid)
                    .await?
            }
            Keyword::OptIn => self.lift_opt_out(&from).await?,
        };
        Ok(InboundReport {
            keyword: Some(keyword),
            changed,
        })
    }

    pub(super) async fn apply_resend_event(
        &self,
        svix: [Option<&str>; 3],
        body: &[u8],
    ) -> Result<EventReport, CommsError> {
        let key = self
            .config
            .resend_webhook_secret
            .as_deref()
            .and_then(webhooks::svix_key)
            .ok_or(CommsError::WebhookNotConfigured {
                provider: "Resend",
                setting: "RESEND_WEBHOOK_SECRET",
            })?;
        let [id, timestamp, signatures] = svix;
        match webhooks::svix_verify(
            &key,
            id,
            timestamp,
            signatures,
            body,
            Utc::now().timestamp(),
        ) {
            Ok(()) => {}
            Err(SvixRefusal::MissingHeaders | SvixRefusal::Stale | SvixRefusal::BadSignature) => {
                return Err(CommsError::BadSignature);
            }
        }
        let mut event: ResendEvent =
            serde_json::from_slice(body).map_err(|e| CommsError::BadPayload(e.to_string()))?;
        let status = match event.kind.as_str() {
            "email.sent" => "sent",
            "email.delivered" => "delivered",
            "email.delivery_delayed" => "delivery_delayed",
            "email.bounced" => "bounced",
            "email.complained" => "complained",
            _ => return Ok(EventReport::default()),
        };
        let bounce = event.data.bounce.take().unwrap_or_default();
        let reason = match status {
            "bounced"
                if bounce
                    .kind
                    .as_deref()
                    .is_some_and(suppression::is_hard_bounce) =>
            {
                Some(Reason::HardBounce)
            }
            "complained" => Some(Reason::Complaint),
            _ => None,
        };
        let mut report = EventReport::default();
        if let Some(reason) = reason {
            report.suppressed = self
                .suppress_email_recipients(&event.data, reason, bounce.message.as_deref())
                .await?;
        }
        if let Some(email_id) = &event.data.email_id {
            let key = match event.data.reference() {
                Some(reference) => MessageKey::Reference {
                    reference,
                    provider_id: email_id,
                },
                None => MessageKey::Provider {
                    provider: "resend",
                    id: email_id,
                },
            };
            report.outcome = self.advance(key, status, bounce.message.as_deref()).await?;
        }
        Ok(report)
    }

    /// Suppresses the recipient of a bounced or complained-about email. Resend's event names the
    /// email's recipients, not which of several bounced or complained: with one recipient it is
    /// that one; with several none is suppressed (suppressing all would block good addresses),
    /// and a warning says so.
    async fn suppress_email_recipients(
        &self,
        data: &ResendEventData,
        reason: Reason,
        detail: Option<&str>,
    ) -> Result<Vec<String>, CommsError> {
        let recipients: Vec<&str> = match &data.to {
            serde_json::Value::String(one) => vec![one.as_str()],
            serde_json::Value::Array(many) => many.iter().filter_map(|v| v.as_str()).collect(),
            _ => Vec::new(),
        };
        let [recipient] = recipients.as_slice() else {
            if recipients.len() > 1 {
                tracing::warn!(
                    email_id = data.email_id.as_deref(),
                    reason = reason.as_str(),
                    recipients = recipients.len(),
                    "an email to several recipients bounced or drew a complaint: no address suppressed"
                );
            }
            return Ok(Vec::new());
        };
        let Some(address) = suppression::email(recipient) else {
            return Ok(Vec::new());
        };
        let detail = detail.or(match reason {
            Reason::Complaint => Some("marked as spam"),
            _ => None,
        });
        let added = self
            .suppress(
                Channel::Email,
                &address,
                reason,
                detail,
                data.email_id.as_deref(),
            )
            .await?;
        Ok(if added { vec![address] } else { Vec::new() })
    }
}

impl Default for EventReport {
    fn default() -> Self {
        EventReport {
            outcome: EventOutcome::Ignored,
            suppressed: Vec::new(),
        }
    }
}

#[derive(serde::Deserialize)]
struct ResendEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: ResendEventData,
}

#[derive(serde::Deserialize, Default)]
struct ResendEventData {
    email_id: Option<String>,
    /// A list of addresses (read leniently: one address, or anything else, which names none).
    #[serde(default)]
    to: serde_json::Value,
    bounce: Option<ResendBounce>,
    /// The email's tags: an object of names and values in Resend's events (a list of
    /// `{name, value}` as in its send requests is read too; anything else names none).
    #[serde(default)]
    tags: serde_json::Value,
}

impl ResendEventData {
    /// The reference keel gave the email (its `keel_message` tag), if the event carries one.
    fn reference(&self) -> Option<&str> {
        let tag = domain::REFERENCE_TAG;
        match &self.tags {
            serde_json::Value::Object(tags) => tags.get(tag).and_then(|v| v.as_str()),
            serde_json::Value::Array(tags) => tags
                .iter()
                .find(|t| t["name"] == tag)
                .and_then(|t| t["value"].as_str()),
            _ => None,
        }
    }
}

#[derive(serde::Deserialize, Default)]
struct ResendBounce {
    message: Option<String>,
    /// `Permanent`, `Transient` or `Undetermined`.
    #[serde(rename = "type")]
    kind: Option<String>,
}
