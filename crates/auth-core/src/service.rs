//! The auth service: the rules of registration, login, tokens and user administration.

use std::sync::Arc;

use async_trait::async_trait;
use kernel::cache::ReadCache;
use kernel::identity::AuthFailure;
use kernel::pagination::Page;
use kernel::{Authenticator, DbPool, Principal, Role};

use crate::domain::{self, NewAccount};
use crate::error::AuthError;
use crate::passwords::Hasher;
use crate::rate_limit::{Action, RateLimiter};
use crate::store::{self, NewUserRow, UserChanges, UserRow};
use crate::tokens::TokenKeys;

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

/// A bearer token as login issues it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessToken {
    pub token: String,
    /// Seconds from now until it expires (`ACCESS_TOKEN_EXPIRE_MINUTES`).
    pub expires_in: i64,
}

#[async_trait]
pub trait AuthService: Send + Sync {
    /// Creates an account (role `user`). 422 with every failing field; 400 when the address is taken.
    async fn register(&self, input: Registration, ip: ClientIp<'_>) -> Result<User, AuthError>;
    /// Checks credentials and issues a bearer token. Inactive users with the right password: `Inactive`.
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
    /// Creates an account with a given role (the CLI's `users create`).
    async fn create_user(&self, input: Registration, role: Role) -> Result<User, AuthError>;
}

pub struct AuthServiceImpl {
    pool: DbPool,
    keys: TokenKeys,
    hasher: Hasher,
    limiter: RateLimiter,
    /// The users behind tokens, by id (`READ_CACHE`): cleared by every change made here, and
    /// never older than a second, so a user deactivated elsewhere is refused within it.
    users: ReadCache<i64, User>,
}

/// Users kept at most in the token cache.
const USER_CACHE_ENTRIES: usize = 10_000;

impl AuthServiceImpl {
    pub fn new(
        pool: DbPool,
        keys: TokenKeys,
        hasher: Hasher,
        limiter: RateLimiter,
        read_cache: bool,
    ) -> Self {
        Self {
            pool,
            keys,
            hasher,
            limiter,
            users: ReadCache::new(read_cache, USER_CACHE_ENTRIES),
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

    async fn insert_account(&self, account: NewAccount) -> Result<User, AuthError> {
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
        self.insert_account(account).await
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
            let mut pooled = self.pool.get().await?;
            store::find_by_email_key(&mut pooled.conn(), &key).await?
        };
        let hash = row.as_ref().map(|r| r.hashed_password.as_str());
        if !self.hasher.verify(password, hash).await? {
            return Err(AuthError::BadCredentials);
        }
        let row = row.ok_or(AuthError::BadCredentials)?;
        if !row.is_active {
            return Err(AuthError::Inactive);
        }
        let token = self
            .keys
            .issue(row.id)
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        Ok(AccessToken {
            token,
            expires_in: self.keys.lifetime_seconds(),
        })
    }

    async fn user_for_token(&self, token: &str) -> Result<User, AuthFailure> {
        let id = self
            .keys
            .verify(token)
            .ok_or(AuthFailure::InvalidCredentials)?;
        let user = match self.users.get(&id) {
            Ok(user) => user,
            Err(ticket) => {
                let mut pooled = self
                    .pool
                    .get()
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
        active(user)
    }

    fn cached_user_for_token(&self, token: &str) -> Option<Result<User, AuthFailure>> {
        let Some(id) = self.keys.verify(token) else {
            return Some(Err(AuthFailure::InvalidCredentials));
        };
        self.users.get(&id).ok().map(active)
    }

    async fn list_users(&self, page: Page) -> Result<(Vec<User>, i64), AuthError> {
        let mut pooled = self.pool.get().await?;
        let (rows, total) = store::list(&mut pooled.conn(), page.offset(), page.limit()).await?;
        Ok((rows.into_iter().map(User::from).collect(), total))
    }

    async fn find_by_email(&self, email: &str) -> Result<Option<User>, AuthError> {
        let mut pooled = self.pool.get().await?;
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
        };
        let mut pooled = self.pool.get().await?;
        let updated = store::update(&mut pooled.conn(), id, &changes).await;
        self.users.invalidate();
        updated?.map(User::from).ok_or(AuthError::UserNotFound)
    }

    async fn create_user(&self, input: Registration, role: Role) -> Result<User, AuthError> {
        let mut account = Self::validate(&input)?;
        account.role = role;
        self.insert_account(account).await
    }
}

/// A user behind a token, refused when deactivated.
fn active(user: User) -> Result<User, AuthFailure> {
    if user.is_active {
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
