//! The communications service: sends through the providers, keeps the message log, and applies
//! the providers' signed delivery events to it.

mod checks;
mod detached;
mod events;
mod log;
mod log_writer;
mod suppression_check;
mod suppressions;

use std::sync::Arc;

use chrono::NaiveDateTime;
use kernel::DbPool;
use kernel::module::Mounts;
use kernel::pagination::Page;

use crate::config::CommsConfig;
use crate::domain::suppression::{self, Keyword, Reason};
use crate::domain::{self, Channel};
use crate::error::CommsError;
use crate::providers::{
    EmailProvider, EmailTag, OutgoingCall, OutgoingEmail, OutgoingSms, TelephonyProvider,
};
use crate::store::{self, MessageFilter};
use crate::webhooks::TwilioCallback;

use checks::{check_body, check_email, check_no_nul, required, trimmed};
use log::LogEntry;
pub use suppressions::{Suppression, SuppressionFilter};

/// The route of Twilio's status callbacks under the module's mount point (the `#[post]` of
/// `http::twilio_status`).
pub const TWILIO_STATUS_ROUTE: &str = "/webhooks/twilio/status";
/// The route of Twilio's incoming-message webhook (the number's "A message comes in" URL).
pub const TWILIO_INBOUND_ROUTE: &str = "/webhooks/twilio/inbound";

/// An email to send, as the client gave it (checked by the service).
#[derive(Debug, Clone, Default)]
pub struct EmailRequest {
    pub to: Vec<String>,
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    pub from_email: Option<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub reply_to: Vec<String>,
    /// (name, value)
    pub tags: Vec<(String, String)>,
    /// The body carries a secret (a sign-in or reset link): the message log keeps no preview of
    /// it, only the subject.
    pub private_body: bool,
}

#[derive(Debug, Clone, Default)]
pub struct SmsRequest {
    pub to: Option<String>,
    pub body: Option<String>,
    pub from_number: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    pub to: Option<String>,
    pub twiml_url: Option<String>,
    pub from_number: Option<String>,
    pub timeout: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailReceipt {
    pub id: String,
    pub to: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmsReceipt {
    pub sid: String,
    pub to: String,
    pub segments: u32,
    /// Twilio's own status (`queued`, or `accepted` through a messaging service).
    pub provider_status: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallReceipt {
    pub sid: String,
    pub to: String,
    pub status: String,
}

/// A message of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: i64,
    pub channel: Channel,
    pub provider: String,
    pub recipients: Vec<String>,
    pub subject: Option<String>,
    pub preview: Option<String>,
    pub provider_id: Option<String>,
    pub status: String,
    pub error: Option<String>,
    pub user_id: Option<i64>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

/// Whose messages a caller may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// Every message: an administrator, the CLI, or a deployment without the auth module.
    All,
    /// The messages this user sent.
    User(i64),
}

/// Filters of the message list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub channel: Option<Channel>,
    pub status: Option<String>,
}

/// What a signed delivery event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventOutcome {
    /// The message moved to a later status.
    Applied,
    /// Nothing changed: an unknown message, a status not later than the stored one (a replay, a
    /// late event), or an event kind the log does not track.
    Ignored,
}

/// What a signed delivery event did to the log and to the suppression list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventReport {
    pub outcome: EventOutcome,
    /// The addresses or numbers it added to the suppression list.
    pub suppressed: Vec<String>,
}

/// What an incoming SMS did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboundReport {
    /// The opt-out or opt-in keyword it was, if any.
    pub keyword: Option<Keyword>,
    /// Whether it added its sender to the suppression list (opt-out) or took it off (opt-in).
    pub changed: bool,
}

