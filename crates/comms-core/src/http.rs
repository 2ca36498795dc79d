//! Handlers of `/api/v1/comms` and their request and response bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::{HttpMessage as _, HttpRequest, get, post, web};
use kernel::ApiError;
use kernel::identity::{self, Access, need};
use kernel::pagination::PageParams;
use kernel::{Role, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::Channel;
use crate::error::CommsError;
use crate::service::{
    CallRequest, CommsService, EmailRequest, EventOutcome, ListFilter, Message, SmsRequest, Viewer,
};
use crate::webhooks;

pub struct CommsState {
    pub service: Arc<dyn CommsService>,
}

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

/// A message of the log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::Message)]
pub struct MessageResponse {
    pub id: i64,
    pub channel: Channel,
    pub provider: String,
    pub recipients: Vec<String>,
    pub subject: Option<String>,
    /// The first 200 characters of the text, the SMS body, or the TwiML URL; none for the mails
    /// sent for other modules (their body carries a sign-in link).
    pub preview: Option<String>,
    /// The provider's id (Resend's email id, Twilio's SID); none when the provider refused it.
    pub provider_id: Option<String>,
    /// The latest delivery status the provider reported (`failed` when the send failed).
    pub status: String,
    pub error: Option<String>,
    pub user_id: Option<i64>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<Message> for MessageResponse {
    fn from(m: Message) -> Self {
        MessageResponse {
            id: m.id,
            channel: m.channel,
            provider: m.provider,
            recipients: m.recipients,
            subject: m.subject,
            preview: m.preview,
            provider_id: m.provider_id,
            status: m.status,
            error: m.error,
            user_id: m.user_id,
            created_at: Timestamp(m.created_at),
            updated_at: Timestamp(m.updated_at),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::MessageList)]
pub struct MessageListResponse {
    pub messages: Vec<MessageResponse>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageQuery {
    /// `email`, `sms` or `voice`.
    pub channel: Option<String>,
    /// A delivery status, e.g. `delivered`.
    pub status: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::ChannelHealth)]
pub struct ChannelHealth {
    pub configured: bool,
    pub provider: String,
    /// `<SETTING> is not set` for each missing setting.
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::HealthResponse)]
pub struct HealthResponse {
    /// `communications`.
    pub service: String,
    /// `healthy` when any channel is configured, else `unhealthy`.
    pub status: String,
    /// `email`, `sms` and `voice`.
    pub channels: BTreeMap<String, ChannelHealth>,
    pub total_errors: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::EmailStatus)]
pub struct EmailStatus {
    pub configured: bool,
    pub api_key_set: bool,
    pub from_email_set: bool,
    pub from_email: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::SmsStatus)]
pub struct SmsStatus {
    pub configured: bool,
    pub account_sid_set: bool,
    pub auth_token_set: bool,
    pub phone_number_set: bool,
    pub phone_number: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::VoiceStatus)]
pub struct VoiceStatus {
    pub configured: bool,
    pub account_sid_set: bool,
    pub auth_token_set: bool,
    pub phone_number_set: bool,
}

/// Which settings are present (never their values, except the senders).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::StatusResponse)]
pub struct StatusResponse {
    pub email: EmailStatus,
    pub sms: SmsStatus,
    pub voice: VoiceStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::VersionResponse)]
pub struct VersionResponse {
    pub service: String,
    pub version: String,
    pub features: Vec<String>,
    pub providers: BTreeMap<String, String>,
    pub endpoints: Vec<String>,
}

/// The acknowledgement of a delivery webhook.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::WebhookResponse)]
pub struct WebhookResponse {
    /// `true` when the event moved a message forward; `false` when it changed nothing (an
    /// unknown message, a replay, a late or untracked event).
    pub applied: bool,
}

/// The sends and the message log need an active user when auth is mounted (they spend money).
type Sender = identity::Caller<need::User>;

/// The sender of a send, and who may read which messages: an administrator (or anyone on an open
/// deployment) every message, any other user their own.
fn sender(access: &Access) -> Option<i64> {
    access.user_id()
}

fn viewer(access: &Access) -> Viewer {
    match access.user_id() {
        Some(id) if !access.has_role(Role::Admin) => Viewer::User(id),
        _ => Viewer::All,
    }
}

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    request_body = EmailSendRequest,
    responses(
        (status = 200, body = EmailSendResponse),
        (status = 400, description = "Invalid request: missing field, bad address, no text or html"),
        (status = 401),
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

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    request_body = SmsSendRequest,
    responses(
        (status = 200, body = SmsSendResponse),
        (status = 400, description = "Invalid phone number, missing body, or message too long"),
        (status = 401),
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

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    params(PageParams, MessageQuery),
    responses(
        (status = 200, body = MessageListResponse),
        (status = 400, description = "Unknown channel"),
        (status = 401),
    )
)]
#[get("/messages")]
pub async fn list_messages(
    user: Sender,
    state: web::Data<CommsState>,
    page: web::Query<PageParams>,
    query: web::Query<MessageQuery>,
) -> Result<web::Json<MessageListResponse>, ApiError> {
    let page = page.into_inner().resolve()?;
    let query = query.into_inner();
    let channel = match query.channel.as_deref() {
        None | Some("") => None,
        Some(raw) => Some(Channel::parse(raw).ok_or_else(|| {
            CommsError::Invalid(format!("Unknown channel: {raw} (email, sms or voice)"))
        })?),
    };
    let filter = ListFilter {
        channel,
        status: query.status.filter(|s| !s.is_empty()),
    };
    let (messages, total) = state.service.messages(viewer(&user), filter, page).await?;
    Ok(web::Json(MessageListResponse {
        messages: messages.into_iter().map(MessageResponse::from).collect(),
        total,
        page: page.page,
        page_size: page.page_size,
    }))
}

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    params(("message_id" = i64, Path, description = "The message's id in the log")),
    responses(
        (status = 200, body = MessageResponse),
        (status = 401),
        (status = 404, description = "Message not found (or another user's)"),
    )
)]
#[get("/messages/{message_id}")]
pub async fn get_message(
    user: Sender,
    state: web::Data<CommsState>,
    id: web::Path<i64>,
) -> Result<web::Json<MessageResponse>, ApiError> {
    let id = id.into_inner();
    let message = state.service.message(viewer(&user), id).await?;
    Ok(web::Json(message.into()))
}

