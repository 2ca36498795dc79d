//! The auth service: the rules of registration, login, tokens and user administration; the
//! account lifecycle (verification, password reset) in [`lifecycle`], sessions (refresh tokens,
//! sign-out) in [`sessions`].

mod detached;
mod lifecycle;
mod sessions;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::TimeDelta;
use kernel::cache::ReadCache;
use kernel::capability::Late;
use kernel::identity::AuthFailure;
use kernel::pagination::Page;
use kernel::plans::{Entitlements, Plan};
use kernel::{Authenticator, DbPool, Principal, Role};

use crate::domain::{self, NewAccount};
use crate::error::AuthError;
use crate::mail::{AccountMails, Issued, MailKind};
use crate::passwords::Hasher;
use crate::rate_limit::{Action, RateLimiter};
use crate::store::{self, NewUserRow, UserChanges, UserRow};
use crate::tokens::{TokenKeys, Verified};

pub use sessions::Logout;

/// A user as the service hands it out (never with the password hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub email: String,
    pub full_name: Option<String>,
    pub is_active: bool,
    pub role: Role,
    pub created_at: chrono::NaiveDateTime,
    pub updated_at: chrono::NaiveDateTime,
    /// Whether the address was proven by a verification or password-reset mail.
    pub email_verified: bool,
    /// Access tokens carry it; raised to end every session.
    pub session_version: i32,
}

impl From<UserRow> for User {
    fn from(row: UserRow) -> Self {
        User {
            id: row.id,
            email: row.email,
            full_name: row.full_name,
            is_active: row.is_active,
            role: Role::parse(&row.role).unwrap_or(Role::User),
            created_at: row.created_at,
            updated_at: row.updated_at,
            email_verified: row.email_verified,
            session_version: row.session_version,
        }
    }
}

impl From<&User> for Principal {
    fn from(u: &User) -> Self {
        Principal {
            user_id: u.id,
            email: u.email.clone(),
            full_name: u.full_name.clone(),
            role: u.role,
            is_active: u.is_active,
        }
    }
}

/// What a registration sends, before validation.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    pub email: Option<String>,
    pub password: Option<String>,
    pub full_name: Option<String>,
    pub is_active: Option<bool>,
}

/// A change to a user by an administrator (or the CLI).
#[derive(Debug, Clone, Copy, Default)]
pub struct UserPatch {
    pub is_active: Option<bool>,
    pub role: Option<Role>,
}

/// The caller's address, for rate limits.
pub type ClientIp<'a> = Option<&'a str>;

/// A bearer token as login and refresh issue it, with the refresh token that gets the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessToken {
    pub token: String,
    /// Seconds from now until it expires (`ACCESS_TOKEN_EXPIRE_MINUTES`).
    pub expires_in: i64,
    /// Opaque, single-use: `POST /refresh` trades it for a new pair.
    pub refresh_token: String,
}

