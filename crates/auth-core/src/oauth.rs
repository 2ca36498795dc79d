//! The token endpoint as OAuth 2.0 clients read it (RFC 6749 §4.3 and §5): the password grant
//! only, every error body carrying `error` and `error_description` beside the spec's `detail`
//! (whose text and status stay as the spec says), and a success that caches nowhere.

use actix_web::http::StatusCode;
use kernel::ApiError;
use serde_json::Value;

/// The one grant the token endpoint serves.
pub const PASSWORD_GRANT: &str = "password";
/// The one grant the refresh endpoint serves (RFC 6749 §6).
pub const REFRESH_GRANT: &str = "refresh_token";

/// RFC 6749 §5.2's error codes, and the two of §4.1.2.1 that name a server-side failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthError {
    InvalidRequest,
    InvalidGrant,
    UnsupportedGrantType,
    ServerError,
    TemporarilyUnavailable,
}

impl OAuthError {
    pub fn code(self) -> &'static str {
        match self {
            OAuthError::InvalidRequest => "invalid_request",
            OAuthError::InvalidGrant => "invalid_grant",
            OAuthError::UnsupportedGrantType => "unsupported_grant_type",
            OAuthError::ServerError => "server_error",
            OAuthError::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }

    /// The code an answer of the token endpoint carries, by its status: 401 and 403 are a refused
    /// grant (wrong e-mail or password, inactive user, address not verified), 429 and 503 ask the
    /// client to come back, 5xx is the server's fault, and any other 4xx is a request the client
    /// must fix.
    fn for_status(status: StatusCode) -> OAuthError {
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => OAuthError::InvalidGrant,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                OAuthError::TemporarilyUnavailable
            }
            s if s.is_server_error() => OAuthError::ServerError,
            _ => OAuthError::InvalidRequest,
        }
    }
}

/// 400 `unsupported_grant_type` unless `grant_type` is absent (the spec's form has none) or
/// `password`. An empty value counts as absent, as an HTML form sends it.
pub fn check_grant_type(grant_type: Option<&str>) -> Result<(), ApiError> {
    check_grant(grant_type, PASSWORD_GRANT, "password")
}

/// The same for the refresh endpoint: `grant_type` absent, empty or `refresh_token`.
pub fn check_refresh_grant_type(grant_type: Option<&str>) -> Result<(), ApiError> {
    check_grant(grant_type, REFRESH_GRANT, "refresh_token")
}

fn check_grant(grant_type: Option<&str>, served: &str, name: &str) -> Result<(), ApiError> {
    match grant_type.map(str::trim) {
        None | Some("") => Ok(()),
        Some(given) if given == served => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "Unsupported grant_type: {}. Only the {name} grant is served here",
            printable(other)
        ))
        .field(
            "error",
            Value::from(OAuthError::UnsupportedGrantType.code()),
        )),
    }
}

/// Adds `error` (unless already set) and `error_description` to an error answer of the token
/// endpoint. The description repeats the detail (a field list as `field: message; ...`) in the
/// characters RFC 6749 allows there.
pub fn with_oauth_fields(error: ApiError) -> ApiError {
    let code = OAuthError::for_status(error.status()).code();
    let description = match error.detail() {
        Value::String(text) => text.clone(),
        Value::Array(fields) => fields
            .iter()
            .map(|f| {
                format!(
                    "{}: {}",
                    f["field"].as_str().unwrap_or(""),
                    f["message"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    };
    let error = if error.body_field("error").is_some() {
        error
    } else {
        error.field("error", Value::from(code))
    };
    error.field("error_description", Value::from(printable(&description)))
}

/// `text` in the characters RFC 6749 §5.2 allows in `error_description` (printable ASCII but `"`
/// and `\`); any other character becomes `?`.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            ' '..='~' if c != '"' && c != '\\' => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::FieldError;

    #[test]
    fn only_the_password_grant_or_none_passes() {
        assert!(check_grant_type(None).is_ok());
        assert!(check_grant_type(Some("")).is_ok());
        assert!(check_grant_type(Some("password")).is_ok());
        for other in ["client_credentials", "refresh_token", "Password", "x\"y"] {
            let Err(error) = check_grant_type(Some(other)) else {
                panic!("{other} passed");
            };
            assert_eq!(error.status(), StatusCode::BAD_REQUEST);
            let error = with_oauth_fields(error);
            assert_eq!(
                error.body_field("error"),
                Some(&Value::from("unsupported_grant_type"))
            );
        }
        assert!(check_refresh_grant_type(None).is_ok());
        assert!(check_refresh_grant_type(Some("refresh_token")).is_ok());
        let Err(error) = check_refresh_grant_type(Some("password")) else {
            panic!("the password grant passed the refresh endpoint");
        };
        assert_eq!(
            error.detail(),
            &Value::from(
                "Unsupported grant_type: password. Only the refresh_token grant is served here"
            )
        );
    }

    #[test]
    fn errors_get_the_code_of_their_status_and_a_printable_description() {
        let cases = [
            (
                ApiError::unauthorized("Incorrect email or password"),
                "invalid_grant",
                "Incorrect email or password",
            ),
            (
                ApiError::unauthorized("Inactive user"),
                "invalid_grant",
                "Inactive user",
            ),
            (
                ApiError::forbidden("Email not verified"),
                "invalid_grant",
                "Email not verified",
            ),
            (
                ApiError::field_list(vec![
                    FieldError::new("username", "Field required"),
                    FieldError::new("password", "Field required"),
                ]),
                "invalid_request",
                "username: Field required; password: Field required",
            ),
            (
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "Too many \"tries\" \u{e9}"),
                "temporarily_unavailable",
                "Too many ?tries? ?",
            ),
            (
                ApiError::internal("boom"),
                "server_error",
                "Internal server error",
            ),
        ];
        for (error, code, description) in cases {
            let detail = error.detail().clone();
            let error = with_oauth_fields(error);
            assert_eq!(error.body_field("error"), Some(&Value::from(code)));
            assert_eq!(
                error.body_field("error_description"),
                Some(&Value::from(description))
            );
            // The spec's detail is untouched.
            assert_eq!(error.detail(), &detail);
        }
    }
}
