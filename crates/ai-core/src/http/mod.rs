//! Handlers of `/ai` (also mounted at `/api/v1/ai`) and their bodies; the SSE stream is in
//! [`stream`].

pub mod stream;
pub mod usage;

use std::sync::Arc;

use actix_web::{HttpResponse, delete, get, post, web};
use kernel::ApiError;
use kernel::Timestamp;
use kernel::identity::{self, Access, AuthFailure};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::budget::Caller;
use crate::config::PROVIDERS;
use crate::providers::Role;
use crate::service::{AiService, DEFAULT_USER, Turn};
use crate::store::{Conversation, ConversationHead};

pub struct AiState {
    pub service: Arc<dyn AiService>,
}

/// The 429 of the routes that ask the provider, as the OpenAPI document describes it.
const QUOTA_EXCEEDED: &str = "AI quota exceeded: the caller's plan's tokens for today are spent (AI_DAILY_TOKENS_<PLAN>); the detail names the plan, its daily tokens and when the count resets (the next UTC midnight, also as Retry-After seconds)";

/// A question. With a bearer token (when auth is mounted) the user comes from the token and
/// `user_id` is ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = ai::ChatRequest)]
pub struct ChatBody {
    /// 1 to `AI_MAX_MESSAGE_CHARS` characters, not only spaces.
    #[schema(min_length = 1, pattern = "\\S")]
    pub message: Option<String>,
    /// A conversation to continue (a UUID); absent or null starts one.
    pub conversation_id: Option<String>,
    /// Default `api-user`.
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::ChatResponse)]
pub struct ChatResponse {
    pub message_id: String,
    pub content: String,
    pub conversation_id: String,
    pub response_time_ms: f64,
    /// The provider that answered: `AI_PROVIDER`, or one of `AI_FALLBACK_PROVIDERS` when the
    /// providers before it failed.
    pub provider: String,
    /// The model that answered (as configured for that provider).
    pub model: String,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// The question (required).
    #[param(min_length = 1, pattern = "\\S")]
    pub message: Option<String>,
    pub conversation_id: Option<String>,
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Default `api-user` (ignored with a bearer token).
    pub user_id: Option<String>,
    /// 1 to 1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserQuery {
    /// Default `api-user` (ignored with a bearer token).
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::ConversationSummary)]
pub struct ConversationSummary {
    pub id: String,
    pub title: String,
    pub message_count: i64,
    pub last_activity: Timestamp,
    pub provider: String,
    pub model: String,
}

impl From<ConversationHead> for ConversationSummary {
    fn from(h: ConversationHead) -> Self {
        ConversationSummary {
            id: h.id,
            title: h.title,
            message_count: h.message_count,
            last_activity: Timestamp(h.updated_at),
            provider: h.provider,
            model: h.model,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::Message)]
pub struct MessageBody {
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub timestamp: Timestamp,
    /// The provider that wrote a reply; null for the user's messages (and for replies stored
    /// before it was kept).
    pub provider: Option<String>,
    /// The model that wrote a reply; null as `provider`.
    pub model: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::ConversationMetadata)]
pub struct ConversationMetadata {
    pub user_id: String,
    pub last_response_time_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::ConversationDetail)]
pub struct ConversationDetail {
    pub id: String,
    pub title: String,
    pub provider: String,
    pub model: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub message_count: i64,
    pub messages: Vec<MessageBody>,
    pub metadata: ConversationMetadata,
}

