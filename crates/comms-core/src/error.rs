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
    #[error(transparent)]
    Db(#[from] DbError),
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
            CommsError::Db(e) => e.into(),
        }
    }
}