#[async_trait]
pub trait AuthService: Send + Sync {
    /// Creates an account (role `user`) and sends its verification mail (not waited for).
    /// 422 with every failing field; 400 when the address is taken.
    async fn register(&self, input: Registration, ip: ClientIp<'_>) -> Result<User, AuthError>;
    /// Checks credentials and issues a bearer token and a refresh token (a new session).
    /// Inactive users with the right password: `Inactive`; unverified ones, when verification
    /// is required: `EmailNotVerified`.
    async fn login(
        &self,
        email: &str,
        password: &str,
        ip: ClientIp<'_>,
    ) -> Result<AccessToken, AuthError>;
    /// The active user behind a token.
    async fn user_for_token(&self, token: &str) -> Result<User, AuthFailure>;
    /// [`user_for_token`](Self::user_for_token)'s answer when memory alone gives it (a token that
    /// does not verify, or a user in the read cache); `None` when it needs the database.
    fn cached_user_for_token(&self, token: &str) -> Option<Result<User, AuthFailure>>;
    async fn list_users(&self, page: Page) -> Result<(Vec<User>, i64), AuthError>;
    async fn find_by_email(&self, email: &str) -> Result<Option<User>, AuthError>;
    /// Changes a user's active flag and/or role. `actor` is the acting admin's id (None for the
    /// CLI): an admin cannot deactivate or demote themselves.
    async fn update_user(
        &self,
        actor: Option<i64>,
        id: i64,
        patch: UserPatch,
    ) -> Result<User, AuthError>;
    /// Creates an account with a given role (the CLI's `users create`), its address taken as
    /// verified (the operator vouches for it).
    async fn create_user(&self, input: Registration, role: Role) -> Result<User, AuthError>;
    /// Trades a refresh token for a new access token and refresh token (RFC 6749 §6). A token
    /// used before revokes its whole family: `InvalidRefreshToken`.
    async fn refresh(&self, refresh_token: &str) -> Result<AccessToken, AuthError>;
    /// Ends one session (a refresh token's family) or every session of a user.
    async fn logout(&self, what: Logout) -> Result<(), AuthError>;
    /// Sends `user` a verification mail and waits for the mailer. `AlreadyVerified` when there
    /// is nothing to verify.
    async fn request_verification(&self, user: &User) -> Result<(), AuthError>;
    /// Sends a verification mail to the account of `email`, if there is an active, unverified
    /// one, without waiting: the answer is the same whether or not the account exists.
    async fn request_verification_for(&self, email: &str) -> Result<(), AuthError>;
    /// Marks the address of a verification token's account verified.
    async fn verify_email(&self, token: &str) -> Result<User, AuthError>;
    /// Sends a password-reset mail to the account of `email`, if there is an active one,
    /// without waiting: the answer is the same whether or not the account exists.
    async fn forgot_password(&self, email: &str) -> Result<(), AuthError>;
    /// Sets a new password with a reset token, and ends every session of the account.
    async fn reset_password(&self, token: &str, password: &str) -> Result<(), AuthError>;
    /// A reset token and link for the account of `email`, without a mail (the CLI's
    /// `users reset-link`).
    async fn reset_link(&self, email: &str) -> Result<(User, Issued), AuthError>;
    /// Whether a module provides plans (payment): then `/me` names the user's plan.
    fn offers_plans(&self) -> bool;
    /// The user's plan (the `plan` of `/me`), when a module provides plans (payment); `None`
    /// otherwise.
    async fn plan(&self, user_id: i64) -> Result<Option<Plan>, AuthError>;
}

/// The settings of the account lifecycle the service applies.
#[derive(Debug, Clone, Copy)]
pub struct Lifecycle {
    /// Login and refresh refuse unverified addresses (`AUTH_REQUIRE_VERIFIED_EMAIL`).
    pub require_verified_email: bool,
    /// `REFRESH_TOKEN_EXPIRE_DAYS`.
    pub refresh_lifetime: TimeDelta,
    /// Mails per address and hour (`AUTH_MAIL_LIMIT_PER_HOUR`).
    pub mail_limit_per_hour: u64,
}

/// What the service is made of.
pub struct Parts {
    pub pool: DbPool,
    pub keys: TokenKeys,
    pub hasher: Hasher,
    /// The per-IP limits of register and login (`AUTH_RATE_LIMIT`).
    pub limiter: RateLimiter,
    /// The per-address limits of the mails.
    pub mail_limiter: RateLimiter,
    pub mails: AccountMails,
    pub lifecycle: Lifecycle,
    pub read_cache: bool,
    /// The users' plans, when a module provides them (payment), used late.
    pub entitlements: Late<dyn Entitlements>,
}

pub struct AuthServiceImpl {
    pool: DbPool,
    keys: TokenKeys,
    hasher: Hasher,
    limiter: RateLimiter,
    mail_limiter: RateLimiter,
    mails: AccountMails,
    lifecycle: Lifecycle,
    /// The users behind tokens, by id (`READ_CACHE`): cleared by every change made here, and
    /// never older than a second, so a user deactivated elsewhere is refused within it.
    users: ReadCache<i64, User>,
    entitlements: Late<dyn Entitlements>,
}

/// Users kept at most in the token cache.
const USER_CACHE_ENTRIES: usize = 10_000;

impl AuthServiceImpl {
    pub fn new(parts: Parts) -> Self {
        Self {
            pool: parts.pool,
            keys: parts.keys,
            hasher: parts.hasher,
            limiter: parts.limiter,
            mail_limiter: parts.mail_limiter,
            mails: parts.mails,
            lifecycle: parts.lifecycle,
            users: ReadCache::new(parts.read_cache, USER_CACHE_ENTRIES),
            entitlements: parts.entitlements,
        }
    }

