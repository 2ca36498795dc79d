//! `POST /email/send`.

use actix_web::{post, web};
use kernel::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CommsState, Sender, sender};
use crate::service::EmailRequest;

/// One address or a list of them (Resend accepts both).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = comms::Addresses)]
pub enum Addresses {
    One(String),
    Many(Vec<String>),
}

impl Addresses {
    fn into_vec(self) -> Vec<String> {
        match self {
            Addresses::One(one) => vec![one],
            Addresses::Many(many) => many,
        }
    }
}

fn addresses(value: Option<Addresses>) -> Vec<String> {
    value.map(Addresses::into_vec).unwrap_or_default()
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::EmailTag)]
pub struct EmailTagBody {
    /// ASCII letters, digits, `_` and `-`, at most 256 characters.
    pub name: String,
    pub value: String,
}

/// An email to send. `to` and `subject` are required, and `text` or `html`. (No `serde(default)`:
/// a missing field is `None` all the same, and the document then shows no `default: null` that
/// `to`'s schema would not allow.)
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[schema(as = comms::EmailSendRequest)]
pub struct EmailSendRequest {
    /// One recipient address, or a list of 1 to 50.
    #[schema(value_type = Addresses, required = true)]
    pub to: Option<Addresses>,
    /// 1 to 998 characters.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 998)]
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    /// Overrides `RESEND_FROM_EMAIL` (`a@example.com` or `Name <a@example.com>`).
    pub from_email: Option<String>,
    /// One address or a list.
    pub cc: Option<Addresses>,
    /// One address or a list.
    pub bcc: Option<Addresses>,
    /// One address or a list.
    pub reply_to: Option<Addresses>,
    /// Resend tags. keel adds its own, `keel_message` (the email's reference, which Resend's
    /// events carry back): that name is reserved.
    pub tags: Option<Vec<EmailTagBody>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::EmailSendResponse)]
pub struct EmailSendResponse {
    /// The provider's id of the email.
    pub id: String,
    pub to: Vec<String>,
    /// `sent`: the provider accepted it.
    pub status: String,
    pub message: String,
}

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    request_body = EmailSendRequest,
    responses(
        (status = 200, body = EmailSendResponse),
        (status = 400, description = "Invalid request: missing field, bad address, no text or html"),
        (status = 401),
        (status = 409, description = "Recipient is suppressed: <address> (<reason>); with several, Recipients are suppressed: <address> (<reason>), ... Nothing was sent."),
        (status = 502, description = "Email provider error: <the provider's message>"),
        (status = 503, description = "Email not configured: <SETTING> is not set"),
    )
)]
#[post("/email/send")]
pub async fn send_email(
    user: Sender,
    state: web::Data<CommsState>,
    body: kernel::http::Json<EmailSendRequest>,
) -> Result<web::Json<EmailSendResponse>, ApiError> {
    let body = body.into_inner();
    let request = EmailRequest {
        to: addresses(body.to),
        subject: body.subject,
        text: body.text,
        html: body.html,
        from_email: body.from_email,
        cc: addresses(body.cc),
        bcc: addresses(body.bcc),
        reply_to: addresses(body.reply_to),
        tags: body
            .tags
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.name, t.value))
            .collect(),
        private_body: false,
    };
    let receipt = state.service.send_email(sender(&user), request).await?;
    Ok(web::Json(EmailSendResponse {
        id: receipt.id,
        to: receipt.to,
        status: "sent".to_owned(),
        message: "Email sent successfully".to_owned(),
    }))
}
