//! The message log: `GET /messages`, `GET /messages/{message_id}`.

use actix_web::{get, web};
use kernel::pagination::PageParams;
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{CommsState, Sender, viewer};
use crate::Channel;
use crate::error::CommsError;
use crate::service::{ListFilter, Message};

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