    /// How many bcrypt verifications logins have run.
    pub fn password_checks(&self) -> u64 {
        self.hasher.verifications()
    }

    async fn limit(&self, action: Action, ip: ClientIp<'_>) -> Result<(), AuthError> {
        match ip {
            Some(ip) => self.limiter.check(action, ip).await,
            None => Ok(()),
        }
    }

    async fn insert_account(
        &self,
        account: NewAccount,
        email_verified: bool,
    ) -> Result<User, AuthError> {
        let hashed = self.hasher.hash(&account.password).await?;
        let now = kernel::time::now();
        let row = NewUserRow {
            email: &account.email.address,
            email_key: &account.email.key,
            full_name: account.full_name.as_deref(),
            hashed_password: &hashed,
            is_active: account.is_active,
            role: account.role.as_str(),
            created_at: now,
            updated_at: now,
            email_verified,
        };
        let mut pooled = self.pool.get().await?;
        match store::insert(&mut pooled.conn(), &row).await {
            Ok(row) => Ok(row.into()),
            Err(e) if kernel::db::is_unique_violation(&e) => Err(AuthError::EmailTaken),
            Err(e) => Err(e.into()),
        }
    }

    fn validate(input: &Registration) -> Result<NewAccount, AuthError> {
        domain::validate_registration(
            input.email.as_deref(),
            input.password.as_deref(),
            input.full_name.as_deref(),
            input.is_active,
        )
        .map_err(AuthError::Invalid)
    }
}

#[async_trait]
impl AuthService for AuthServiceImpl {
    async fn register(&self, input: Registration, ip: ClientIp<'_>) -> Result<User, AuthError> {
        self.limit(Action::Register, ip).await?;
        let account = Self::validate(&input)?;
        let user = self.insert_account(account, false).await?;
        if user.is_active {
            self.mails
                .send_detached(user.clone(), MailKind::VerifyEmail);
        }
        Ok(user)
    }

    async fn login(
        &self,
        email: &str,
        password: &str,
        ip: ClientIp<'_>,
    ) -> Result<AccessToken, AuthError> {
        self.limit(Action::Login, ip).await?;
        let key = domain::email_key(email);
        let row = {
            let mut pooled = self.pool.read().await?;
            store::find_by_email_key(&mut pooled.conn(), &key).await?
        };
        let hash = row.as_ref().map(|r| r.hashed_password.as_str());
        if !self.hasher.verify(password, hash).await? {
            return Err(AuthError::BadCredentials);
        }
        let user = User::from(row.ok_or(AuthError::BadCredentials)?);
        self.admit(&user)?;
        self.start_session(&user).await
    }

    async fn user_for_token(&self, token: &str) -> Result<User, AuthFailure> {
        let verified = self
            .keys
            .verify(token)
            .ok_or(AuthFailure::InvalidCredentials)?;
        let id = verified.user_id;
        let user = match self.users.get(&id) {
            Ok(user) => user,
            Err(ticket) => {
                let mut pooled = self
                    .pool
                    .read()
                    .await
                    .map_err(|e| AuthFailure::Unavailable(e.to_string()))?;
                let user = User::from(
                    store::find(&mut pooled.conn(), id)
                        .await
                        .map_err(|e| AuthFailure::Unavailable(e.to_string()))?
                        .ok_or(AuthFailure::InvalidCredentials)?,
                );
                self.users.put(id, user.clone(), ticket);
                user
            }
        };
        current(user, verified)
    }

    fn cached_user_for_token(&self, token: &str) -> Option<Result<User, AuthFailure>> {
        let Some(verified) = self.keys.verify(token) else {
            return Some(Err(AuthFailure::InvalidCredentials));
        };
        self.users
            .get(&verified.user_id)
            .ok()
            .map(|user| current(user, verified))
    }

