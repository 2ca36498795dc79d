//! What the simulator "sent" on Keel's behalf: emails, SMS and calls; and the numbers that
//! opted out of SMS.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outbox {
    pub emails: Vec<Email>,
    pub sms: Vec<Sms>,
    pub calls: Vec<Call>,
    /// Numbers that replied an opt-out keyword (STOP) and no opt-in keyword (START) since: Twilio
    /// refuses SMS to them with error 21610.
    #[serde(default)]
    pub opted_out: std::collections::BTreeSet<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Email {
    pub id: String,
    pub from: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub reply_to: Vec<String>,
    pub subject: String,
    pub html: Option<String>,
    pub text: Option<String>,
    pub tags: Value,
    pub headers: Value,
    pub attachments: usize,
    pub created_at: String,
    /// The type of the last webhook event posted about it, without `email.` (`delivered`, ...).
    #[serde(default)]
    pub last_event: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sms {
    pub sid: String,
    pub to: String,
    pub from: Option<String>,
    pub messaging_service_sid: Option<String>,
    pub body: String,
    pub media_urls: Vec<String>,
    pub status: String,
    pub num_segments: u32,
    pub status_callback: Option<String>,
    pub date_created: String,
    /// The `ErrorCode` its `failed` or `undelivered` callbacks carry (30003 when none is set;
    /// 21610 for an SMS to an opted-out number through a messaging service).
    #[serde(default)]
    pub error_code: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Call {
    pub sid: String,
    pub to: String,
    pub from: String,
    pub url: Option<String>,
    pub twiml: Option<String>,
    pub application_sid: Option<String>,
    pub status: String,
    pub status_callback: Option<String>,
    pub status_callback_events: Vec<String>,
    pub date_created: String,
}
