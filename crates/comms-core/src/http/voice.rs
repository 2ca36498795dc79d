//! `POST /call/make`.

use actix_web::{post, web};
use kernel::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CommsState, Sender, sender};
use crate::service::CallRequest;

/// A voice call to start.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = comms::CallRequest)]
pub struct CallMakeRequest {
    /// E.164.
    pub to: Option<String>,
    /// An absolute http(s) URL answering TwiML.
    pub twiml_url: Option<String>,
    /// Overrides `TWILIO_PHONE_NUMBER` as the caller id (E.164).
    pub from_number: Option<String>,
    /// Seconds to let it ring, 5 to 600 (default 30).
    pub timeout: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::CallResponse)]
pub struct CallMakeResponse {
    /// Twilio's call SID.
    pub sid: String,
    pub to: String,
    /// As Twilio reports it: a new call is `queued`.
    pub status: String,
    pub message: String,
}

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    request_body = CallMakeRequest,
    responses(
        (status = 200, body = CallMakeResponse),
        (status = 400, description = "Invalid phone number, twiml_url or timeout"),
        (status = 401),
        (status = 502, description = "Voice provider error: <the provider's message>"),
        (status = 503, description = "Voice not configured: <SETTING> is not set"),
    )
)]
#[post("/call/make")]
pub async fn make_call(
    user: Sender,
    state: web::Data<CommsState>,
    body: kernel::http::Json<CallMakeRequest>,
) -> Result<web::Json<CallMakeResponse>, ApiError> {
    let body = body.into_inner();
    let request = CallRequest {
        to: body.to,
        twiml_url: body.twiml_url,
        from_number: body.from_number,
        timeout: body.timeout,
    };
    let receipt = state.service.make_call(sender(&user), request).await?;
    Ok(web::Json(CallMakeResponse {
        sid: receipt.sid,
        to: receipt.to,
        status: receipt.status,
        message: "Call initiated successfully".to_owned(),
    }))
}
