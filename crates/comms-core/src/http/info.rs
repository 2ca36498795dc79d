//! `GET /health`, `GET /status`, `GET /version`.

use std::collections::BTreeMap;

use actix_web::{get, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::CommsState;
use crate::Channel;

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
pub const ENDPOINTS: [&str; 13] = [
    "POST /comms/email/send",
    "POST /comms/sms/send",
    "POST /comms/call/make",
    "GET /comms/messages",
    "GET /comms/messages/{message_id}",
    "GET /comms/suppressions",
    "DELETE /comms/suppressions/{address}",
    "POST /comms/webhooks/twilio/status",
    "POST /comms/webhooks/twilio/inbound",
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
            "suppression_list",
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
