//! Sessions: a sign-in starts a family of refresh tokens; each refresh marks its token used and
//! adds the next one to the family; a used token that comes back (stolen, or replayed) revokes the
//! whole family. Signing out ends one family, or every session of a user: then the user's session
//! version is raised, and the access tokens issued before stop working too.

use chrono::NaiveDateTime;
use kernel::write_tx;

use super::{AccessToken, AuthServiceImpl, User};
use crate::error::AuthError;
use crate::store::tokens::{self as tokens, NewRefreshRow};
use crate::store::{self};
use crate::tokens::{hash_opaque, looks_opaque, new_opaque};

/// What a sign-out ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Logout {
    /// The session of this refresh token (its family); an unknown token ends nothing.
    Session(String),
    /// Every session of this user: every refresh token, and the access tokens issued so far.
    Everywhere(i64),
}

/// What a refresh found.
enum Rotation {
    /// The next refresh token is stored: the pair goes to this user.
    Rotated(User),
    /// Unknown, expired or revoked.
    Refused,
    /// Used before: the family is revoked now.
    Reused {
        user_id: i64,
        family: String,
    },
    Inactive,
    NotVerified,
}

impl AuthServiceImpl {
    /// Whether `user` may have a session: active, and verified when verification is required.
    pub(super) fn admit(&self, user: &User) -> Result<(), AuthError> {
        if !user.is_active {
            Err(AuthError::Inactive)
        } else if self.lifecycle.require_verified_email && !user.email_verified {
            Err(AuthError::EmailNotVerified)
        } else {
            Ok(())
        }
    }

    fn access_token(&self, user: &User, refresh_token: String) -> Result<AccessToken, AuthError> {
        let token = self
            .keys
            .issue(user.id, user.session_version)
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        Ok(AccessToken {
            token,
            expires_in: self.keys.lifetime_seconds(),
            refresh_token,
        })
    }

    fn new_refresh() -> Result<(String, String), AuthError> {
        new_opaque().map_err(|e| AuthError::Internal(e.to_string()))
    }

    fn refresh_expiry(&self, now: NaiveDateTime) -> NaiveDateTime {
        now + self.lifecycle.refresh_lifetime
    }

    /// A new session for `user`: an access token and the first refresh token of a new family.
    /// The user's expired refresh tokens are deleted on the way.
    pub(super) async fn start_session(&self, user: &User) -> Result<AccessToken, AuthError> {
        let (refresh, hash) = Self::new_refresh()?;
        let family = uuid::Uuid::new_v4().simple().to_string();
        let now = kernel::time::now();
        let row = NewRefreshRow {
            user_id: user.id,
            family: &family,
            token_hash: &hash,
            created_at: now,
            expires_at: self.refresh_expiry(now),
        };
        {
            let mut pooled = self.pool.get().await?;
            let mut conn = pooled.conn();
            tokens::delete_expired_refresh(&mut conn, user.id, now).await?;
            tokens::insert_refresh(&mut conn, &row).await?;
        }
        self.access_token(user, refresh)
    }

    /// Trades a refresh token for the next pair, in one transaction: two refreshes with the same
    /// token cannot both succeed (the second finds it used, and revokes the family).
    pub(super) async fn rotate(&self, token: &str) -> Result<AccessToken, AuthError> {
        if !looks_opaque(token) {
            return Err(AuthError::InvalidRefreshToken);
        }
        let hash = hash_opaque(token);
        let (next, next_hash) = Self::new_refresh()?;
        let now = kernel::time::now();
        let expires_at = self.refresh_expiry(now);
        let require_verified = self.lifecycle.require_verified_email;
        let rotation = write_tx!(&self.pool, AuthError, |tx| {
            let Some(row) = tokens::find_refresh(tx, &hash).await? else {
                return Ok(Rotation::Refused);
            };
            if row.revoked_at.is_some() || row.expires_at <= now {
                return Ok(Rotation::Refused);
            }
            let reused = Rotation::Reused {
                user_id: row.user_id,
                family: row.family.clone(),
            };
            if row.used_at.is_some() {
                tokens::revoke_family(tx, &row.family, now).await?;
                return Ok(reused);
            }
            let Some(user) = store::find(tx, row.user_id).await? else {
                return Ok(Rotation::Refused);
            };
            let user = User::from(user);
            if !user.is_active {
                return Ok(Rotation::Inactive);
            }
            if require_verified && !user.email_verified {
                return Ok(Rotation::NotVerified);
            }
            if tokens::mark_refresh_used(tx, row.id, now).await? == 0 {
                tokens::revoke_family(tx, &row.family, now).await?;
                return Ok(reused);
            }
            let next_row = NewRefreshRow {
                user_id: user.id,
                family: &row.family,
                token_hash: &next_hash,
                created_at: now,
                expires_at,
            };
            tokens::insert_refresh(tx, &next_row).await?;
            Ok(Rotation::Rotated(user))
        })?;
        match rotation {
            Rotation::Rotated(user) => self.access_token(&user, next),
            Rotation::Refused => Err(AuthError::InvalidRefreshToken),
            Rotation::Reused { user_id, family } => {
                tracing::warn!(
                    user_id,
                    family,
                    "a refresh token was used twice: its whole family is revoked"
                );
                Err(AuthError::InvalidRefreshToken)
            }
            Rotation::Inactive => Err(AuthError::Inactive),
            Rotation::NotVerified => Err(AuthError::EmailNotVerified),
        }
    }

    /// Ends one session or every session of a user.
    pub(super) async fn end_sessions(&self, what: Logout) -> Result<(), AuthError> {
        let now = kernel::time::now();
        match what {
            Logout::Session(token) => {
                if !looks_opaque(&token) {
                    return Ok(());
                }
                let hash = hash_opaque(&token);
                write_tx!(&self.pool, AuthError, |tx| {
                    if let Some(row) = tokens::find_refresh(tx, &hash).await? {
                        tokens::revoke_family(tx, &row.family, now).await?;
                    }
                    Ok(())
                })
            }
            Logout::Everywhere(user_id) => {
                let ended = write_tx!(&self.pool, AuthError, |tx| {
                    tokens::revoke_user_refresh(tx, user_id, now).await?;
                    Ok(store::end_sessions(tx, user_id, now).await?)
                });
                self.users.invalidate();
                ended?.map(drop).ok_or(AuthError::UserNotFound)
            }
        }
    }
}
