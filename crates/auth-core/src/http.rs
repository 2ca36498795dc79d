//! HTTP handlers of the auth module (mounted at `/auth` and `/api/v1/auth`): accounts and
//! login here, the account lifecycle in [`account`], refresh and sign-out in [`sessions`].

pub mod account;
pub mod sessions;

use kernel::Timestamp;
use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, get, patch, post, web};
use kernel::identity::{AuthFailure, Caller, bearer_token, need};
use kernel::pagination::PageParams;
use kernel::{ApiError, FieldError, Role};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::oauth;
use crate::service::{AccessToken, AuthService, Registration, User, UserPatch};

/// What the handlers share.
pub struct AuthState {
    pub service: Arc<dyn AuthService>,
    /// Whether rate limits are on (then the client address is passed to the service).
    pub rate_limit: bool,
}

impl AuthState {
    fn client_ip(&self, req: &HttpRequest) -> Option<String> {
        self.rate_limit
            .then(|| kernel::client_addr::client_ip(req).map(|ip| ip.to_string()))
            .flatten()
    }

    /// The active user behind the request's bearer token, as the full account (`/me` answers
    /// fields a `Principal` does not carry). The other routes use the kernel's extractors.
    pub(crate) async fn current_user(&self, req: &HttpRequest) -> Result<User, ApiError> {
        let bearer = bearer_token(req).ok_or(AuthFailure::NotAuthenticated)?;
        if let Some(answer) = self.service.cached_user_for_token(bearer) {
            return answer.map_err(Into::into);
        }
        Ok(self.service.user_for_token(bearer).await?)
    }
}

/// The administrator behind an admin route (always present: this module is its own identity).
fn admin_id(admin: &Caller<need::Admin>) -> Result<i64, ApiError> {
    admin
        .user_id()
        .ok_or_else(|| AuthFailure::NotAuthenticated.into())
}

/// A user account. Never carries any password field.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = auth::UserResponse)]
pub struct UserResponse {
    pub id: i64,
    pub email: String,
    pub full_name: Option<String>,
    pub is_active: bool,
    pub role: Role,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Whether the address was verified (through a verification or password-reset mail).
    pub email_verified: bool,
    /// The user's plan (`free`, or the paid one): in `/me` only, when the payment module is
    /// mounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub plan: Option<String>,
}

impl From<User> for UserResponse {
    fn from(u: User) -> Self {
        UserResponse {
            id: u.id,
            email: u.email,
            full_name: u.full_name,
            is_active: u.is_active,
            role: u.role,
            created_at: u.created_at.into(),
            updated_at: u.updated_at.into(),
            email_verified: u.email_verified,
            plan: None,
        }
    }
}

/// Registration. `email` and `password` are required; `full_name` is 1 to 100 characters when
/// given; `password` is 8 characters to 72 bytes.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::UserCreate)]
pub struct UserCreate {
    #[schema(required = true, example = "ada@example.com")]
    pub email: Option<String>,
    #[schema(required = true, min_length = 8, example = "correct horse battery")]
    pub password: Option<String>,
    #[schema(min_length = 1, max_length = 100)]
    pub full_name: Option<String>,
    /// Default true.
    pub is_active: Option<bool>,
}

/// The OAuth 2.0 password-grant form (RFC 6749 §4.3.2): `username` holds the e-mail address.
/// `grant_type`, when sent, must be `password`; any other field (`scope`, `client_id`,
/// `client_secret`) is accepted and ignored: the endpoint serves users, not registered clients.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::LoginForm)]
pub struct LoginForm {
    #[schema(required = true)]
    pub username: Option<String>,
    #[schema(required = true)]
    pub password: Option<String>,
    /// `password` (the only grant served); may be left out.
    #[schema(pattern = "^password$")]
    pub grant_type: Option<String>,
}

/// An access token and its refresh token (RFC 6749 §5.1).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = auth::TokenResponse)]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: String,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    /// Opaque and single-use: `POST /refresh` trades it for a new pair
    /// (`REFRESH_TOKEN_EXPIRE_DAYS`).
    pub refresh_token: String,
}