impl From<Conversation> for ConversationDetail {
    fn from(c: Conversation) -> Self {
        let h = c.head;
        ConversationDetail {
            id: h.id,
            title: h.title,
            provider: h.provider,
            model: h.model,
            created_at: Timestamp(h.created_at),
            updated_at: Timestamp(h.updated_at),
            message_count: h.message_count,
            messages: c
                .messages
                .into_iter()
                .map(|m| MessageBody {
                    id: m.id,
                    role: match m.role {
                        Role::User => "user",
                        Role::Assistant => "assistant",
                    }
                    .to_owned(),
                    content: m.content,
                    timestamp: Timestamp(m.timestamp),
                    provider: m.provider,
                    model: m.model,
                })
                .collect(),
            metadata: ConversationMetadata {
                user_id: h.user_id,
                last_response_time_ms: h.last_response_time_ms,
            },
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::HealthResponse)]
pub struct HealthResponse {
    pub service: String,
    /// `healthy`, `unhealthy` (disabled or misconfigured) or `error` (conversations unreadable).
    pub status: String,
    pub enabled: bool,
    pub provider: String,
    pub model: String,
    pub agent_ready: bool,
    pub total_conversations: i64,
    pub configuration_valid: bool,
    pub validation_errors: Vec<String>,
    /// Every provider a reply may come from, in the order they are asked: `AI_PROVIDER`, then
    /// `AI_FALLBACK_PROVIDERS`.
    pub providers: Vec<ProviderHealth>,
}

/// One provider of the chain and its circuit breaker.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::ProviderHealth)]
pub struct ProviderHealth {
    pub provider: String,
    pub model: String,
    /// `primary` (`AI_PROVIDER`) or `fallback`.
    pub role: String,
    /// False when it cannot be asked (`error` says why).
    pub configured: bool,
    pub error: Option<String>,
    /// `closed` (asked), `open` (skipped after `AI_CIRCUIT_FAILURES` consecutive failures, until
    /// `retry_at`) or `half_open` (one request is trying it again).
    pub circuit: String,
    /// Failures since its last success.
    pub consecutive_failures: u32,
    /// When an open circuit lets a request try it again.
    pub retry_at: Option<Timestamp>,
    /// The message of its last failure.
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::VersionResponse)]
pub struct VersionResponse {
    pub service: String,
    pub engine: String,
    pub version: String,
    pub features: Vec<String>,
    pub providers_supported: Vec<String>,
}

/// The caller: the token's user when one is sent, else the `user_id` given, else `api-user`.
/// With an identity provider mounted, a `user_id` that is an account's id (the key of that
/// user's conversations) needs the account's token: without one it is 401, so that nobody reads
/// or continues another user's conversations by sending their id. Only a token's user is an
/// account, whose plan the entitlements tell; anyone else has the free plan.
fn caller(access: &Access, given: Option<String>) -> Result<Caller, ApiError> {
    if let Some(id) = access.user_id() {
        return Ok(Caller::account(id));
    }
    let given = given
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_USER.to_owned());
    let an_account = given.parse::<i64>().is_ok_and(|id| id.to_string() == given);
    if *access == Access::Anonymous && an_account {
        return Err(AuthFailure::NotAuthenticated.into());
    }
    Ok(Caller::anonymous(given))
}

async fn prepare(
    state: &AiState,
    caller: Caller,
    message: Option<String>,
    conversation_id: Option<String>,
) -> Result<Turn, ApiError> {
    Ok(state
        .service
        .prepare(&caller, message, conversation_id)
        .await?)
}

#[utoipa::path(
    tag = "ai",
    request_body = ChatBody,
    responses(
        (status = 200, body = ChatResponse),
        (status = 400, description = "Empty or oversized message, or a conversation_id that is not a UUID"),
        (status = 401, description = "A bearer token that does not validate"),
        (status = 403, description = "Access denied"),
        (status = 404, description = "Conversation error: Conversation <id> not found"),
        (status = 429, description = QUOTA_EXCEEDED, headers(("Retry-After" = u64, description = "Seconds until the next UTC midnight"))),
        (status = 502, description = "AI provider error: <the provider's message> (with fallback providers, each one's: `openai: <message>; anthropic: <message>`)"),
        (status = 503, description = "AI service error: <why> (disabled, a key missing, or every provider skipped after repeated failures: then with Retry-After)", headers(("Retry-After" = u64, description = "When every provider is skipped: seconds until the first may be tried again"))),
    )
)]
#[post("/chat")]
pub async fn chat(
    user: identity::Caller,
    state: web::Data<AiState>,
    body: kernel::http::Json<ChatBody>,
) -> Result<web::Json<ChatResponse>, ApiError> {
    let body = body.into_inner();
    let turn = prepare(
        &state,
        caller(&user, body.user_id)?,
        body.message,
        body.conversation_id,
    )
    .await?;
    let reply = state.service.chat(turn).await?;
    Ok(web::Json(ChatResponse {
        message_id: reply.message_id,
        content: reply.content,
        conversation_id: reply.conversation_id,
        response_time_ms: reply.response_time_ms,
        provider: reply.provider,
        model: reply.model,
    }))
}

