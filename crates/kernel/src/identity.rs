//! Identity across modules: the caller as a [`Principal`], resolved from a bearer token by an
//! [`Authenticator`] (a capability, provided by auth-core). Modules never import auth-core: they
//! find the authenticator in their `Deps` at build (none when no identity provider is mounted:
//! the module is then open by design), register it as [`Identity`] app data of their routes
//! ([`crate::module::Deps::identity`]), and see each caller as one [`Access`] (a user, anonymous,
//! or an open deployment) through the [`Caller`] extractor and its requirement markers
//! ([`need`]).

use std::future::Future;
use std::marker::PhantomData;
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
    /// The look-up failed unexpectedly (its unit of work panicked): a 500.
    #[error("authentication failed: {0}")]
    Internal(String),
}

impl From<crate::DbError> for AuthFailure {
    /// A failed unit of work is a 500; any other database failure means the user store could
    /// not be read (503).
    fn from(e: crate::DbError) -> Self {
        match e {
            crate::DbError::Unit(_) => AuthFailure::Internal(e.to_string()),
            other => AuthFailure::Unavailable(other.to_string()),
        }
    }
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
            AuthFailure::Internal(cause) => ApiError::internal(cause),
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
    // ASCII, as `HeaderValue::to_str` checks it, but a word at a time: `to_str` tests the
    // token's bytes one by one, on every authenticated request.
    let bytes = req.headers().get(header::AUTHORIZATION)?.as_bytes();
    let value = std::str::from_utf8(bytes).ok().filter(|v| v.is_ascii())?;
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
}

/// Resolves a token as a unit of work ([`crate::unit::run`]): actix extracts a handler's arguments
/// together and drops the others when one fails (a malformed body, say), and a lookup dropped
/// halfway through a database query must not be cancelled there. The unit finishes the lookup;
/// nobody waits for it. The authenticator's own service calls run inline in that unit.
async fn resolve(
    authenticator: &Arc<dyn Authenticator>,
    token: &str,
) -> Result<Principal, AuthFailure> {
    if let Some(answer) = authenticator.cached(token) {
        return answer;
    }
    let authenticator = authenticator.clone();
    let token = token.to_owned();
    crate::unit::run(async move { authenticator.authenticate(&token).await }).await
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

/// Who calls: the one view of the caller that handlers get, through [`Caller`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// An authenticated, active user.
    User(Principal),
    /// No bearer token, while an identity provider is mounted.
    Anonymous,
    /// No identity provider is mounted: the module is open by design.
    Open,
}

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Anyone; a token that is sent must still be valid and its user active.
    Anyone,
    /// An active user (or an open deployment).
    User,
    /// An active user with at least this role (or an open deployment).
    Role(Role),
}

impl Access {
    /// The caller of `req`: its bearer token's active user, anonymous without a token, open
    /// when the module was built without an identity provider. A token that is sent must be
    /// valid and its user active (401 with the spec's texts otherwise).
    pub async fn of(req: &HttpRequest) -> Result<Access, ApiError> {
        let identity = identity_of(req)?;
        let Some(authenticator) = &identity.0 else {
            return Ok(Access::Open);
        };
        let Some(token) = bearer_token(req) else {
            return Ok(Access::Anonymous);
        };
        let principal = resolve(authenticator, token).await?;
        if !principal.is_active {
            return Err(AuthFailure::Inactive.into());
        }
        Ok(Access::User(principal))
    }

    /// The user, when the caller is one.
    pub fn user(&self) -> Option<&Principal> {
        match self {
            Access::User(principal) => Some(principal),
            Access::Anonymous | Access::Open => None,
        }
    }

    pub fn user_id(&self) -> Option<i64> {
        self.user().map(|p| p.user_id)
    }

    /// Whether no identity provider is mounted.
    pub fn is_open(&self) -> bool {
        *self == Access::Open
    }

    /// Whether the caller has at least `role`; an open deployment has every role.
    pub fn has_role(&self, role: Role) -> bool {
        match self {
            Access::User(principal) => principal.role >= role,
            Access::Anonymous => false,
            Access::Open => true,
        }
    }

