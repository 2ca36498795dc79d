//! The message log as the service writes it: a row per send that reached the provider, moved
//! forward by the providers' events.

use crate::domain::{self, Channel};
use crate::error::CommsError;
use crate::providers::ProviderError;
use crate::store::{self, MessageKey, MessageRow};

use super::log_writer::LogRow;
use super::{CommsServiceImpl, EventOutcome, Message, now};

impl CommsServiceImpl {
    /// Records a send that reached the provider, with the rows of concurrent sends (see
    /// [`LogWriter`](super::log_writer::LogWriter)). The send has happened by now, so a failure
    /// to record it is logged rather than answered (a retry would send it twice).
    pub(super) async fn record(
        &self,
        entry: LogEntry<'_>,
        outcome: Result<(&str, &str), &ProviderError>,
    ) {
        let (provider_id, status, error) = match outcome {
            Ok((id, status)) => (Some(id), status, None),
            Err(e) => (None, "failed", Some(e.message.as_str())),
        };
        let row = LogRow {
            channel: entry.channel,
            recipients: serde_json::to_string(entry.recipients).unwrap_or_else(|_| "[]".into()),
            subject: entry.subject.map(str::to_owned),
            preview: entry.preview,
            provider_id: provider_id.map(str::to_owned),
            status: status.to_owned(),
            error: error.map(str::to_owned),
            user_id: entry.sender,
            at: now(),
            reference: entry.reference.map(str::to_owned),
        };
        if let Err(e) = self.log.write(row).await {
            tracing::error!(channel = entry.channel.as_str(), provider_id, error = %e,
                "the send is not in the message log");
        }
    }

    /// Applies a delivery status to the logged message `key` names.
    pub(super) async fn advance(
        &self,
        key: MessageKey<'_>,
        status: &str,
        error: Option<&str>,
    ) -> Result<EventOutcome, CommsError> {
        let below = domain::statuses_below(status);
        if below.is_empty() {
            return Ok(EventOutcome::Ignored);
        }
        let mut pooled = self.pool.get().await?;
        let changed = store::advance(&mut pooled.conn(), key, status, &below, error, now()).await?;
        Ok(if changed > 0 {
            EventOutcome::Applied
        } else {
            EventOutcome::Ignored
        })
    }
}

pub(super) struct LogEntry<'a> {
    pub(super) channel: Channel,
    pub(super) sender: Option<i64>,
    pub(super) recipients: &'a [String],
    pub(super) subject: Option<&'a str>,
    pub(super) preview: Option<String>,
    /// keel's own name for the message, sent to the provider for its events to carry back
    /// (emails: the `keel_message` tag).
    pub(super) reference: Option<&'a str>,
}

impl From<MessageRow> for Message {
    fn from(row: MessageRow) -> Self {
        Message {
            id: row.id,
            channel: Channel::parse(&row.channel).unwrap_or(Channel::Email),
            provider: row.provider,
            recipients: serde_json::from_str(&row.recipients).unwrap_or_default(),
            subject: row.subject,
            preview: row.preview,
            provider_id: row.provider_id,
            status: row.status,
            error: row.error,
            user_id: row.user_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}