/// The answer of the token and refresh endpoints: the pair, cached nowhere.
fn token_answer(pair: AccessToken) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::PRAGMA, "no-cache"))
        .json(TokenResponse {
            access_token: pair.token,
            token_type: "bearer".to_owned(),
            expires_in: pair.expires_in,
            refresh_token: pair.refresh_token,
        })
}

/// An error of the token endpoint: the `detail` every error carries, and RFC 6749 §5.2's `error` and
/// `error_description` for OAuth 2.0 clients.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = auth::TokenError)]
pub struct TokenError {
    /// The error's text (`Incorrect email or password`, `Inactive user`), or the failing fields.
    #[schema(value_type = kernel::openapi::ErrorDetail)]
    pub detail: serde_json::Value,
    /// `invalid_request`, `invalid_grant`, `unsupported_grant_type`, `temporarily_unavailable`
    /// or `server_error`.
    pub error: String,
    pub error_description: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = auth::UserListResponse)]
pub struct UserListResponse {
    pub users: Vec<UserResponse>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

/// An administrator's change to a user: its active flag and/or its role.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = auth::UserUpdate)]
#[serde(deny_unknown_fields)]
pub struct UserUpdate {
    pub is_active: Option<bool>,
    pub role: Option<Role>,
}

#[utoipa::path(
    tag = "auth",
    request_body = UserCreate,
    responses(
        (status = 201, description = "Account created", body = UserResponse),
        (status = 400, description = "Email already registered"),
        (status = 422, description = "List of failing fields: [{field, message}]"),
        (status = 429, description = "Too many attempts from this client (AUTH_RATE_LIMIT): retry after `Retry-After` seconds"),
    )
)]
#[post("/register")]
pub async fn register(
    state: web::Data<AuthState>,
    req: HttpRequest,
    body: kernel::http::Json<UserCreate>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let input = Registration {
        email: body.email,
        password: body.password,
        full_name: body.full_name,
        is_active: body.is_active,
    };
    let ip = state.client_ip(&req);
    let user = state.service.register(input, ip.as_deref()).await?;
    Ok(HttpResponse::Created().json(UserResponse::from(user)))
}

#[utoipa::path(
    tag = "auth",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, body = TokenResponse, headers(
            ("Cache-Control" = String, description = "no-store"),
            ("Pragma" = String, description = "no-cache"),
        )),
        (status = 400, description = "Unsupported grant_type (error: unsupported_grant_type)", body = TokenError),
        (status = 401, description = "Incorrect email or password, or Inactive user (error: invalid_grant)", body = TokenError),
        (status = 403, description = "Email not verified, when AUTH_REQUIRE_VERIFIED_EMAIL is on (error: invalid_grant)", body = TokenError),
        (status = 413, description = "The form is over the body limit (error: invalid_request)", body = TokenError),
        (status = 422, description = "List of failing fields: [{field, message}] (error: invalid_request)", body = TokenError),
        (status = 429, description = "Too many attempts from this client (AUTH_RATE_LIMIT): retry after `Retry-After` seconds (error: temporarily_unavailable)", body = TokenError),
        (status = 503, description = "The user store does not answer (error: temporarily_unavailable)", body = TokenError),
    )
)]
#[post("/token")]
pub async fn token(
    state: web::Data<AuthState>,
    req: HttpRequest,
    form: Result<web::Form<LoginForm>, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let form = form.map_err(|e| match e.as_error::<ApiError>() {
        Some(error) => error.clone(),
        None => ApiError::unprocessable(e.to_string()),
    });
    match login(&state, &req, form).await {
        Ok(token) => Ok(token_answer(token)),
        Err(error) => Err(oauth::with_oauth_fields(error)),
    }
}

/// The password grant: the form's checks in the order a client fixes them, then the service.
async fn login(
    state: &AuthState,
    req: &HttpRequest,
    form: Result<web::Form<LoginForm>, ApiError>,
) -> Result<AccessToken, ApiError> {
    let form = form?.into_inner();
    oauth::check_grant_type(form.grant_type.as_deref())?;
    let [username, password] =
        required([("username", form.username), ("password", form.password)])?;
    refuse_nul(&[("username", &username), ("password", &password)])?;
    let ip = state.client_ip(req);
    Ok(state
        .service
        .login(&username, &password, ip.as_deref())
        .await?)
}

