//! `AuthError` and its one mapping to `ApiError`.

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use kernel::{ApiError, DbError, FieldError};

pub const EMAIL_TAKEN: &str = "Email already registered";
pub const BAD_CREDENTIALS: &str = "Incorrect email or password";
pub const USER_NOT_FOUND: &str = "User not found";
pub const SELF_LOCKOUT: &str = "Admins cannot deactivate or demote themselves";
pub const TOO_MANY_REQUESTS: &str = "Too many requests. Please try again later.";
pub const EMAIL_NOT_VERIFIED: &str = "Email not verified";
pub const EMAIL_ALREADY_VERIFIED: &str = "Email already verified";
pub const INVALID_REFRESH_TOKEN: &str = "Invalid refresh token";
pub const INVALID_MAIL_TOKEN: &str = "Invalid or expired token";

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
    /// The right password, but the address is not verified (`AUTH_REQUIRE_VERIFIED_EMAIL`).
    #[error("{EMAIL_NOT_VERIFIED}")]
    EmailNotVerified,
    #[error("{EMAIL_ALREADY_VERIFIED}")]
    AlreadyVerified,
    /// A refresh token that is unknown, expired, revoked or already used.
    #[error("{INVALID_REFRESH_TOKEN}")]
    InvalidRefreshToken,
    /// A verification or reset token that is unknown, expired or already used.
    #[error("{INVALID_MAIL_TOKEN}")]
    InvalidMailToken,
    /// The mailer refused or failed to send a mail the caller waits for.
    #[error("Could not send the mail: {0}")]
    Mail(String),
    #[error(transparent)]
    Db(#[from] DbError),
    /// The plans of the module that provides them could not be read (503).
    #[error(transparent)]
    Entitlements(#[from] kernel::plans::EntitlementsError),
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
            AuthError::EmailNotVerified => ApiError::forbidden(EMAIL_NOT_VERIFIED),
            AuthError::AlreadyVerified => ApiError::conflict(EMAIL_ALREADY_VERIFIED),
            // RFC 6749 §5.2: a refresh token that is invalid, expired or revoked.
            AuthError::InvalidRefreshToken => ApiError::bad_request(INVALID_REFRESH_TOKEN)
                .field("error", serde_json::Value::from("invalid_grant")),
            AuthError::InvalidMailToken => ApiError::bad_request(INVALID_MAIL_TOKEN),
            AuthError::Mail(_) => ApiError::bad_gateway(e.to_string()),
            AuthError::Db(e) => ApiError::from(e),
            AuthError::Entitlements(e) => ApiError::from(e),
            AuthError::Internal(e) => ApiError::internal(e),
        }
    }
}