/// Twilio's status callbacks for messages and calls (form fields, `X-Twilio-Signature`).
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
    // What is accepted: `webhooks::twilio_verify`. A JSON body is verified through the URL's
    // `bodySHA256` before it is read.
    let body = if req.content_type().eq_ignore_ascii_case("application/json") {
        webhooks::TwilioPayload::Json(body.to_vec())
    } else {
        webhooks::TwilioPayload::Form(
            serde_urlencoded::from_bytes(&body)
                .map_err(|e| CommsError::BadPayload(format!("the form cannot be read: {e}")))?,
        )
    };
    let callback = webhooks::TwilioCallback {
        path_and_query: req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| req.path().to_owned()),
        body,
        signature: header(&req, "x-twilio-signature"),
        signature_settings: header(&req, webhooks::SIGNATURE_SETTINGS_HEADER),
    };
    let outcome = state.service.twilio_status(callback).await?;
    Ok(web::Json(WebhookResponse {
        applied: outcome == EventOutcome::Applied,
    }))
}

/// Resend's delivery events (Svix-signed: `svix-id`, `svix-timestamp`, `svix-signature`).
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
    let outcome = state
        .service
        .resend_event(
            [id.as_deref(), timestamp.as_deref(), signature.as_deref()],
            &body,
        )
        .await?;
    Ok(web::Json(WebhookResponse {
        applied: outcome == EventOutcome::Applied,
    }))
}

fn header(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[utoipa::path(tag = "comms", operation_id = "comms_health", responses((status = 200, body = HealthResponse)))]
#[get("/health")]
pub async fn health(state: web::Data<CommsState>) -> web::Json<HealthResponse> {
    let config = state.service.config();
    let channels: BTreeMap<String, ChannelHealth> = Channel::ALL
        .into_iter()
        .map(|channel| {
            let errors: Vec<String> = config
                .all_missing(channel)
                .into_iter()
                .map(|setting| format!("{setting} is not set"))
                .collect();
            let health = ChannelHealth {
                configured: errors.is_empty(),
                provider: channel.provider().to_owned(),
                errors,
            };
            (channel.as_str().to_owned(), health)
        })
        .collect();
    let total_errors = channels.values().map(|c| c.errors.len()).sum();
    let any = channels.values().any(|c| c.configured);
    web::Json(HealthResponse {
        service: "communications".to_owned(),
        status: if any { "healthy" } else { "unhealthy" }.to_owned(),
        channels,
        total_errors,
    })
}

#[utoipa::path(tag = "comms", responses((status = 200, body = StatusResponse)))]
#[get("/status")]
pub async fn status(state: web::Data<CommsState>) -> web::Json<StatusResponse> {
    let c = state.service.config();
    let phone_number_set = c.twilio_phone_number.is_some();
    web::Json(StatusResponse {
        email: EmailStatus {
            configured: c.missing(Channel::Email).is_none(),
            api_key_set: c.resend_api_key.is_some(),
            from_email_set: c.resend_from_email.is_some(),
            from_email: c.resend_from_email.clone(),
        },
        sms: SmsStatus {
            configured: c.missing(Channel::Sms).is_none(),
            account_sid_set: c.twilio_account_sid.is_some(),
            auth_token_set: c.twilio_auth_token.is_some(),
            phone_number_set,
            phone_number: c.twilio_phone_number.clone(),
        },
        voice: VoiceStatus {
            configured: c.missing(Channel::Voice).is_none(),
            account_sid_set: c.twilio_account_sid.is_some(),
            auth_token_set: c.twilio_auth_token.is_some(),
            phone_number_set,
        },
    })
}

/// Every route of the module, as the version answer lists them.
pub const ENDPOINTS: [&str; 10] = [
    "POST /comms/email/send",
    "POST /comms/sms/send",
    "POST /comms/call/make",
    "GET /comms/messages",
    "GET /comms/messages/{message_id}",
    "POST /comms/webhooks/twilio/status",
    "POST /comms/webhooks/resend",
    "GET /comms/health",
    "GET /comms/status",
    "GET /comms/version",
];

#[utoipa::path(tag = "comms", operation_id = "comms_version", responses((status = 200, body = VersionResponse)))]
#[get("/version")]
pub async fn version() -> web::Json<VersionResponse> {
    let endpoints = ENDPOINTS.map(str::to_owned).to_vec();
    web::Json(VersionResponse {
        service: "communications".to_owned(),
        version: "1.0".to_owned(),
        features: [
            "email_send",
            "sms_send",
            "voice_call",
            "webhook_handlers",
            "message_log",
        ]
        .map(str::to_owned)
        .to_vec(),
        providers: Channel::ALL
            .into_iter()
            .map(|c| (c.as_str().to_owned(), c.provider().to_owned()))
            .collect(),
        endpoints,
    })
}