#[utoipa::path(
    tag = "ai",
    params(ListQuery),
    responses(
        (status = 200, body = Vec<ConversationSummary>),
        (status = 400, description = "limit outside 1..1000"),
        (status = 401),
    )
)]
#[get("/conversations")]
pub async fn conversations(
    user: identity::Caller,
    state: web::Data<AiState>,
    query: web::Query<ListQuery>,
) -> Result<web::Json<Vec<ConversationSummary>>, ApiError> {
    let query = query.into_inner();
    let user = caller(&user, query.user_id)?.id;
    let limit = usize::try_from(query.limit.unwrap_or(50)).unwrap_or(0);
    let heads = state.service.conversations(&user, limit).await?;
    Ok(web::Json(
        heads.into_iter().map(ConversationSummary::from).collect(),
    ))
}

#[utoipa::path(
    tag = "ai",
    params(("conversation_id" = String, Path, description = "A UUID"), UserQuery),
    responses(
        (status = 200, body = ConversationDetail),
        (status = 400, description = "Not a UUID"),
        (status = 401), (status = 403, description = "Access denied"),
        (status = 404, description = "Conversation error: Conversation <id> not found"),
    )
)]
#[get("/conversations/{conversation_id}")]
pub async fn conversation(
    user: identity::Caller,
    state: web::Data<AiState>,
    id: web::Path<String>,
    query: web::Query<UserQuery>,
) -> Result<web::Json<ConversationDetail>, ApiError> {
    let user = caller(&user, query.into_inner().user_id)?.id;
    let conversation = state.service.conversation(&user, &id).await?;
    Ok(web::Json(conversation.into()))
}

#[utoipa::path(
    tag = "ai",
    params(("conversation_id" = String, Path, description = "A UUID"), UserQuery),
    responses(
        (status = 204, description = "Deleted, with every message"),
        (status = 400, description = "Not a UUID"),
        (status = 401),
        (status = 404, description = "Conversation error: Conversation <id> not found (also when it is another user's)"),
    )
)]
#[delete("/conversations/{conversation_id}")]
pub async fn delete_conversation(
    user: identity::Caller,
    state: web::Data<AiState>,
    id: web::Path<String>,
    query: web::Query<UserQuery>,
) -> Result<HttpResponse, ApiError> {
    let user = caller(&user, query.into_inner().user_id)?.id;
    state.service.delete_conversation(&user, &id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "ai", operation_id = "ai_health", responses((status = 200, body = HealthResponse)))]
#[get("/health")]
pub async fn health(state: web::Data<AiState>) -> Result<web::Json<HealthResponse>, ApiError> {
    let health = state.service.health().await?;
    let valid = health.validation_errors.is_empty();
    let status = match (valid, health.total_conversations) {
        (_, None) => "error",
        (false, _) => "unhealthy",
        (true, Some(_)) => "healthy",
    };
    Ok(web::Json(HealthResponse {
        service: "ai".to_owned(),
        status: status.to_owned(),
        enabled: health.enabled,
        provider: health.provider,
        model: health.model,
        agent_ready: valid && health.enabled,
        total_conversations: health.total_conversations.unwrap_or(0),
        configuration_valid: valid,
        validation_errors: health.validation_errors,
        providers: health
            .providers
            .into_iter()
            .enumerate()
            .map(|(i, p)| ProviderHealth {
                provider: p.provider.to_owned(),
                model: p.model,
                role: if i == 0 { "primary" } else { "fallback" }.to_owned(),
                configured: p.error.is_none(),
                error: p.error,
                circuit: p.circuit.phase.to_owned(),
                consecutive_failures: p.circuit.consecutive_failures,
                retry_at: p.circuit.retry_at.map(Timestamp),
                last_error: p.circuit.last_error,
            })
            .collect(),
    }))
}

#[utoipa::path(tag = "ai", operation_id = "ai_version", responses((status = 200, body = VersionResponse)))]
#[get("/version")]
pub async fn version() -> web::Json<VersionResponse> {
    web::Json(VersionResponse {
        service: "ai".to_owned(),
        engine: format!(
            "keel ai-core {} (native provider clients on reqwest and eventsource-stream)",
            env!("CARGO_PKG_VERSION")
        ),
        version: "1.0".to_owned(),
        features: [
            "chat",
            "streaming",
            "conversation_management",
            "multi_provider_support",
            "health_monitoring",
        ]
        .map(str::to_owned)
        .to_vec(),
        providers_supported: PROVIDERS
            .iter()
            .filter(|p| p.key_setting.is_some())
            .map(|p| p.name.to_owned())
            .collect(),
    })
}
