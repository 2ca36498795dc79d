//! `PaymentError` and its one mapping to `ApiError`, with the contract's texts.

use kernel::{ApiError, DbError, FieldError};

use crate::stripe::StripeError;

pub const NOT_CONFIGURED: &str = "Payment provider not configured: STRIPE_SECRET_KEY is not set";
pub const INVALID_PAYLOAD: &str = "Invalid payload";

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    /// 422 naming the field.
    #[error("{}", .0.message)]
    Invalid(FieldError),
    /// 400: a request Stripe refused, or a refund of a refund.
    #[error("{0}")]
    BadRequest(String),
    /// 401: Stripe refused the secret key.
    #[error("{0}")]
    StripeAuthentication(String),
    /// 502: Stripe failed, timed out or could not be reached.
    #[error("Payment provider error: {0}")]
    Upstream(String),
    /// 503: no secret key.
    #[error("{NOT_CONFIGURED}")]
    NotConfigured,
    /// 404 (also another user's row).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 409.
    #[error("{0}")]
    Conflict(String),
    /// 400 `Invalid payload`: a webhook without a valid signature, or not JSON.
    #[error("{INVALID_PAYLOAD}")]
    InvalidPayload,
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<diesel::result::Error> for PaymentError {
    fn from(e: diesel::result::Error) -> Self {
        PaymentError::Db(DbError::Query(e))
    }
}

impl From<StripeError> for PaymentError {
    fn from(e: StripeError) -> Self {
        match e {
            StripeError::Authentication(m) => PaymentError::StripeAuthentication(m),
            StripeError::InvalidRequest(m) => PaymentError::BadRequest(m),
            StripeError::Upstream(m) => PaymentError::Upstream(m),
        }
    }
}

impl From<PaymentError> for ApiError {
    fn from(e: PaymentError) -> Self {
        match e {
            PaymentError::Invalid(field) => {
                ApiError::invalid_fields(field.message.clone(), vec![field])
            }
            PaymentError::BadRequest(_) | PaymentError::InvalidPayload => {
                ApiError::bad_request(e.to_string())
            }
            PaymentError::StripeAuthentication(_) => ApiError::unauthorized(e.to_string()),
            PaymentError::Upstream(_) => ApiError::bad_gateway(e.to_string()),
            PaymentError::NotConfigured => ApiError::service_unavailable(NOT_CONFIGURED),
            PaymentError::NotFound(_) => ApiError::not_found(e.to_string()),
            PaymentError::Conflict(_) => ApiError::conflict(e.to_string()),
            PaymentError::Db(e) => e.into(),
        }
    }
}
