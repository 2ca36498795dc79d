//! The [`Mailer`] this module lends the others (auth's verification and reset mails): an email
//! send through the service, so it goes through Resend and into the message log like any other,
//! tagged `kind=<the mail's kind>`, with no preview of its body in the log (it carries a link
//! that signs its reader in). An address on the suppression list (an earlier hard bounce or
//! complaint) is `MailError::Suppressed`: nothing is sent.

use std::sync::Arc;

use kernel::mail::{Mail, MailError, Mailer};

use crate::Channel;
use crate::error::CommsError;
use crate::service::{CommsService, EmailRequest};

/// The mailer over the module's service.
pub struct CommsMailer(pub Arc<dyn CommsService>);

#[async_trait::async_trait]
impl Mailer for CommsMailer {
    /// The provider's id of the sent email. `NotConfigured` names the first missing setting of
    /// the email channel (`RESEND_API_KEY`, `RESEND_FROM_EMAIL`).
    async fn send(&self, mail: Mail) -> Result<String, MailError> {
        if let Some(setting) = self.0.config().missing(Channel::Email) {
            return Err(MailError::NotConfigured(setting.to_owned()));
        }
        let request = EmailRequest {
            to: vec![mail.to],
            subject: Some(mail.subject),
            text: Some(mail.text),
            html: mail.html,
            tags: vec![("kind".to_owned(), mail.kind.to_owned())],
            private_body: true,
            ..EmailRequest::default()
        };
        match self.0.send_email(None, request).await {
            Ok(receipt) => Ok(receipt.id),
            Err(e) => Err(mail_error(e)),
        }
    }
}

fn mail_error(e: CommsError) -> MailError {
    match e {
        CommsError::NotConfigured { setting, .. } => MailError::NotConfigured(setting.to_owned()),
        CommsError::Invalid(why) => MailError::Invalid(why),
        CommsError::Provider { message, .. } => MailError::Provider(message),
        suppressed @ CommsError::Suppressed(_) => MailError::Suppressed(suppressed.to_string()),
        other => MailError::Provider(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comms_errors_become_mail_errors() {
        assert_eq!(
            mail_error(CommsError::NotConfigured {
                channel: Channel::Email,
                setting: "RESEND_API_KEY"
            }),
            MailError::NotConfigured("RESEND_API_KEY".to_owned())
        );
        assert_eq!(
            mail_error(CommsError::Invalid("Invalid email address: x".into())),
            MailError::Invalid("Invalid email address: x".to_owned())
        );
        assert_eq!(
            mail_error(CommsError::Provider {
                channel: Channel::Email,
                message: "rate limited".into()
            }),
            MailError::Provider("rate limited".to_owned())
        );
        assert_eq!(
            mail_error(CommsError::Suppressed(vec![(
                "ada@example.com".into(),
                "hard_bounce".into()
            )])),
            MailError::Suppressed("Recipient is suppressed: ada@example.com (hard_bounce)".into())
        );
    }
}
