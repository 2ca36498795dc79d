//! Identity across modules: the caller as a [`Principal`], resolved from a bearer token by an
//! [`Authenticator`] (implemented by auth-core). Modules never import auth-core: they receive an
//! `Option<Arc<dyn Authenticator>>` (`None` when the auth module is not mounted) through
//! [`Identity`] in the app data, and use the [`Caller`] extractor.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use serde::{Deserialize, Serialize};

use crate::ApiError;

pub const NOT_AUTHENTICATED: &str = "Not authenticated";
pub const INVALID_CREDENTIALS: &str = "Could not validate credentials";
pub const INACTIVE_USER: &str = "Inactive user";
pub const INSUFFICIENT_PERMISSIONS: &str = "Insufficient permissions";

/// A user's role. Ordered: `User < Moderator < Admin`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Moderator,
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::User, Role::Moderator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Moderator => "moderator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(raw: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == raw)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Principal {
    pub user_id: i64,
    pub email: String,
    pub full_name: Option<String>,
    pub role: Role,
    pub is_active: bool,
}

impl Principal {
    /// 403 `Insufficient permissions` unless the caller has one of `roles`.
    pub fn require_role(&self, roles: &[Role]) -> Result<(), ApiError> {
        if roles.contains(&self.role) {
            Ok(())
        } else {
            Err(ApiError::forbidden(INSUFFICIENT_PERMISSIONS))
        }
    }

    /// The name shown for this user: the full name, else the e-mail address.
    pub fn display_name(&self) -> &str {
        self.full_name.as_deref().unwrap_or(&self.email)
    }
}

/// Why a token did not resolve to an active user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// No bearer token was sent.
    #[error("{NOT_AUTHENTICATED}")]
    NotAuthenticated,
    /// The token is malformed, tampered with, expired, or names a user that no longer exists.
    #[error("{INVALID_CREDENTIALS}")]
    InvalidCredentials,
    /// The user exists but is deactivated.
    #[error("{INACTIVE_USER}")]
    Inactive,
    /// The user store could not be read.
    #[error("authentication unavailable: {0}")]
    Unavailable(String),
}

impl From<AuthFailure> for ApiError {
    fn from(f: AuthFailure) -> Self {
        match f {
            AuthFailure::NotAuthenticated => ApiError::unauthorized(NOT_AUTHENTICATED),
            AuthFailure::InvalidCredentials => ApiError::unauthorized(INVALID_CREDENTIALS),
            AuthFailure::Inactive => ApiError::unauthorized(INACTIVE_USER),
            AuthFailure::Unavailable(cause) => ApiError::internal(cause),
        }
    }
}

/// Resolves a bearer token to an active user.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure>;
}

/// The bearer token of a request (`Authorization: Bearer <token>`; the scheme is case-insensitive).
pub fn bearer_token(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The authenticator of the running service, registered as app data by whoever mounts a module:
/// `Identity(None)` when the auth module is not mounted.
#[derive(Clone, Default)]
pub struct Identity(pub Option<Arc<dyn Authenticator>>);

impl Identity {
    pub fn new(authenticator: Option<Arc<dyn Authenticator>>) -> web::Data<Identity> {
        web::Data::new(Identity(authenticator))
    }

    pub fn is_enabled(&self) -> bool {
        self.0.is_some()
    }

    /// The active user behind the request's bearer token; 401 with the spec's texts otherwise.
    /// `Ok(None)` when auth is not mounted.
    pub async fn caller(&self, req: &HttpRequest) -> Result<Option<Principal>, ApiError> {
        let Some(authenticator) = &self.0 else {
            return Ok(None);
        };
        let token = bearer_token(req).ok_or(AuthFailure::NotAuthenticated)?;
        Ok(Some(authenticator.authenticate(token).await?))
    }

    /// Like [`Identity::caller`], but a request without a token is anonymous (`Ok(None)`) rather
    /// than an error. A token that is sent must be valid.
    pub async fn optional_caller(&self, req: &HttpRequest) -> Result<Option<Principal>, ApiError> {
        match (&self.0, bearer_token(req)) {
            (Some(authenticator), Some(token)) => {
                Ok(Some(authenticator.authenticate(token).await?))
            }
            _ => Ok(None),
        }
    }
}

fn identity_of(req: &HttpRequest) -> Result<web::Data<Identity>, ApiError> {
    req.app_data::<web::Data<Identity>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("no Identity registered in the app data"))
}

/// Extractor: when auth is mounted, the authenticated active caller (401 otherwise); when it is
/// not mounted, `Caller(None)` and the endpoint is open.
pub struct Caller(pub Option<Principal>);

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Ok(Caller(identity_of(&req)?.caller(&req).await?)) })
    }
}

/// Extractor: the authenticated active caller; 401 when there is none or auth is not mounted.
pub struct CurrentUser(pub Principal);

impl FromRequest for CurrentUser {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            match identity_of(&req)?.caller(&req).await? {
                Some(principal) => Ok(CurrentUser(principal)),
                None => Err(AuthFailure::NotAuthenticated.into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn bearer_tokens_are_parsed() {
        let req = TestRequest::default()
            .insert_header((header::AUTHORIZATION, "bearer abc.def"))
            .to_http_request();
        assert_eq!(bearer_token(&req), Some("abc.def"));
        let req = TestRequest::default()
            .insert_header((header::AUTHORIZATION, "Basic abc"))
            .to_http_request();
        assert_eq!(bearer_token(&req), None);
        let req = TestRequest::default().to_http_request();
        assert_eq!(bearer_token(&req), None);
    }

    #[test]
    fn roles_round_trip_and_order() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert!(Role::Admin > Role::Moderator && Role::Moderator > Role::User);
        assert_eq!(Role::parse("root"), None);
    }
}
