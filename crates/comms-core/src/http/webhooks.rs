//! The providers' signed webhooks: Twilio's status callbacks and incoming messages, Resend's
//! events.

use actix_web::{HttpMessage as _, HttpRequest, HttpResponse, post, web};
use kernel::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CommsState, header};
use crate::error::CommsError;
use crate::service::{EventOutcome, EventReport};
use crate::webhooks;

/// The acknowledgement of a delivery webhook.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::WebhookResponse)]
pub struct WebhookResponse {
    /// `true` when the event moved a message forward or suppressed its recipient; `false` when it
    /// changed nothing (an unknown message, a replay, a late or untracked event).
    pub applied: bool,
    /// The addresses or numbers the event added to the suppression list (a hard bounce, a
    /// complaint, Twilio error 21610); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suppressed: Vec<String>,
}

impl From<EventReport> for WebhookResponse {
    fn from(report: EventReport) -> Self {
        WebhookResponse {
            applied: report.outcome == EventOutcome::Applied || !report.suppressed.is_empty(),
            suppressed: report.suppressed,
        }
    }
}

/// A Twilio webhook as the service verifies it: the path and query it was posted to, its form
/// (or JSON body), and its signature headers.
fn twilio_callback(req: &HttpRequest, body: &[u8]) -> Result<webhooks::TwilioCallback, ApiError> {
    // What is accepted: `webhooks::twilio_verify`. A JSON body is verified through the URL's
    // `bodySHA256` before it is read.
    let body = if req.content_type().eq_ignore_ascii_case("application/json") {
        webhooks::TwilioPayload::Json(body.to_vec())
    } else {
        webhooks::TwilioPayload::Form(
            serde_urlencoded::from_bytes(body)
                .map_err(|e| CommsError::BadPayload(format!("the form cannot be read: {e}")))?,
        )
    };
    Ok(webhooks::TwilioCallback {
        path_and_query: req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| req.path().to_owned()),
        body,
        signature: header(req, "x-twilio-signature"),
        signature_settings: header(req, webhooks::SIGNATURE_SETTINGS_HEADER),
    })
}

/// Twilio's status callbacks for messages and calls (form fields, `X-Twilio-Signature`). A
/// message that failed with `ErrorCode` 21610 (its recipient unsubscribed) suppresses its `To`.
#[utoipa::path(
    tag = "comms",
    request_body(content = String, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, body = WebhookResponse),
        (status = 400, description = "The form cannot be read"),
        (status = 403, description = "Invalid signature"),
        (status = 503, description = "Twilio webhooks not configured: <SETTING> is not set"),
    )
)]
#[post("/webhooks/twilio/status")]
pub async fn twilio_status(
    req: HttpRequest,
    state: web::Data<CommsState>,
    body: web::Bytes,
) -> Result<web::Json<WebhookResponse>, ApiError> {
    let callback = twilio_callback(&req, &body)?;
    let report = state.service.twilio_status(callback).await?;
    Ok(web::Json(report.into()))
}

/// The empty TwiML answer: no reply (Twilio itself confirms opt-outs and opt-ins).
const EMPTY_TWIML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response></Response>";

/// Messages Twilio received for the account's numbers (the number's "A message comes in"
/// webhook; form fields, `X-Twilio-Signature` over this URL as for status callbacks). A body that
/// is an opt-out keyword (`STOP`, `STOPALL`, `UNSUBSCRIBE`, `CANCEL`, `END`, `QUIT`, `REVOKE`,
/// `OPTOUT`, or Twilio's `OptOutType=STOP`) suppresses the sender's number; an opt-in keyword
/// (`START`, `YES`, `UNSTOP`, or `OptOutType=START`) takes it off the list. Any other message is
/// acknowledged and dropped. The answer is empty TwiML: the module sends no reply.
#[utoipa::path(
    tag = "comms",
    request_body(content = String, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Empty TwiML: `<Response></Response>`", body = String, content_type = "text/xml"),
        (status = 400, description = "The form cannot be read"),
        (status = 403, description = "Invalid signature"),
        (status = 503, description = "Twilio webhooks not configured: <SETTING> is not set"),
    )
)]
#[post("/webhooks/twilio/inbound")]
pub async fn twilio_inbound(
    req: HttpRequest,
    state: web::Data<CommsState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let callback = twilio_callback(&req, &body)?;
    state.service.twilio_inbound(callback).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/xml; charset=utf-8")
        .body(EMPTY_TWIML))
}

/// Resend's delivery events (Svix-signed: `svix-id`, `svix-timestamp`, `svix-signature`). An
/// `email.bounced` of type `Permanent` and an `email.complained` suppress the email's recipient
/// (when it had one).
#[utoipa::path(
    tag = "comms",
    request_body(content = String, content_type = "application/json"),
    responses(
        (status = 200, body = WebhookResponse),
        (status = 400, description = "Invalid payload"),
        (status = 403, description = "Invalid signature (missing, wrong or older than 5 minutes)"),
        (status = 503, description = "Resend webhooks not configured: RESEND_WEBHOOK_SECRET is not set"),
    )
)]
#[post("/webhooks/resend")]
pub async fn resend_webhook(
    req: HttpRequest,
    state: web::Data<CommsState>,
    body: web::Bytes,
) -> Result<web::Json<WebhookResponse>, ApiError> {
    let id = header(&req, "svix-id");
    let timestamp = header(&req, "svix-timestamp");
    let signature = header(&req, "svix-signature");
    let report = state
        .service
        .resend_event(
            [id.as_deref(), timestamp.as_deref(), signature.as_deref()],
            &body,
        )
        .await?;
    Ok(web::Json(report.into()))
}
