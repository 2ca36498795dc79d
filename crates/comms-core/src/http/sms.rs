//! `POST /sms/send`.

use actix_web::{post, web};
use kernel::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CommsState, Sender, sender};
use crate::service::SmsRequest;

/// An SMS to send.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = comms::SmsSendRequest)]
pub struct SmsSendRequest {
    /// E.164, e.g. `+15005550006`.
    pub to: Option<String>,
    /// 1 to 1600 characters.
    pub body: Option<String>,
    /// Overrides `TWILIO_PHONE_NUMBER` (E.164).
    pub from_number: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::SmsSendResponse)]
pub struct SmsSendResponse {
    /// Twilio's message SID.
    pub sid: String,
    pub to: String,
    /// `sent`: the provider accepted it (its delivery status is in the message log).
    pub status: String,
    /// GSM-7: 160 characters in one segment, 153 per segment beyond; UCS-2: 70, then 67.
    pub segments: u32,
    pub message: String,
}

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    request_body = SmsSendRequest,
    responses(
        (status = 200, body = SmsSendResponse),
        (status = 400, description = "Invalid phone number, missing body, or message too long"),
        (status = 401),
        (status = 409, description = "Recipient is suppressed: <number> (<reason>): nothing was sent"),
        (status = 502, description = "SMS provider error: <the provider's message>"),
        (status = 503, description = "SMS not configured: <SETTING> is not set"),
    )
)]
#[post("/sms/send")]
pub async fn send_sms(
    user: Sender,
    state: web::Data<CommsState>,
    body: kernel::http::Json<SmsSendRequest>,
) -> Result<web::Json<SmsSendResponse>, ApiError> {
    let body = body.into_inner();
    let request = SmsRequest {
        to: body.to,
        body: body.body,
        from_number: body.from_number,
    };
    let receipt = state.service.send_sms(sender(&user), request).await?;
    Ok(web::Json(SmsSendResponse {
        sid: receipt.sid,
        to: receipt.to,
        status: "sent".to_owned(),
        segments: receipt.segments,
        message: "SMS sent successfully".to_owned(),
    }))
}
