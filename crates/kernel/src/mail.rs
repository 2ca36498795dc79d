//! Mail: e-mails one module asks another to send (auth's verification and password-reset mails),
//! through the [`Mailer`] capability (provided by comms, over its e-mail provider and message log).

/// One e-mail to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub to: String,
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// An HTML body beside the text, when there is one.
    pub html: Option<String>,
    /// What kind of mail it is (`verify_email`, `password_reset`), for the provider's tags and
    /// the message log.
    pub kind: &'static str,
}

/// Why a mail was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MailError {
    /// The mailer cannot send yet: the setting to set.
    #[error("mail not configured: {0}")]
    NotConfigured(String),
    /// The address or the mail was refused before sending.
    #[error("mail refused: {0}")]
    Invalid(String),
    /// The provider failed or could not be reached.
    #[error("mail provider error: {0}")]
    Provider(String),
    /// The recipient is on the mailer's suppression list (an earlier hard bounce or spam
    /// complaint): nothing was sent. The text names the address and the reason.
    #[error("mail not sent: {0}")]
    Suppressed(String),
}

/// Sends e-mails for other modules.
#[async_trait::async_trait]
pub trait Mailer: Send + Sync {
    /// Sends `mail`; the provider's id of the sent message.
    async fn send(&self, mail: Mail) -> Result<String, MailError>;
}

impl crate::capability::Capability for dyn Mailer {
    const NAME: &'static str = "a mailer";
}
