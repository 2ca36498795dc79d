//! Identity across modules: the caller as a [`Principal`], resolved from a bearer token by an
//! [`Authenticator`] (implemented by auth-core). Modules never import auth-core: they receive an
//! `Option<Arc<dyn Authenticator>>` at build (`None` when the auth module is not mounted: the
//! module is then open by design), register it as [`Identity`] app data of their routes
//! ([`crate::module::Deps::identity`]), and use the extractors [`ActiveUser`], [`MinRole`] and
//! [`OptionalUser`].

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
            AuthFailure::Unavailable(cause) => ApiError::service_unavailable(
                "Authentication temporarily unavailable, try again shortly",
            )
            .header(
                header::RETRY_AFTER,
                actix_web::http::header::HeaderValue::from(1u32),
            )
            .caused_by(cause),
        }
    }
}

/// Resolves a bearer token to an active user.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure>;

    /// The answer when it can be given from memory alone (a token that does not verify, or a user
    /// in a read cache); `None` when it needs the database. Requests try this first and run
    /// [`authenticate`](Self::authenticate) as a unit of work only when it says `None`.
    fn cached(&self, _token: &str) -> Option<Result<Principal, AuthFailure>> {
        None
    }
}

impl crate::capability::Capability for dyn Authenticator {
    const NAME: &'static str = "an authenticator (identity)";
}

/// The bearer token of a request (`Authorization: Bearer <token>`; the scheme is case-insensitive).
pub fn bearer_token(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The authenticator a module was built with, registered by the module as app data of its own
/// routes ([`crate::module::Deps::identity`]): `Identity(None)` when no identity provider is
/// mounted.
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
        Ok(Some(resolve(authenticator, token).await?))
    }

    /// Like [`Identity::caller`], but a request without a token is anonymous (`Ok(None)`) rather
    /// than an error. A token that is sent must be valid.
    pub async fn optional_caller(&self, req: &HttpRequest) -> Result<Option<Principal>, ApiError> {
        match (&self.0, bearer_token(req)) {
            (Some(authenticator), Some(token)) => Ok(Some(resolve(authenticator, token).await?)),
            _ => Ok(None),
        }
    }
}

/// Resolves a token on a task of its own: actix extracts a handler's arguments together and drops
/// the others when one fails (a malformed body, say), and a lookup dropped halfway through a
/// database query must not be cancelled there. The task finishes the lookup; nobody waits for it.
async fn resolve(
    authenticator: &Arc<dyn Authenticator>,
    token: &str,
) -> Result<Principal, AuthFailure> {
    if let Some(answer) = authenticator.cached(token) {
        return answer;
    }
    let authenticator = authenticator.clone();
    let token = token.to_owned();
    crate::db::spawn_unit(async move { authenticator.authenticate(&token).await })
        .await
        .unwrap_or_else(|e| Err(AuthFailure::Unavailable(e.to_string())))
}

fn identity_of(req: &HttpRequest) -> Result<web::Data<Identity>, ApiError> {
    req.app_data::<web::Data<Identity>>()
        .cloned()
        .ok_or_else(|| {
            ApiError::internal(
                "no Identity in the app data: a module registers Deps::identity() in its routes",
            )
        })
}

/// The active caller of a request on a module built with `identity`; `None` when the module is
/// open (built without an authenticator).
async fn active_caller(
    req: &HttpRequest,
    min: Option<Role>,
) -> Result<Option<Principal>, ApiError> {
    let Some(principal) = identity_of(req)?.caller(req).await? else {
        return Ok(None);
    };
    if !principal.is_active {
        return Err(AuthFailure::Inactive.into());
    }
    if let Some(min) = min
        && principal.role < min
    {
        return Err(ApiError::forbidden(INSUFFICIENT_PERMISSIONS));
    }
    Ok(Some(principal))
}

/// Extractor: the active user behind the request's bearer token, 401 with the spec's texts
/// otherwise (`Not authenticated`, `Could not validate credentials`, `Inactive user`). On a
/// module built without an authenticator the endpoint is open by design: `ActiveUser(None)`.
///
/// Put identity extractors first among a handler's arguments, so that a request without a
/// token is refused before its body is read.
pub struct ActiveUser(pub Option<Principal>);

impl FromRequest for ActiveUser {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Ok(ActiveUser(active_caller(&req, None).await?)) })
    }
}

