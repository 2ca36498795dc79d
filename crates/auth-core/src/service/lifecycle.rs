//! The account lifecycle: verifying the address, and resetting a forgotten password, through
//! single-use tokens sent by mail (see [`crate::mail`]).
//!
//! A request for a mail by address (`forgot_password`, an anonymous verification request)
//! answers the same whether or not the account exists: the address is checked and counted
//! against its hourly limit, then the look-up and the mail run on a task of their own that the
//! answer does not wait for, so neither the answer nor its timing says whether a mail went out.

use kernel::write_tx;

use super::{AuthServiceImpl, User};
use crate::domain::{self, Email};
use crate::error::AuthError;
use crate::mail::MailKind;
use crate::rate_limit::Action;
use crate::store::tokens::{self as tokens, MailTokenRow};
use crate::store::{self, UserChanges};
use crate::tokens::{hash_opaque, looks_opaque};

impl AuthServiceImpl {
    /// Counts a mail asked for `email` against its hourly limit. The counter is keyed by a hash
    /// of the address, so that shared counters (Redis) hold no address.
    async fn limit_mail(&self, kind: MailKind, email: &Email) -> Result<(), AuthError> {
        let action = match kind {
            MailKind::VerifyEmail => Action::VerifyEmail,
            MailKind::PasswordReset => Action::PasswordReset,
        };
        let key = hash_opaque(&email.key);
        self.mail_limiter
            .check_limit(action, &key[..32], self.lifecycle.mail_limit_per_hour)
            .await
    }

    /// A verification mail for a signed-in user, waited for.
    pub(super) async fn send_verification(&self, user: &User) -> Result<(), AuthError> {
        if user.email_verified {
            return Err(AuthError::AlreadyVerified);
        }
        if let Some(email) = Email::parse(&user.email) {
            self.limit_mail(MailKind::VerifyEmail, &email).await?;
        }
        self.mails.send(user, MailKind::VerifyEmail).await.map(drop)
    }

    /// A mail of `kind` for the account of `raw`, if there is one that should get it; not
    /// waited for.
    pub(super) async fn mail_by_address(&self, raw: &str, kind: MailKind) -> Result<(), AuthError> {
        let email = domain::parse_requested_email(raw).map_err(AuthError::Invalid)?;
        self.limit_mail(kind, &email).await?;
        let (pool, mails) = (self.pool.clone(), self.mails.clone());
        kernel::db::spawn_unit(async move {
            let found = async {
                let mut pooled = pool.read().await?;
                Ok::<_, AuthError>(store::find_by_email_key(&mut pooled.conn(), &email.key).await?)
            }
            .await;
            let user = match found {
                Ok(Some(row)) => User::from(row),
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(kind = kind.name(), error = %e, "account mail: look-up failed");
                    return;
                }
            };
            let wanted = user.is_active && (kind != MailKind::VerifyEmail || !user.email_verified);
            if wanted && let Err(e) = mails.send(&user, kind).await {
                tracing::error!(kind = kind.name(), user_id = user.id, error = %e,
                    "the account mail was not sent");
            }
        });
        Ok(())
    }

    /// Marks the address of a verification token's account verified. Every verification token
    /// of the account is used up with it.
    pub(super) async fn consume_verification(&self, token: &str) -> Result<User, AuthError> {
        if !looks_opaque(token) {
            return Err(AuthError::InvalidMailToken);
        }
        let hash = hash_opaque(token);
        let now = kernel::time::now();
        let purpose = MailKind::VerifyEmail.name();
        let verified = write_tx!(&self.pool, AuthError, |tx| {
            let Some(row) = tokens::find_mail_token(tx, purpose, &hash).await? else {
                return Ok(None);
            };
            if !usable(&row, now) || tokens::consume_mail_token(tx, row.id, now).await? == 0 {
                return Ok(None);
            }
            tokens::use_up_mail_tokens(tx, row.user_id, purpose, now).await?;
            let changes = UserChanges {
                email_verified: Some(true),
                updated_at: Some(now),
                ..UserChanges::default()
            };
            Ok(store::update(tx, row.user_id, &changes).await?)
        });
        self.users.invalidate();
        verified?.map(User::from).ok_or(AuthError::InvalidMailToken)
    }

    /// Sets a new password with a reset token. In one transaction: the token (and every other
    /// reset token of the account) is used up, the password replaced, the address marked
    /// verified (the mail reached it), the session version raised (access tokens issued before
    /// stop working) and every refresh token revoked.
    pub(super) async fn consume_reset(&self, token: &str, password: &str) -> Result<(), AuthError> {
        let mut errors = Vec::new();
        domain::check_password(password, &mut errors);
        if !errors.is_empty() {
            return Err(AuthError::Invalid(errors));
        }
        if !looks_opaque(token) {
            return Err(AuthError::InvalidMailToken);
        }
        let hash = hash_opaque(token);
        let now = kernel::time::now();
        let purpose = MailKind::PasswordReset.name();
        // Looked up first, so that a wrong token costs no bcrypt hash.
        let row = {
            let mut pooled = self.pool.read().await?;
            tokens::find_mail_token(&mut pooled.conn(), purpose, &hash).await?
        };
        let row = row
            .filter(|row| usable(row, now))
            .ok_or(AuthError::InvalidMailToken)?;
        let hashed = self.hasher.hash(password).await?;
        let done = write_tx!(&self.pool, AuthError, |tx| {
            if tokens::consume_mail_token(tx, row.id, now).await? == 0 {
                return Ok(false);
            }
            tokens::use_up_mail_tokens(tx, row.user_id, purpose, now).await?;
            let changes = UserChanges {
                hashed_password: Some(&hashed),
                email_verified: Some(true),
                updated_at: Some(now),
                ..UserChanges::default()
            };
            store::update(tx, row.user_id, &changes).await?;
            store::end_sessions(tx, row.user_id, now).await?;
            tokens::revoke_user_refresh(tx, row.user_id, now).await?;
            Ok(true)
        });
        self.users.invalidate();
        if done? {
            tracing::info!(user_id = row.user_id, "password reset: every session ended");
            Ok(())
        } else {
            Err(AuthError::InvalidMailToken)
        }
    }
}

/// Not used yet and not expired at `now`.
fn usable(row: &MailTokenRow, now: chrono::NaiveDateTime) -> bool {
    row.used_at.is_none() && row.expires_at > now
}
