//! `AiError` and its one mapping to `ApiError`, with the contract's texts.

use kernel::{ApiError, DbError};

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
    /// 502: the provider refused, failed, timed out or could not be reached.
    #[error("AI provider error: {0}")]
    Provider(String),
    /// 503: `AI_ENABLED=false`, or the provider's key is missing (the text names the setting).
    #[error("AI service error: {0}")]
    Unavailable(String),
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
            AiError::Provider(_) => ApiError::bad_gateway(e.to_string()),
            AiError::Unavailable(_) => ApiError::service_unavailable(e.to_string()),
            AiError::Db(e) => e.into(),
        }
    }
}