    async fn list_users(&self, page: Page) -> Result<(Vec<User>, i64), AuthError> {
        let mut pooled = self.pool.read().await?;
        let (rows, total) = store::list(&mut pooled.conn(), page.offset(), page.limit()).await?;
        Ok((rows.into_iter().map(User::from).collect(), total))
    }

    async fn find_by_email(&self, email: &str) -> Result<Option<User>, AuthError> {
        let mut pooled = self.pool.read().await?;
        let row = store::find_by_email_key(&mut pooled.conn(), &domain::email_key(email)).await?;
        Ok(row.map(User::from))
    }

    async fn update_user(
        &self,
        actor: Option<i64>,
        id: i64,
        patch: UserPatch,
    ) -> Result<User, AuthError> {
        let locks_out =
            patch.is_active == Some(false) || patch.role.is_some_and(|r| r != Role::Admin);
        if actor == Some(id) && locks_out {
            return Err(AuthError::SelfLockout);
        }
        let changes = UserChanges {
            is_active: patch.is_active,
            role: patch.role.map(Role::as_str),
            updated_at: Some(kernel::time::now()),
            ..UserChanges::default()
        };
        let mut pooled = self.pool.get().await?;
        let updated = store::update(&mut pooled.conn(), id, &changes).await;
        self.users.invalidate();
        updated?.map(User::from).ok_or(AuthError::UserNotFound)
    }

    async fn create_user(&self, input: Registration, role: Role) -> Result<User, AuthError> {
        let mut account = Self::validate(&input)?;
        account.role = role;
        self.insert_account(account, true).await
    }

    async fn refresh(&self, refresh_token: &str) -> Result<AccessToken, AuthError> {
        self.rotate(refresh_token).await
    }

    async fn logout(&self, what: Logout) -> Result<(), AuthError> {
        self.end_sessions(what).await
    }

    async fn request_verification(&self, user: &User) -> Result<(), AuthError> {
        self.send_verification(user).await
    }

    async fn request_verification_for(&self, email: &str) -> Result<(), AuthError> {
        self.mail_by_address(email, MailKind::VerifyEmail).await
    }

    async fn verify_email(&self, token: &str) -> Result<User, AuthError> {
        self.consume_verification(token).await
    }

    async fn forgot_password(&self, email: &str) -> Result<(), AuthError> {
        self.mail_by_address(email, MailKind::PasswordReset).await
    }

    async fn reset_password(&self, token: &str, password: &str) -> Result<(), AuthError> {
        self.consume_reset(token, password).await
    }

    async fn reset_link(&self, email: &str) -> Result<(User, Issued), AuthError> {
        let user = self
            .find_by_email(email)
            .await?
            .ok_or(AuthError::UserNotFound)?;
        let issued = self.mails.issue(&user, MailKind::PasswordReset).await?;
        Ok((user, issued))
    }

    fn offers_plans(&self) -> bool {
        self.entitlements.get().is_some()
    }

    async fn plan(&self, user_id: i64) -> Result<Option<Plan>, AuthError> {
        match self.entitlements.get() {
            None => Ok(None),
            Some(plans) => Ok(Some(plans.plan(user_id).await?)),
        }
    }
}

/// A user behind a token: refused when the token is from an ended session (a password reset,
/// a sign-out everywhere), or when the user is deactivated.
fn current(user: User, token: Verified) -> Result<User, AuthFailure> {
    if i64::from(user.session_version) != token.session_version {
        Err(AuthFailure::InvalidCredentials)
    } else if user.is_active {
        Ok(user)
    } else {
        Err(AuthFailure::Inactive)
    }
}

/// The [`Authenticator`] other modules use: a token → the active user as a [`Principal`].
pub struct TokenAuthenticator(pub Arc<dyn AuthService>);

#[async_trait]
impl Authenticator for TokenAuthenticator {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let user = self.0.user_for_token(token).await?;
        Ok(Principal::from(&user))
    }

    fn cached(&self, token: &str) -> Option<Result<Principal, AuthFailure>> {
        let answer = self.0.cached_user_for_token(token)?;
        Some(answer.map(|user| Principal::from(&user)))
    }
}