/// A minimum role, for [`MinRole`].
pub trait RoleBound {
    const ROLE: Role;
}

/// The role markers of [`MinRole`]: `MinRole<roles::Admin>`, `MinRole<roles::Moderator>`.
pub mod roles {
    use super::{Role, RoleBound};

    /// Administrators only.
    pub struct Admin;
    /// Moderators and administrators.
    pub struct Moderator;

    impl RoleBound for Admin {
        const ROLE: Role = Role::Admin;
    }

    impl RoleBound for Moderator {
        const ROLE: Role = Role::Moderator;
    }
}

/// Extractor: like [`ActiveUser`], and the user's role must be at least `R::ROLE` (403
/// `Insufficient permissions` otherwise). Open (`None`) on a module built without an
/// authenticator.
pub struct MinRole<R: RoleBound>(pub Option<Principal>, std::marker::PhantomData<R>);

impl<R: RoleBound> MinRole<R> {
    pub fn principal(&self) -> Option<&Principal> {
        self.0.as_ref()
    }
}

impl<R: RoleBound + 'static> FromRequest for MinRole<R> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let principal = active_caller(&req, Some(R::ROLE)).await?;
            Ok(MinRole(principal, std::marker::PhantomData))
        })
    }
}

/// Extractor: the user behind a bearer token when one is sent (it must then be valid and
/// active), `None` for an anonymous request or on a module built without an authenticator.
pub struct OptionalUser(pub Option<Principal>);

impl FromRequest for OptionalUser {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let principal = identity_of(&req)?.optional_caller(&req).await?;
            if principal.as_ref().is_some_and(|p| !p.is_active) {
                return Err(AuthFailure::Inactive.into());
            }
            Ok(OptionalUser(principal))
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

    struct Stub;

    #[async_trait::async_trait]
    impl Authenticator for Stub {
        async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
            let role = match token {
                "admin" => Role::Admin,
                "user" => Role::User,
                "inactive" => return Err(AuthFailure::Inactive),
                _ => return Err(AuthFailure::InvalidCredentials),
            };
            Ok(Principal {
                user_id: 1,
                email: "a@example.com".into(),
                full_name: None,
                role,
                is_active: true,
            })
        }
    }

    /// The status the extractors answer for a token (`None`: no header), with or without an
    /// authenticator: 200 when they yield a caller or the module is open.
    async fn statuses(authenticator: bool, token: Option<&str>) -> [u16; 3] {
        use actix_web::{App, HttpResponse, test as atest};
        let identity =
            Identity::new(authenticator.then(|| Arc::new(Stub) as Arc<dyn Authenticator>));
        let app = atest::init_service(
            App::new()
                .app_data(identity)
                .route(
                    "/active",
                    web::get().to(|_: ActiveUser| async { HttpResponse::Ok().finish() }),
                )
                .route(
                    "/admin",
                    web::get().to(|_: MinRole<roles::Admin>| async { HttpResponse::Ok().finish() }),
                )
                .route(
                    "/optional",
                    web::get().to(|_: OptionalUser| async { HttpResponse::Ok().finish() }),
                ),
        )
        .await;
        let mut out = [0; 3];
        for (i, path) in ["/active", "/admin", "/optional"].iter().enumerate() {
            let mut req = atest::TestRequest::get().uri(path);
            if let Some(t) = token {
                req = req.insert_header((header::AUTHORIZATION, format!("Bearer {t}")));
            }
            out[i] = atest::call_service(&app, req.to_request())
                .await
                .status()
                .as_u16();
        }
        out
    }

    #[actix_web::test]
    async fn extractors_answer_the_spec_statuses() {
        assert_eq!(statuses(true, None).await, [401, 401, 200]);
        assert_eq!(statuses(true, Some("user")).await, [200, 403, 200]);
        assert_eq!(statuses(true, Some("admin")).await, [200, 200, 200]);
        assert_eq!(statuses(true, Some("inactive")).await, [401, 401, 401]);
        assert_eq!(statuses(true, Some("forged")).await, [401, 401, 401]);
        // Built without an authenticator: open, whatever is sent.
        assert_eq!(statuses(false, None).await, [200, 200, 200]);
        assert_eq!(statuses(false, Some("forged")).await, [200, 200, 200]);
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
