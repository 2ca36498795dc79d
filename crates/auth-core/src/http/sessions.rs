//! Refresh (RFC 6749 §6) and sign-out.

use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, HttpResponse, post, web};
use kernel::ApiError;
use kernel::identity::{AuthFailure, bearer_token};
use serde::Deserialize;
use utoipa::ToSchema;

use super::{AuthState, TokenError, TokenResponse, refuse_nul, required, token_answer};
use crate::oauth;
use crate::service::Logout;

/// The refresh request (RFC 6749 §6).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::RefreshForm)]
pub struct RefreshForm {
    /// `refresh_token` (the only grant served here); may be left out.
    #[schema(pattern = "^refresh_token$")]
    pub grant_type: Option<String>,
    /// The refresh token of the last token answer. Other fields (`scope`, `client_id`) are
    /// accepted and ignored.
    #[schema(required = true)]
    pub refresh_token: Option<String>,
}

#[utoipa::path(
    tag = "auth",
    request_body(content = RefreshForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "A new access token and a new refresh token; the one sent is used up", body = TokenResponse, headers(
            ("Cache-Control" = String, description = "no-store"),
            ("Pragma" = String, description = "no-cache"),
        )),
        (status = 400, description = "Invalid refresh token: unknown, expired, revoked, or used before, which revokes its whole family (error: invalid_grant); or an unsupported grant_type (error: unsupported_grant_type)", body = TokenError),
        (status = 401, description = "Inactive user (error: invalid_grant)", body = TokenError),
        (status = 403, description = "Email not verified, when AUTH_REQUIRE_VERIFIED_EMAIL is on (error: invalid_grant)", body = TokenError),
        (status = 413, description = "The form is over the body limit (error: invalid_request)", body = TokenError),
        (status = 422, description = "List of failing fields: [{field, message}] (error: invalid_request)", body = TokenError),
        (status = 503, description = "The user store does not answer (error: temporarily_unavailable)", body = TokenError),
    )
)]
#[post("/refresh")]
pub async fn refresh(
    state: web::Data<AuthState>,
    form: Result<web::Form<RefreshForm>, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let result = async {
        let form = form.map_err(as_api_error)?.into_inner();
        oauth::check_refresh_grant_type(form.grant_type.as_deref())?;
        let [token] = required([("refresh_token", form.refresh_token)])?;
        refuse_nul(&[("refresh_token", &token)])?;
        Ok(state.service.refresh(&token).await?)
    }
    .await;
    result.map(token_answer).map_err(oauth::with_oauth_fields)
}

/// A sign-out: the refresh token of the session to end. Without one, the bearer token's user is
/// signed out everywhere. Any other field is refused (422), so that a mistyped field name does
/// not turn a sign-out of one session into a sign-out everywhere.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(as = auth::LogoutRequest)]
#[serde(deny_unknown_fields)]
pub struct LogoutRequest {
    pub refresh_token: Option<String>,
}

#[utoipa::path(
    tag = "auth",
    security((), ("bearer" = [])),
    request_body(
        content(
            (Option<LogoutRequest> = "application/x-www-form-urlencoded"),
            (Option<LogoutRequest> = "application/json"),
        ),
        description = "Optional: the refresh token of the session to end (form or JSON). Without it, the bearer token's user is signed out everywhere.",
    ),
    responses(
        (status = 204, description = "Signed out: the refresh token's session ended (its whole family revoked; an unknown token ends nothing), or, with a bearer token alone, every session of the user (every refresh token revoked, every access token issued so far refused)"),
        (status = 401, description = "Neither a refresh token nor a bearer token; or Could not validate credentials, or Inactive user"),
        (status = 413, description = "The body is over the limit"),
        (status = 422, description = "List of failing fields: [{field, message}]"),
    )
)]
#[post("/logout")]
pub async fn logout(
    state: web::Data<AuthState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_optional_body(&req, payload).await?.unwrap_or_default();
    match body.refresh_token {
        Some(token) => {
            refuse_nul(&[("refresh_token", &token)])?;
            state.service.logout(Logout::Session(token)).await?;
        }
        None => {
            if bearer_token(&req).is_none() {
                return Err(AuthFailure::NotAuthenticated.into());
            }
            let user = state.current_user(&req).await?;
            state.service.logout(Logout::Everywhere(user.id)).await?;
        }
    }
    Ok(HttpResponse::NoContent()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish())
}

/// The sign-out body: none, a form, or JSON (read with the module's limits and errors).
async fn read_optional_body(
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<Option<LogoutRequest>, ApiError> {
    let headers = req.headers();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok());
    if matches!(length, None | Some("0")) && !headers.contains_key(header::TRANSFER_ENCODING) {
        return Ok(None);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut payload = payload.into_inner();
    if content_type.starts_with("application/json") {
        let body = kernel::http::Json::<LogoutRequest>::from_request(req, &mut payload)
            .await
            .map_err(as_api_error)?;
        Ok(Some(body.into_inner()))
    } else {
        let body = web::Form::<LogoutRequest>::from_request(req, &mut payload)
            .await
            .map_err(as_api_error)?;
        Ok(Some(body.into_inner()))
    }
}

/// An extractor's error as the answer it renders.
fn as_api_error(e: actix_web::Error) -> ApiError {
    match e.as_error::<ApiError>() {
        Some(error) => error.clone(),
        None => ApiError::unprocessable(e.to_string()),
    }
}