    /// `Ok` when the caller meets `need`; 401 `Not authenticated` for an anonymous caller of a
    /// route that needs a user, 403 `Insufficient permissions` for a user below the role.
    pub fn check(&self, need: Need) -> Result<(), ApiError> {
        match (need, self) {
            (Need::Anyone, _) | (_, Access::Open) => Ok(()),
            (_, Access::Anonymous) => Err(AuthFailure::NotAuthenticated.into()),
            (Need::User, Access::User(_)) => Ok(()),
            (Need::Role(role), caller) if caller.has_role(role) => Ok(()),
            (Need::Role(_), Access::User(_)) => Err(ApiError::forbidden(INSUFFICIENT_PERMISSIONS)),
        }
    }
}

/// What a [`Caller`] extractor needs: the markers of [`need`].
pub trait Requirement {
    const NEED: Need;
}

/// The requirement markers of [`Caller`]: `Caller<need::User>`, `Caller<need::Admin>`, ...
pub mod need {
    use super::{Need, Requirement, Role};

    /// Anyone (a sent token must be valid).
    pub struct Anyone;
    /// An active user.
    pub struct User;
    /// A moderator or an administrator.
    pub struct Moderator;
    /// An administrator.
    pub struct Admin;

    impl Requirement for Anyone {
        const NEED: Need = Need::Anyone;
    }
    impl Requirement for User {
        const NEED: Need = Need::User;
    }
    impl Requirement for Moderator {
        const NEED: Need = Need::Role(Role::Moderator);
    }
    impl Requirement for Admin {
        const NEED: Need = Need::Role(Role::Admin);
    }
}

/// Extractor: the caller ([`Access`]), refused unless it meets `R` (401 `Not authenticated`,
/// `Could not validate credentials` or `Inactive user`; 403 `Insufficient permissions`). On a
/// module built without an identity provider every route is open: the caller is
/// [`Access::Open`] and passes every requirement.
///
/// Put it first among a handler's arguments, so that a caller who may not call is refused
/// before the body is read.
pub struct Caller<R: Requirement = need::Anyone>(pub Access, PhantomData<R>);

impl<R: Requirement> std::ops::Deref for Caller<R> {
    type Target = Access;

    fn deref(&self) -> &Access {
        &self.0
    }
}

impl<R: Requirement + 'static> FromRequest for Caller<R> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let access = Access::of(&req).await?;
            access.check(R::NEED)?;
            Ok(Caller(access, PhantomData))
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
        // Bytes past ASCII (a header may carry them) are no token, as `to_str` had it.
        for value in [&b"Bearer abc\xc3\xa9"[..], b"Bearer \xff"] {
            let value = header::HeaderValue::from_bytes(value).unwrap_or_else(|e| panic!("{e}"));
            let req = TestRequest::default()
                .insert_header((header::AUTHORIZATION, value))
                .to_http_request();
            assert_eq!(bearer_token(&req), None);
        }
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
                    web::get().to(|_: Caller<need::User>| async { HttpResponse::Ok().finish() }),
                )
                .route(
                    "/admin",
                    web::get().to(|_: Caller<need::Admin>| async { HttpResponse::Ok().finish() }),
                )
                .route(
                    "/optional",
                    web::get().to(|_: Caller| async { HttpResponse::Ok().finish() }),
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
    fn access_tells_the_three_cases_apart_and_checks_needs() {
        let user = |role| {
            Access::User(Principal {
                user_id: 7,
                email: "a@example.com".into(),
                full_name: None,
                role,
                is_active: true,
            })
        };
        let status = |access: &Access, need| access.check(need).err().map(|e| e.status().as_u16());
        let moderator = user(Role::Moderator);
        assert_eq!(moderator.user_id(), Some(7));
        assert_eq!(status(&moderator, Need::User), None);
        assert_eq!(status(&moderator, Need::Role(Role::Moderator)), None);
        assert_eq!(status(&moderator, Need::Role(Role::Admin)), Some(403));
        assert_eq!(status(&Access::Anonymous, Need::Anyone), None);
        assert_eq!(status(&Access::Anonymous, Need::User), Some(401));
        assert_eq!(
            status(&Access::Anonymous, Need::Role(Role::Admin)),
            Some(401)
        );
        for need in [Need::Anyone, Need::User, Need::Role(Role::Admin)] {
            assert_eq!(status(&Access::Open, need), None);
        }
        assert!(Access::Open.is_open() && Access::Open.user().is_none());
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
