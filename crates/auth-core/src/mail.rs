//! The account mails (address verification, password reset): a single-use token stored as its
//! SHA-256, a link to the deployer's page carrying it, a text from [`templates`], and the
//! [`Mailer`] capability to send it (comms, used late). Without a mailer, or with one whose
//! e-mail channel is not configured, the mail is not sent: its link is written to the log at
//! WARN, so that a small deployment still works.

pub mod templates;

use std::sync::Arc;

use chrono::{NaiveDateTime, TimeDelta};
use kernel::DbPool;
use kernel::capability::Late;
use kernel::mail::{Mail, MailError, Mailer};

use crate::error::AuthError;
use crate::service::User;
use crate::store::tokens::{self as store, NewMailTokenRow};
use crate::tokens::new_opaque;
use templates::{Templates, Values};

/// The kinds of account mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailKind {
    VerifyEmail,
    PasswordReset,
}

impl MailKind {
    /// The kind's name: the mail's `kind` (a tag at the provider), the purpose of its tokens,
    /// and the file names of its templates.
    pub fn name(self) -> &'static str {
        match self {
            MailKind::VerifyEmail => "verify_email",
            MailKind::PasswordReset => "password_reset",
        }
    }
}

/// What happened to a mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The mailer sent it: the provider's id.
    Sent(String),
    /// No mailer could send it: its link is in the log.
    Logged,
}

/// A token issued for a mail: what its link and its text carry.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub link: String,
    pub expires_at: NaiveDateTime,
}

/// Where each kind's links point and how long they work.
#[derive(Debug, Clone)]
pub struct LinkSettings {
    pub verify_email_url: String,
    pub reset_password_url: String,
    pub verify_lifetime: TimeDelta,
    pub reset_lifetime: TimeDelta,
}

impl LinkSettings {
    fn url(&self, kind: MailKind) -> &str {
        match kind {
            MailKind::VerifyEmail => &self.verify_email_url,
            MailKind::PasswordReset => &self.reset_password_url,
        }
    }

    fn lifetime(&self, kind: MailKind) -> TimeDelta {
        match kind {
            MailKind::VerifyEmail => self.verify_lifetime,
            MailKind::PasswordReset => self.reset_lifetime,
        }
    }
}

/// Issues, writes and sends the account mails. Cheap to clone (for work that outlives a
/// request).
#[derive(Clone)]
pub struct AccountMails {
    pool: DbPool,
    templates: Arc<Templates>,
    links: Arc<LinkSettings>,
    mailer: Late<dyn Mailer>,
}

impl AccountMails {
    pub fn new(
        pool: DbPool,
        templates: Templates,
        links: LinkSettings,
        mailer: Late<dyn Mailer>,
    ) -> Self {
        AccountMails {
            pool,
            templates: Arc::new(templates),
            links: Arc::new(links),
            mailer,
        }
    }

    /// A new token of `kind` for `user` (stored as its hash; the user's expired tokens are
    /// deleted on the way), with its link.
    pub async fn issue(&self, user: &User, kind: MailKind) -> Result<Issued, AuthError> {
        let (token, hash) = new_opaque().map_err(|e| AuthError::Internal(e.to_string()))?;
        let now = kernel::time::now();
        let expires_at = now + self.links.lifetime(kind);
        let row = NewMailTokenRow {
            user_id: user.id,
            purpose: kind.name(),
            token_hash: &hash,
            created_at: now,
            expires_at,
        };
        let mut pooled = self.pool.get().await?;
        let mut conn = pooled.conn();
        store::delete_expired_mail_tokens(&mut conn, user.id, now).await?;
        store::insert_mail_token(&mut conn, &row).await?;
        Ok(Issued {
            link: link(self.links.url(kind), &token),
            token,
            expires_at,
        })
    }

    /// Issues a token of `kind` for `user` and sends its mail.
    pub async fn send(&self, user: &User, kind: MailKind) -> Result<Delivery, AuthError> {
        let issued = self.issue(user, kind).await?;
        let name = user.full_name.as_deref().unwrap_or(&user.email);
        let expires_in = describe(self.links.lifetime(kind));
        let rendered = self.templates.get(kind).render(&Values {
            link: &issued.link,
            token: &issued.token,
            email: &user.email,
            name,
            expires_in: &expires_in,
        });
        let mail = Mail {
            to: user.email.clone(),
            subject: rendered.subject,
            text: rendered.text,
            html: rendered.html,
            kind: kind.name(),
        };
        self.deliver(mail, &issued.link)
            .await
            .map_err(|e| AuthError::Mail(e.to_string()))
    }

    /// [`send`](Self::send) on a task of its own, not waited for: a failure goes to the log.
    pub fn send_detached(&self, user: User, kind: MailKind) {
        let mails = self.clone();
        kernel::db::spawn_unit(async move {
            if let Err(e) = mails.send(&user, kind).await {
                tracing::error!(kind = kind.name(), user_id = user.id, error = %e,
                    "the account mail was not sent");
            }
        });
    }

    /// Hands `mail` to the mailer, or writes its link to the log when no mailer can send it.
    async fn deliver(&self, mail: Mail, link: &str) -> Result<Delivery, MailError> {
        let kind = mail.kind;
        let Some(mailer) = self.mailer.get() else {
            tracing::warn!(kind, to = %mail.to, link,
                "no mailer is mounted (the comms module): the mail was not sent, its link is here");
            return Ok(Delivery::Logged);
        };
        let to = mail.to.clone();
        match mailer.send(mail).await {
            Ok(id) => Ok(Delivery::Sent(id)),
            Err(MailError::NotConfigured(setting)) => {
                tracing::warn!(kind, %to, link, setting,
                    "the mailer is not configured: the mail was not sent, its link is here");
                Ok(Delivery::Logged)
            }
            Err(e) => Err(e),
        }
    }
}

/// `url` with `token=<token>` added to its query (the token is hex: nothing to escape).
pub fn link(url: &str, token: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}token={token}")
}

/// A lifetime in words: `30 minutes`, `1 hour`, `2 days`.
pub fn describe(lifetime: TimeDelta) -> String {
    let minutes = lifetime.num_minutes().max(1);
    let (count, unit) = if minutes % (24 * 60) == 0 {
        (minutes / (24 * 60), "day")
    } else if minutes % 60 == 0 {
        (minutes / 60, "hour")
    } else {
        (minutes, "minute")
    };
    let plural = if count == 1 { "" } else { "s" };
    format!("{count} {unit}{plural}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_add_the_token_to_the_query() {
        assert_eq!(
            link("https://app.example.com/reset", "ab12"),
            "https://app.example.com/reset?token=ab12"
        );
        assert_eq!(
            link("https://app.example.com/#/reset?lang=en", "ab12"),
            "https://app.example.com/#/reset?lang=en&token=ab12"
        );
    }

    #[test]
    fn lifetimes_read_in_words() {
        assert_eq!(describe(TimeDelta::minutes(30)), "30 minutes");
        assert_eq!(describe(TimeDelta::minutes(1)), "1 minute");
        assert_eq!(describe(TimeDelta::hours(1)), "1 hour");
        assert_eq!(describe(TimeDelta::hours(48)), "2 days");
        assert_eq!(describe(TimeDelta::minutes(90)), "90 minutes");
        assert_eq!(describe(TimeDelta::seconds(5)), "1 minute");
    }
}
