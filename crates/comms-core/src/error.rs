//! `CommsError` and its one mapping to `ApiError`.

use kernel::{ApiError, DbError};

use crate::Channel;

pub const MESSAGE_NOT_FOUND: &str = "Message not found";
pub const INVALID_SIGNATURE: &str = "Invalid signature";

#[derive(Debug, thiserror::Error)]
pub enum CommsError {
    /// 400: the request breaks a rule; the text says which and how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// 503: the channel misses a setting.
    #[error("{} not configured: {setting} is not set", .channel.title())]
    NotConfigured {
        channel: Channel,
        setting: &'static str,
    },
    /// 502: the provider refused, failed, timed out or could not be reached.
    #[error("{} provider error: {message}", .channel.title())]
    Provider { channel: Channel, message: String },
    /// 503: a webhook cannot be verified because a setting is missing.
    #[error("{provider} webhooks not configured: {setting} is not set")]
    WebhookNotConfigured {
        provider: &'static str,
        setting: &'static str,
    },
    /// 403: a webhook without a valid signature (or with a stale one).
    #[error("{INVALID_SIGNATURE}")]
    BadSignature,
    /// 400: a signed webhook whose body cannot be read.
    #[error("Invalid payload: {0}")]
    BadPayload(String),
    #[error("{MESSAGE_NOT_FOUND}")]
    NotFound,
    /// 409: recipients on the suppression list, as (address, reason); nothing was sent.
    #[error("{}", suppressed_text(.0))]
    Suppressed(Vec<(String, String)>),
    /// 404: no entry of the suppression list has this address.
    #[error("Suppression not found: {0}")]
    SuppressionNotFound(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// `Recipient is suppressed: a@example.com (hard_bounce)`, or for several
/// `Recipients are suppressed: a@example.com (hard_bounce), b@example.com (complaint)`.
fn suppressed_text(entries: &[(String, String)]) -> String {
    let listed: Vec<String> = entries
        .iter()
        .map(|(address, reason)| format!("{address} ({reason})"))
        .collect();
    if listed.len() == 1 {
        format!("Recipient is suppressed: {}", listed.join(", "))
    } else {
        format!("Recipients are suppressed: {}", listed.join(", "))
    }
}

impl From<diesel::result::Error> for CommsError {
    fn from(e: diesel::result::Error) -> Self {
        CommsError::Db(DbError::Query(e))
    }
}

impl From<CommsError> for ApiError {
    fn from(e: CommsError) -> Self {
        match e {
            CommsError::Invalid(_) | CommsError::BadPayload(_) => {
                ApiError::bad_request(e.to_string())
            }
            CommsError::NotConfigured { .. } | CommsError::WebhookNotConfigured { .. } => {
                ApiError::service_unavailable(e.to_string())
            }
            CommsError::Provider { .. } => ApiError::bad_gateway(e.to_string()),
            CommsError::BadSignature => ApiError::forbidden(INVALID_SIGNATURE),
            CommsError::NotFound => ApiError::not_found(MESSAGE_NOT_FOUND),
            CommsError::Suppressed(_) => ApiError::conflict(e.to_string()),
            CommsError::SuppressionNotFound(_) => ApiError::not_found(e.to_string()),
            CommsError::Db(e) => e.into(),
        }
    }
}
