//! `AiError` and its one mapping to `ApiError`, with the contract's texts.

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use kernel::plans::EntitlementsError;
use kernel::{ApiError, DbError};

use crate::budget::{Quota, seconds_to_reset};

pub const ACCESS_DENIED: &str = "Access denied";

#[derive(Debug, thiserror::Error)]
pub enum AiError {
    /// 400: a bad `conversation_id`, an empty or oversized message, a bad parameter.
    #[error("{0}")]
    Invalid(String),
    /// 403: the conversation belongs to another user.
    #[error("{ACCESS_DENIED}")]
    AccessDenied,
    /// 404.
    #[error("Conversation error: Conversation {0} not found")]
    NotFound(String),
    /// 429: the caller's plan's tokens for today are spent (`Retry-After`: the next UTC midnight).
    #[error(
        "AI quota exceeded: the {plan} plan allows {limit} tokens a day and {used} were used \
         today; it resets at {resets}",
        plan = .0.plan,
        limit = .0.limit.unwrap_or(0),
        used = .0.used,
        resets = .0.resets_at.format("%Y-%m-%dT%H:%M:%SZ (midnight UTC)"),
    )]
    QuotaExceeded(Quota),
    /// 502: the provider refused, failed, timed out or could not be reached.
    #[error("AI provider error: {0}")]
    Provider(String),
    /// 503: `AI_ENABLED=false`, or the provider's key is missing (the text names the setting).
    #[error("AI service error: {0}")]
    Unavailable(String),
    /// 503: every provider of the chain is being skipped (its circuit open after repeated
    /// failures, or its key missing); `Retry-After`: when the first one may be tried again.
    #[error("AI service error: {detail}")]
    NoProvider { detail: String, retry_after: u64 },
    /// 503: the caller's plan could not be read.
    #[error(transparent)]
    Entitlements(#[from] EntitlementsError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<diesel::result::Error> for AiError {
    fn from(e: diesel::result::Error) -> Self {
        AiError::Db(DbError::Query(e))
    }
}

impl From<AiError> for ApiError {
    fn from(e: AiError) -> Self {
        match e {
            AiError::Invalid(_) => ApiError::bad_request(e.to_string()),
            AiError::AccessDenied => ApiError::forbidden(ACCESS_DENIED),
            AiError::NotFound(_) => ApiError::not_found(e.to_string()),
            AiError::QuotaExceeded(_) => {
                let wait = seconds_to_reset(kernel::time::now());
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string())
                    .header(RETRY_AFTER, HeaderValue::from(wait))
            }
            AiError::Provider(_) => ApiError::bad_gateway(e.to_string()),
            AiError::Unavailable(_) => ApiError::service_unavailable(e.to_string()),
            AiError::NoProvider { retry_after, .. } => ApiError::service_unavailable(e.to_string())
                .header(RETRY_AFTER, HeaderValue::from(retry_after)),
            AiError::Entitlements(e) => e.into(),
            AiError::Db(e) => e.into(),
        }
    }
}