#[async_trait::async_trait]
pub trait CommsService: Send + Sync {
    async fn send_email(
        &self,
        sender: Option<i64>,
        request: EmailRequest,
    ) -> Result<EmailReceipt, CommsError>;
    async fn send_sms(
        &self,
        sender: Option<i64>,
        request: SmsRequest,
    ) -> Result<SmsReceipt, CommsError>;
    async fn make_call(
        &self,
        sender: Option<i64>,
        request: CallRequest,
    ) -> Result<CallReceipt, CommsError>;
    async fn messages(
        &self,
        viewer: Viewer,
        filter: ListFilter,
        page: Page,
    ) -> Result<(Vec<Message>, i64), CommsError>;
    /// A message of the log; another user's is `NotFound`.
    async fn message(&self, viewer: Viewer, id: i64) -> Result<Message, CommsError>;
    /// A Twilio status callback, verified (see `webhooks::twilio_verify`) before it is read. An
    /// SMS that failed with error 21610 suppresses its number.
    async fn twilio_status(&self, callback: TwilioCallback) -> Result<EventReport, CommsError>;
    /// An SMS Twilio received for one of the account's numbers, verified like a status callback:
    /// an opt-out keyword (STOP) suppresses its sender, an opt-in keyword (START) lifts that.
    async fn twilio_inbound(&self, callback: TwilioCallback) -> Result<InboundReport, CommsError>;
    /// A Resend event with its Svix headers (id, timestamp, signatures) and raw body. A hard
    /// bounce or a complaint suppresses the email's recipient.
    async fn resend_event(
        &self,
        svix: [Option<&str>; 3],
        body: &[u8],
    ) -> Result<EventReport, CommsError>;
    /// A page of the suppression list, newest first, and the number of entries that match.
    async fn suppressions(
        &self,
        filter: SuppressionFilter,
        page: Page,
    ) -> Result<(Vec<Suppression>, i64), CommsError>;
    /// Takes an address or number (any case, any spacing) off the suppression list: the removed
    /// entry, `SuppressionNotFound` when it was not listed.
    async fn unsuppress(&self, address: String) -> Result<Suppression, CommsError>;
    /// The settings in force.
    fn config(&self) -> &CommsConfig;
    /// Whether the message log can be read.
    async fn log_reachable(&self) -> Result<i64, CommsError>;
}

pub(crate) struct CommsServiceImpl {
    pool: DbPool,
    /// Writes the message log's rows, those of concurrent sends together.
    log: log_writer::LogWriter,
    /// Checks the recipients of concurrent sends against the suppression list together.
    suppression_check: suppression_check::SuppressionCheck,
    config: CommsConfig,
    email: Arc<dyn EmailProvider>,
    telephony: Arc<dyn TelephonyProvider>,
    /// The path of the Twilio status callback route where the module is mounted.
    status_path: String,
}

impl CommsServiceImpl {
    /// The service of a module mounted at `mounts`.
    pub(crate) fn new(
        pool: DbPool,
        config: CommsConfig,
        email: Arc<dyn EmailProvider>,
        telephony: Arc<dyn TelephonyProvider>,
        mounts: &Mounts,
    ) -> Self {
        CommsServiceImpl {
            log: log_writer::LogWriter::new(pool.clone()),
            suppression_check: suppression_check::SuppressionCheck::new(pool.clone()),
            pool,
            config,
            email,
            telephony,
            status_path: mounts.path(TWILIO_STATUS_ROUTE),
        }
    }

    fn require(&self, channel: Channel) -> Result<(), CommsError> {
        match self.config.missing(channel) {
            Some(setting) => Err(CommsError::NotConfigured { channel, setting }),
            None => Ok(()),
        }
    }

    /// Where Twilio posts status callbacks, when the service knows its public address.
    fn status_callback(&self) -> Option<String> {
        self.config
            .public_base_url
            .as_ref()
            .map(|base| format!("{base}{}", self.status_path))
    }
}

fn now() -> NaiveDateTime {
    kernel::time::now()
}

