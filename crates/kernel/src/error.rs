//! `ApiError`: every error answer of the service, rendered as `{"detail": ...}`.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::sync::{Arc, OnceLock};

/// One failing field of a request, as listed in 422 bodies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An HTTP error answer: a status, a `detail` (a string, or for auth's 422 a list of
/// [`FieldError`]), optional extra body fields and headers. Server errors keep their cause (with
/// its chain of sources) for the log, where it is written once, when the answer is rendered; the
/// client sees only `Internal server error`.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    body: Map<String, Value>,
    headers: Vec<(HeaderName, HeaderValue)>,
    cause: Option<Arc<Cause>>,
}

/// The hidden cause of a server error, logged the first time the answer is rendered.
#[derive(Debug)]
struct Cause {
    message: String,
    logged: OnceLock<()>,
}

impl ApiError {
    /// An error with a string detail.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self::with_detail(status, Value::String(detail.into()))
    }

    /// An error whose detail is any JSON value.
    pub fn with_detail(status: StatusCode, detail: Value) -> Self {
        let mut body = Map::new();
        body.insert("detail".to_owned(), detail);
        Self {
            status,
            body,
            headers: Vec::new(),
            cause: None,
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 401 with `WWW-Authenticate: Bearer`.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, detail)
            .header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }

    /// 422 with a string detail.
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    /// 422 with a string detail and the failing fields under `errors`.
    pub fn invalid_fields(detail: impl Into<String>, errors: Vec<FieldError>) -> Self {
        Self::unprocessable(detail).field("errors", json!(errors))
    }

    /// 422 whose detail is the list of failing fields (the auth module's form).
    pub fn field_list(errors: Vec<FieldError>) -> Self {
        Self::with_detail(StatusCode::UNPROCESSABLE_ENTITY, json!(errors))
    }

    pub fn service_unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, detail)
    }

    pub fn bad_gateway(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, detail)
    }

    /// A 500: the cause goes to the log (once, when the answer is rendered), the client sees
    /// only `Internal server error`.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error").caused_by(cause)
    }

    /// A 500 for an error value: the log gets its whole chain of sources (`a: b: c`).
    pub fn internal_error(error: &(dyn std::error::Error + 'static)) -> Self {
        Self::internal(cause_chain(error))
    }

    /// Keeps `cause` for the log beside a client-facing answer (any status).
    pub fn caused_by(mut self, cause: impl std::fmt::Display) -> Self {
        self.cause = Some(Arc::new(Cause {
            message: cause.to_string(),
            logged: OnceLock::new(),
        }));
        self
    }

    /// Adds a field to the body beside `detail`.
    pub fn field(mut self, key: &str, value: Value) -> Self {
        self.body.insert(key.to_owned(), value);
        self
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The `detail` value.
    pub fn detail(&self) -> &Value {
        self.body.get("detail").unwrap_or(&Value::Null)
    }

    /// A field of the body (`detail`, or one added with [`ApiError::field`]).
    pub fn body_field(&self, key: &str) -> Option<&Value> {
        self.body.get(key)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status.as_u16(), self.detail())
    }
}

impl std::error::Error for ApiError {}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        if let Some(cause) = &self.cause
            && cause.logged.set(()).is_ok()
        {
            if self.status.is_server_error() {
                tracing::error!(status = self.status.as_u16(), error = %cause.message, "request failed");
            } else {
                tracing::warn!(status = self.status.as_u16(), error = %cause.message, "request refused");
            }
        }
        let mut response = HttpResponse::build(self.status);
        for (name, value) in &self.headers {
            response.insert_header((name.clone(), value.clone()));
        }
        response.json(&self.body)
    }
}

/// Seconds a client is asked to wait after a 503 for a lost database connection.
const RETRY_AFTER_SECONDS: u32 = 1;

impl From<crate::DbError> for ApiError {
    /// A lost or unreachable database is a 503 with `Retry-After` (the request may succeed when
    /// retried); any other database failure is a 500. Both keep the cause for the log.
    fn from(e: crate::DbError) -> Self {
        if e.is_connection_lost() {
            ApiError::service_unavailable("Database temporarily unavailable, try again shortly")
                .header(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS))
                .caused_by(crate::error::cause_chain(&e))
        } else {
            ApiError::internal_error(&e)
        }
    }
}

/// An error and its sources, joined with `: `.
pub fn cause_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        // `#[error(transparent)]` and `{0}` wrappers repeat their source's text.
        if !text.ends_with(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::body::to_bytes;

    #[actix_web::test]
    async fn renders_the_detail_envelope_and_headers() {
        let response = ApiError::unauthorized("Not authenticated").error_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            response
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .map(|v| v.as_bytes()),
            Some(&b"Bearer"[..])
        );
        let body = to_bytes(response.into_body()).await.unwrap_or_default();
        assert_eq!(&body[..], br#"{"detail":"Not authenticated"}"#);
    }

    #[test]
    fn cause_chains_list_every_source_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] Inner);
        #[derive(Debug, thiserror::Error)]
        #[error("inner")]
        struct Inner;
        assert_eq!(cause_chain(&Outer(Inner)), "outer: inner");
    }

    #[actix_web::test]
    async fn internal_errors_hide_their_cause() {
        let response = ApiError::internal("secret cause").error_response();
        let body = to_bytes(response.into_body()).await.unwrap_or_default();
        assert_eq!(&body[..], br#"{"detail":"Internal server error"}"#);
    }
}
