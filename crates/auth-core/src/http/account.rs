//! The account lifecycle: verifying the address, and resetting a forgotten password. The
//! answers about an address (`verify/request` without a token, `password/forgot`) are the same
//! whether or not an account has it.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, post, web};
use kernel::ApiError;
use kernel::http::{Json, OptionalJson};
use kernel::identity::{AuthFailure, bearer_token};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{AuthState, UserResponse, refuse_nul, required};

/// A mail asked for an address.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::MailRequest)]
pub struct MailRequest {
    #[schema(required = true, example = "ada@example.com")]
    pub email: Option<String>,
}

/// A verification mail asked for: the address, required without a bearer token (422 `Field
/// required` otherwise) and ignored with one (the token's user).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::VerificationRequest)]
pub struct VerificationRequest {
    #[schema(example = "ada@example.com")]
    pub email: Option<String>,
}

/// A token from a mail.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::VerifyEmailRequest)]
pub struct VerifyEmailRequest {
    #[schema(required = true)]
    pub token: Option<String>,
}

/// A new password, with the token of a reset mail.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::ResetPasswordRequest)]
pub struct ResetPasswordRequest {
    #[schema(required = true)]
    pub token: Option<String>,
    /// 8 characters to 72 bytes, as at registration.
    #[schema(required = true, min_length = 8)]
    pub password: Option<String>,
}

/// What was done, in words.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = auth::MessageResponse)]
pub struct MessageResponse {
    pub message: String,
}

fn message(status: StatusCode, text: &str) -> HttpResponse {
    HttpResponse::build(status).json(MessageResponse {
        message: text.to_owned(),
    })
}

/// Sent when an address may have an account: the same text whether or not it has one.
const VERIFY_REQUESTED: &str =
    "If an account with this address needs verifying, a verification link has been sent";
const RESET_REQUESTED: &str =
    "If an account with this address exists, a password reset link has been sent";

#[utoipa::path(
    tag = "auth",
    security((), ("bearer" = [])),
    request_body(content = Option<VerificationRequest>, description = "Without a bearer token: the address to verify. With one: none, or anything of this shape (the token's user is verified)."),
    responses(
        (status = 202, description = "A verification mail is on its way (without a token: when an active account with this unverified address exists; the answer is the same either way)", body = MessageResponse),
        (status = 401, description = "Neither a bearer token nor an address; or Could not validate credentials, or Inactive user"),
        (status = 409, description = "Email already verified (with a bearer token)"),
        (status = 413, description = "The body is over the limit"),
        (status = 422, description = "List of failing fields: [{field, message}]"),
        (status = 429, description = "Too many verification mails for this address this hour (AUTH_MAIL_LIMIT_PER_HOUR): retry after `Retry-After` seconds"),
        (status = 502, description = "The mailer could not send the mail (with a bearer token)"),
    )
)]
#[post("/verify/request")]
pub async fn request_verification(
    state: web::Data<AuthState>,
    req: HttpRequest,
    body: OptionalJson<VerificationRequest>,
) -> Result<HttpResponse, ApiError> {
    if bearer_token(&req).is_some() {
        let user = state.current_user(&req).await?;
        state.service.request_verification(&user).await?;
        return Ok(message(
            StatusCode::ACCEPTED,
            "A verification link has been sent",
        ));
    }
    let Some(body) = body.0 else {
        return Err(AuthFailure::NotAuthenticated.into());
    };
    let [email] = required([("email", body.email)])?;
    state.service.request_verification_for(&email).await?;
    Ok(message(StatusCode::ACCEPTED, VERIFY_REQUESTED))
}

#[utoipa::path(
    tag = "auth",
    request_body = VerifyEmailRequest,
    responses(
        (status = 200, description = "The address is verified", body = UserResponse),
        (status = 400, description = "Invalid or expired token (unknown, expired, or used)"),
        (status = 413, description = "The body is over the limit"),
        (status = 422, description = "List of failing fields: [{field, message}]"),
    )
)]
#[post("/verify")]
pub async fn verify_email(
    state: web::Data<AuthState>,
    body: Json<VerifyEmailRequest>,
) -> Result<web::Json<UserResponse>, ApiError> {
    let [token] = required([("token", body.into_inner().token)])?;
    refuse_nul(&[("token", &token)])?;
    let user = state.service.verify_email(&token).await?;
    Ok(web::Json(user.into()))
}

#[utoipa::path(
    tag = "auth",
    request_body = MailRequest,
    responses(
        (status = 202, description = "A reset mail is on its way when an active account has this address; the answer is the same either way", body = MessageResponse),
        (status = 413, description = "The body is over the limit"),
        (status = 422, description = "List of failing fields: [{field, message}]"),
        (status = 429, description = "Too many reset mails for this address this hour (AUTH_MAIL_LIMIT_PER_HOUR): retry after `Retry-After` seconds"),
    )
)]
#[post("/password/forgot")]
pub async fn forgot_password(
    state: web::Data<AuthState>,
    body: Json<MailRequest>,
) -> Result<HttpResponse, ApiError> {
    let [email] = required([("email", body.into_inner().email)])?;
    state.service.forgot_password(&email).await?;
    Ok(message(StatusCode::ACCEPTED, RESET_REQUESTED))
}

#[utoipa::path(
    tag = "auth",
    request_body = ResetPasswordRequest,
    responses(
        (status = 200, description = "The password is changed; every session of the account ended (refresh tokens revoked, access tokens issued before refused)", body = MessageResponse),
        (status = 400, description = "Invalid or expired token (unknown, expired, or used)"),
        (status = 413, description = "The body is over the limit"),
        (status = 422, description = "List of failing fields: [{field, message}] (the password rules of registration)"),
    )
)]
#[post("/password/reset")]
pub async fn reset_password(
    state: web::Data<AuthState>,
    body: Json<ResetPasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let [token, password] = required([("token", body.token), ("password", body.password)])?;
    refuse_nul(&[("token", &token)])?;
    state.service.reset_password(&token, &password).await?;
    Ok(message(StatusCode::OK, "Password has been reset"))
}