#[async_trait::async_trait]
impl CommsService for CommsServiceImpl {
    async fn send_email(
        &self,
        sender: Option<i64>,
        request: EmailRequest,
    ) -> Result<EmailReceipt, CommsError> {
        check_email(&request)?;
        self.require(Channel::Email)?;
        let everyone: Vec<String> = [&request.to, &request.cc, &request.bcc]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        self.check_suppressed(&everyone).await?;
        let private_body = request.private_body;
        let from = request
            .from_email
            .clone()
            .or_else(|| self.config.resend_from_email.clone())
            .unwrap_or_default();
        let to = trimmed(request.to);
        let reference = domain::new_reference();
        let email = OutgoingEmail {
            from,
            to: to.clone(),
            subject: request.subject.unwrap_or_default(),
            text: request.text.filter(|t| !t.trim().is_empty()),
            html: request.html.filter(|h| !h.trim().is_empty()),
            cc: trimmed(request.cc),
            bcc: trimmed(request.bcc),
            reply_to: trimmed(request.reply_to),
            tags: request
                .tags
                .into_iter()
                .map(|(name, value)| EmailTag { name, value })
                .chain([EmailTag {
                    name: domain::REFERENCE_TAG.to_owned(),
                    value: reference.clone(),
                }])
                .collect(),
        };
        let result = self.email.send(&email).await;
        let entry = LogEntry {
            channel: Channel::Email,
            sender,
            recipients: &to,
            subject: Some(&email.subject),
            preview: email
                .text
                .as_deref()
                .or(email.html.as_deref())
                .filter(|_| !private_body)
                .map(domain::preview),
            reference: Some(&reference),
        };
        self.record(entry, result.as_ref().map(|id| (id.as_str(), "sent")))
            .await;
        match result {
            Ok(id) => Ok(EmailReceipt { id, to }),
            Err(e) => Err(CommsError::Provider {
                channel: Channel::Email,
                message: e.message,
            }),
        }
    }

    async fn send_sms(
        &self,
        sender: Option<i64>,
        request: SmsRequest,
    ) -> Result<SmsReceipt, CommsError> {
        let to = required("to", request.to)?.trim().to_owned();
        domain::check_phone(&to).map_err(CommsError::Invalid)?;
        let body = request
            .body
            .filter(|b| !b.is_empty())
            .ok_or_else(|| CommsError::Invalid("Field required: body".into()))?;
        check_no_nul("body", Some(&body))?;
        check_body(&body)?;
        let from_number = request.from_number.map(|f| f.trim().to_owned());
        if let Some(from) = &from_number {
            domain::check_phone(from).map_err(CommsError::Invalid)?;
        }
        self.require(Channel::Sms)?;
        self.check_suppressed(std::slice::from_ref(&to)).await?;
        let sms = OutgoingSms {
            to: to.clone(),
            from: from_number.or_else(|| self.config.twilio_phone_number.clone()),
            messaging_service_sid: self.config.twilio_messaging_service_sid.clone(),
            body,
            status_callback: self.status_callback(),
        };
        let result = self.telephony.send_sms(&sms).await;
        let recipients = [to.clone()];
        let entry = LogEntry {
            channel: Channel::Sms,
            sender,
            recipients: &recipients,
            subject: None,
            preview: Some(domain::preview(&sms.body)),
            reference: None,
        };
        self.record(
            entry,
            result.as_ref().map(|r| (r.id.as_str(), r.status.as_str())),
        )
        .await;
        if let Err(e) = &result
            && e.code.as_deref() == Some(suppression::TWILIO_UNSUBSCRIBED)
            && let Some(number) = suppression::phone(&to)
        {
            // Twilio refuses every SMS to this number until it opts back in.
            let detail = format!("{}: {}", suppression::TWILIO_UNSUBSCRIBED, e.message);
            if let Err(stored) = self
                .suppress(
                    Channel::Sms,
                    &number,
                    Reason::Unsubscribed,
                    Some(&detail),
                    None,
                )
                .await
            {
                tracing::error!(error = %stored, "the opted-out number is not suppressed");
            }
        }
        match result {
            Ok(receipt) => Ok(SmsReceipt {
                sid: receipt.id,
                to,
                segments: domain::sms_segments(&sms.body),
                provider_status: receipt.status,
            }),
            Err(e) => Err(CommsError::Provider {
                channel: Channel::Sms,
                message: e.message,
            }),
        }
    }

