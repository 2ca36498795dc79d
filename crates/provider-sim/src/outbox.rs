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
    /// Where each email added by [`Outbox::add_email`] sits in `emails`: delivery events look
    /// their email up by id, and a scan of a long outbox under its lock held every send up.
    #[serde(skip)]
    email_at: std::collections::HashMap<String, usize>,
}

impl Outbox {
    /// Adds an accepted email.
    pub fn add_email(&mut self, email: Email) {
        self.email_at.insert(email.id.clone(), self.emails.len());
        self.emails.push(email);
    }

    fn position(&self, id: &str) -> Option<usize> {
        match self.email_at.get(id) {
            Some(&at) if self.emails.get(at).is_some_and(|e| e.id == id) => Some(at),
            // Not added through add_email (pushed directly, or read back from JSON).
            _ => self.emails.iter().position(|e| e.id == id),
        }
    }

    /// The email of this id.
    pub fn email(&self, id: &str) -> Option<&Email> {
        self.position(id).map(|at| &self.emails[at])
    }

    /// The email of this id, to change.
    pub fn email_mut(&mut self, id: &str) -> Option<&mut Email> {
        self.position(id).map(|at| &mut self.emails[at])
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn email(id: &str) -> Email {
        Email {
            id: id.to_owned(),
            from: "a@example.com".to_owned(),
            to: vec!["b@example.com".to_owned()],
            cc: Vec::new(),
            bcc: Vec::new(),
            reply_to: Vec::new(),
            subject: id.to_owned(),
            html: None,
            text: None,
            tags: Value::Null,
            headers: Value::Null,
            attachments: 0,
            created_at: String::new(),
            last_event: None,
        }
    }

    #[test]
    fn emails_are_found_by_id_however_they_were_added() {
        let mut outbox = Outbox::default();
        for id in ["e1", "e2", "e3"] {
            outbox.add_email(email(id));
        }
        // Pushed past the index, as a test might.
        outbox.emails.push(email("e4"));
        for id in ["e1", "e2", "e3", "e4"] {
            assert_eq!(outbox.email(id).map(|e| e.subject.as_str()), Some(id));
        }
        assert!(outbox.email("nope").is_none());
        if let Some(e) = outbox.email_mut("e2") {
            e.last_event = Some("delivered".to_owned());
        }
        assert_eq!(outbox.emails[1].last_event.as_deref(), Some("delivered"));
        // Read back from JSON: no index, the same answers.
        let json = serde_json::to_string(&outbox).unwrap_or_default();
        let read: Outbox = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(read.email("e3").map(|e| e.id.as_str()), Some("e3"));
    }
}