/// 422 naming every field that holds a NUL character (PostgreSQL cannot store one).
fn refuse_nul(fields: &[(&str, &str)]) -> Result<(), ApiError> {
    let with_nul: Vec<FieldError> = fields
        .iter()
        .filter(|(_, value)| value.contains('\0'))
        .map(|(field, _)| FieldError::new(*field, crate::domain::MSG_NUL))
        .collect();
    if with_nul.is_empty() {
        Ok(())
    } else {
        Err(ApiError::field_list(with_nul))
    }
}

/// 422 listing the required fields that are missing, else the values.
fn required<const N: usize>(fields: [(&str, Option<String>); N]) -> Result<[String; N], ApiError> {
    let missing: Vec<FieldError> = fields
        .iter()
        .filter(|(_, value)| value.is_none())
        .map(|(field, _)| FieldError::new(*field, crate::domain::MSG_REQUIRED))
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::field_list(missing));
    }
    Ok(fields.map(|(_, value)| value.unwrap_or_default()))
}

#[utoipa::path(
    tag = "auth",
    security(("bearer" = [])),
    responses(
        (status = 200, body = UserResponse),
        (status = 401, description = "Not authenticated, Could not validate credentials, or Inactive user"),
    )
)]
#[get("/me")]
pub async fn me(
    state: web::Data<AuthState>,
    req: HttpRequest,
) -> Result<web::Json<UserResponse>, ApiError> {
    let user = state.current_user(&req).await?;
    // Without plans, no unit of work is started for them.
    let plan = match state.service.offers_plans() {
        false => None,
        true => state.service.plan(user.id).await?.map(|plan| plan.name),
    };
    Ok(web::Json(UserResponse {
        plan,
        ..UserResponse::from(user)
    }))
}

#[utoipa::path(
    tag = "auth",
    security(("bearer" = [])),
    params(PageParams),
    responses(
        (status = 200, body = UserListResponse),
        (status = 401), (status = 403, description = "Insufficient permissions"),
    )
)]
#[get("/users")]
pub async fn list_users(
    admin: Caller<need::Admin>,
    state: web::Data<AuthState>,
    query: web::Query<PageParams>,
) -> Result<web::Json<UserListResponse>, ApiError> {
    admin_id(&admin)?;
    let page = query.into_inner().resolve()?;
    let (users, total) = state.service.list_users(page).await?;
    Ok(web::Json(UserListResponse {
        users: users.into_iter().map(UserResponse::from).collect(),
        total,
        page: page.page,
        page_size: page.page_size,
    }))
}

#[utoipa::path(
    tag = "auth",
    security(("bearer" = [])),
    params(("user_id" = i64, Path, description = "The user's id")),
    request_body = UserUpdate,
    responses(
        (status = 200, body = UserResponse),
        (status = 400, description = "Admins cannot deactivate or demote themselves"),
        (status = 401), (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "User not found"),
    )
)]
#[patch("/users/{user_id}")]
pub async fn update_user(
    admin: Caller<need::Admin>,
    state: web::Data<AuthState>,
    path: web::Path<i64>,
    body: Result<kernel::http::Json<UserUpdate>, actix_web::Error>,
) -> Result<web::Json<UserResponse>, actix_web::Error> {
    // The body's own error waits until the caller is known to be an admin: 403 before 422.
    let admin_id = admin_id(&admin)?;
    let UserUpdate { is_active, role } = body?.into_inner();
    if is_active.is_none() && role.is_none() {
        return Err(ApiError::with_detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            serde_json::json!([FieldError::new("body", "Send is_active and/or role")]),
        )
        .into());
    }
    let patch = UserPatch { is_active, role };
    let id = path.into_inner();
    let user = state
        .service
        .update_user(Some(admin_id), id, patch)
        .await
        .map_err(ApiError::from)?;
    Ok(web::Json(user.into()))
}
