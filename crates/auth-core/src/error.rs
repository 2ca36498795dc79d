//! `AuthError` and its one mapping to `ApiError`.

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use kernel::{ApiError, DbError, FieldError};

pub const EMAIL_TAKEN: &str = "Email already registered";
pub const BAD_CREDENTIALS: &str = "Incorrect email or password";
pub const USER_NOT_FOUND: &str = "User not found";
pub const SELF_LOCKOUT: &str = "Admins cannot deactivate or demote themselves";
pub const TOO_MANY_REQUESTS: &str = "Too many requests. Please try again later.";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid fields: {0:?}")]
    Invalid(Vec<FieldError>),
    #[error("{EMAIL_TAKEN}")]
    EmailTaken,
    #[error("{BAD_CREDENTIALS}")]
    BadCredentials,
    #[error("{}", kernel::identity::INACTIVE_USER)]
    Inactive,
    #[error("{USER_NOT_FOUND}")]
    UserNotFound,
    #[error("{SELF_LOCKOUT}")]
    SelfLockout,
    #[error("{TOO_MANY_REQUESTS}")]
    RateLimited { retry_after_seconds: u64 },
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("internal: {0}")]
    Internal(String),
}

impl From<diesel::result::Error> for AuthError {
    fn from(e: diesel::result::Error) -> Self {
        AuthError::Db(DbError::Query(e))
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Invalid(errors) => ApiError::field_list(errors),
            AuthError::EmailTaken => ApiError::bad_request(EMAIL_TAKEN),
            AuthError::BadCredentials => ApiError::unauthorized(BAD_CREDENTIALS),
            AuthError::Inactive => ApiError::unauthorized(kernel::identity::INACTIVE_USER),
            AuthError::UserNotFound => ApiError::not_found(USER_NOT_FOUND),
            AuthError::SelfLockout => ApiError::bad_request(SELF_LOCKOUT),
            AuthError::RateLimited {
                retry_after_seconds,
            } => ApiError::new(StatusCode::TOO_MANY_REQUESTS, TOO_MANY_REQUESTS)
                .header(RETRY_AFTER, HeaderValue::from(retry_after_seconds.max(1))),
            AuthError::Db(e) => ApiError::from(e),
            AuthError::Internal(e) => ApiError::internal(e),
        }
    }
}