    async fn make_call(
        &self,
        sender: Option<i64>,
        request: CallRequest,
    ) -> Result<CallReceipt, CommsError> {
        let to = required("to", request.to)?.trim().to_owned();
        domain::check_phone(&to).map_err(CommsError::Invalid)?;
        let twiml_url = required("twiml_url", request.twiml_url)?.trim().to_owned();
        domain::check_twiml_url(&twiml_url).map_err(CommsError::Invalid)?;
        let from_number = request.from_number.map(|f| f.trim().to_owned());
        if let Some(from) = &from_number {
            domain::check_phone(from).map_err(CommsError::Invalid)?;
        }
        let timeout = match request.timeout {
            None => domain::DEFAULT_CALL_TIMEOUT,
            Some(t) => u32::try_from(t)
                .ok()
                .filter(|t| domain::CALL_TIMEOUT_RANGE.contains(t))
                .ok_or_else(|| {
                    CommsError::Invalid(format!(
                        "Invalid timeout: {t} (from {} to {} seconds)",
                        domain::CALL_TIMEOUT_RANGE.start(),
                        domain::CALL_TIMEOUT_RANGE.end()
                    ))
                })?,
        };
        self.require(Channel::Voice)?;
        let call = OutgoingCall {
            to: to.clone(),
            from: from_number
                .or_else(|| self.config.twilio_phone_number.clone())
                .unwrap_or_default(),
            twiml_url,
            timeout,
            status_callback: self.status_callback(),
        };
        let result = self.telephony.make_call(&call).await;
        let recipients = [to.clone()];
        let entry = LogEntry {
            channel: Channel::Voice,
            sender,
            recipients: &recipients,
            subject: None,
            preview: Some(domain::preview(&call.twiml_url)),
            reference: None,
        };
        self.record(
            entry,
            result.as_ref().map(|r| (r.id.as_str(), r.status.as_str())),
        )
        .await;
        match result {
            Ok(receipt) => Ok(CallReceipt {
                sid: receipt.id,
                to,
                status: receipt.status,
            }),
            Err(e) => Err(CommsError::Provider {
                channel: Channel::Voice,
                message: e.message,
            }),
        }
    }

    async fn messages(
        &self,
        viewer: Viewer,
        filter: ListFilter,
        page: Page,
    ) -> Result<(Vec<Message>, i64), CommsError> {
        if let Some(status) = &filter.status
            && domain::status_rank(status).is_none()
        {
            return Err(CommsError::Invalid(format!(
                "Unknown status: {status:?} (a delivery status such as sent or delivered)"
            )));
        }
        let store_filter = MessageFilter {
            channel: filter.channel.map(Channel::as_str),
            status: filter.status.as_deref(),
            user_id: match viewer {
                Viewer::All => None,
                Viewer::User(id) => Some(id),
            },
        };
        let mut pooled = self.pool.read().await?;
        let (rows, total) = store::list(
            &mut pooled.conn(),
            store_filter,
            page.offset(),
            page.limit(),
        )
        .await?;
        Ok((rows.into_iter().map(Message::from).collect(), total))
    }

    async fn message(&self, viewer: Viewer, id: i64) -> Result<Message, CommsError> {
        let mut pooled = self.pool.read().await?;
        let row = store::find(&mut pooled.conn(), id)
            .await?
            .ok_or(CommsError::NotFound)?;
        match viewer {
            Viewer::User(user) if row.user_id != Some(user) => Err(CommsError::NotFound),
            _ => Ok(row.into()),
        }
    }

    async fn twilio_status(&self, callback: TwilioCallback) -> Result<EventReport, CommsError> {
        self.apply_twilio_status(callback).await
    }

    async fn twilio_inbound(&self, callback: TwilioCallback) -> Result<InboundReport, CommsError> {
        self.apply_twilio_inbound(callback).await
    }

    async fn resend_event(
        &self,
        svix: [Option<&str>; 3],
        body: &[u8],
    ) -> Result<EventReport, CommsError> {
        self.apply_resend_event(svix, body).await
    }

    async fn suppressions(
        &self,
        filter: SuppressionFilter,
        page: Page,
    ) -> Result<(Vec<Suppression>, i64), CommsError> {
        self.list_suppressions(filter, page).await
    }

    async fn unsuppress(&self, address: String) -> Result<Suppression, CommsError> {
        self.remove_suppression(&address).await
    }
    fn config(&self) -> &CommsConfig {
        &self.config
    }

    async fn log_reachable(&self) -> Result<i64, CommsError> {
        let mut pooled = self.pool.get().await?;
        Ok(store::count(&mut pooled.conn()).await?)
    }
}
