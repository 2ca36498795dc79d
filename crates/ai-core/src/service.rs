//! The AI service: checks a turn, asks the provider, and keeps the conversation.

mod detached;

use std::sync::Arc;
use std::time::Instant;

use crate::budget::{self, Caller, Meter, Quota};
use crate::config::AiConfig;
use crate::error::AiError;
use crate::providers::{ChatMessage, ChatRequest, ChatStream, Completion, Role};
use crate::routing::{RouteHealth, Router};
use crate::store::{Conversation, ConversationHead, ConversationStore, Exchange, StoredMessage};

/// The caller when nobody says who they are (the spec's default `user_id`).
pub const DEFAULT_USER: &str = "api-user";
/// Characters of the first message kept as a conversation's title (then `...`).
pub const TITLE_CHARS: usize = 50;
pub const MAX_LIST_LIMIT: usize = 1000;

/// One question, checked and ready to send: [`AiService::prepare`] makes it.
#[derive(Debug, Clone)]
pub struct Turn {
    pub conversation_id: String,
    pub user_id: String,
    /// The id of the reply (one for the whole stream).
    pub message_id: String,
    /// The provider and model asked first (`AI_PROVIDER`, `AI_MODEL`); once a reply has come,
    /// the ones that gave it.
    pub provider: String,
    pub model: String,
    /// The identifier the reply's tokens are counted under (`None`: not counted).
    meter_key: Option<String>,
    request: ChatRequest,
    existing: Option<ConversationHead>,
    question: StoredMessage,
    started: Instant,
}

impl Turn {
    /// Milliseconds since the turn was prepared.
    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }
}

/// A whole reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub message_id: String,
    pub content: String,
    pub conversation_id: String,
    pub response_time_ms: f64,
    /// The provider and model that answered.
    pub provider: String,
    pub model: String,
}

/// A provider's stream, and who is sending it.
pub struct Opened {
    pub stream: ChatStream,
    pub provider: String,
    pub model: String,
}

/// What the health answer reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub enabled: bool,
    pub provider: String,
    pub model: String,
    pub total_conversations: Option<i64>,
    pub validation_errors: Vec<String>,
    /// Every provider of the chain, `AI_PROVIDER` first.
    pub providers: Vec<RouteHealth>,
}

#[async_trait::async_trait]
pub trait AiService: Send + Sync {
    /// Checks a question (400: empty, too long, a `conversation_id` that is not a UUID; 503: the
    /// service disabled or its key missing; 404/403: the conversation; 429: the caller's tokens
    /// for today are spent) and builds the request with the conversation's last messages as
    /// context.
    async fn prepare(
        &self,
        caller: &Caller,
        message: Option<String>,
        conversation_id: Option<String>,
    ) -> Result<Turn, AiError>;
    /// Asks the chain of providers for the whole reply, counts its tokens and stores the
    /// exchange.
    async fn chat(&self, turn: Turn) -> Result<Reply, AiError>;
    /// Opens the stream of the first provider of the chain that sends a first chunk.
    async fn open_stream(&self, turn: &Turn) -> Result<Opened, AiError>;
    /// Counts the tokens of a completed streamed exchange and stores it.
    async fn finish(&self, turn: Turn, completion: &Completion) -> Result<(), AiError>;
    /// A stream that ended before its reply completed (the client left, the provider failed):
    /// counts the prompt and what was `streamed`, estimated from characters, and stores nothing.
    async fn abandon(&self, turn: Turn, streamed: &str) -> Result<(), AiError>;
    /// The caller's plan, budget and tokens spent today.
    async fn usage(&self, caller: &Caller) -> Result<Quota, AiError>;
    /// A user's conversations, most recently active first (`limit` 1..=1000).
    async fn conversations(
        &self,
        user_id: &str,
        limit: usize,
    ) -> Result<Vec<ConversationHead>, AiError>;
    /// A conversation with every message; another user's is 403.
    async fn conversation(&self, user_id: &str, id: &str) -> Result<Conversation, AiError>;
    /// Deletes a user's conversation with its messages; another user's is 404, as one that does
    /// not exist (400: not a UUID).
    async fn delete_conversation(&self, user_id: &str, id: &str) -> Result<(), AiError>;
    async fn health(&self) -> Result<Health, AiError>;
    fn config(&self) -> &AiConfig;
}

pub(crate) struct AiServiceImpl {
    config: AiConfig,
    router: Arc<Router>,
    store: Arc<dyn ConversationStore>,
    meter: Arc<Meter>,
}

impl AiServiceImpl {
    pub(crate) fn new(
        config: AiConfig,
        router: Arc<Router>,
        store: Arc<dyn ConversationStore>,
        meter: Arc<Meter>,
    ) -> Self {
        AiServiceImpl {
            config,
            router,
            store,
            meter,
        }
    }

    /// Adds the tokens of `turn` answered by `reply` to its caller's count. A count that cannot
    /// be written is logged: the reply the provider already gave is not withheld for it.
    async fn spend(&self, turn: &Turn, reply: &str, usage: crate::providers::Usage) {
        let Some(key) = &turn.meter_key else {
            return;
        };
        let tokens = budget::spent(&turn.request, reply, usage);
        if let Err(e) = self.meter.spend(key, tokens).await {
            tracing::error!(error = %e, tokens, "the tokens of a reply could not be counted");
        }
    }

    fn unavailable(&self) -> Option<String> {
        if !self.config.enabled {
            return Some("AI service is disabled".to_owned());
        }
        self.config.missing_key(self.config.provider)
    }

    /// Stores the exchange of `turn` answered by `content` (from `turn.provider`'s
    /// `turn.model`).
    async fn store(&self, turn: Turn, content: &str) -> Result<(), AiError> {
        let now = kernel::time::now();
        let response_time_ms = turn.elapsed_ms();
        let continues = turn.existing.is_some();
        let head = match turn.existing {
            Some(mut head) => {
                head.message_count += 2;
                head.updated_at = now;
                head.last_response_time_ms = Some(response_time_ms);
                head.provider = turn.provider.clone();
                head.model = turn.model.clone();
                head
            }
            None => ConversationHead {
                id: turn.conversation_id.clone(),
                user_id: turn.user_id.clone(),
                title: title(&turn.question.content),
                provider: turn.provider.clone(),
                model: turn.model.clone(),
                message_count: 2,
                last_response_time_ms: Some(response_time_ms),
                created_at: turn.question.timestamp,
                updated_at: now,
            },
        };
        let answer = StoredMessage {
            id: turn.message_id.clone(),
            role: Role::Assistant,
            content: content.to_owned(),
            timestamp: now,
            provider: Some(turn.provider.clone()),
            model: Some(turn.model.clone()),
        };
        self.store
            .append(Exchange {
                head,
                question: turn.question,
                answer,
                continues,
            })
            .await
    }
}

/// The first message, cut to 50 characters plus `...` when longer.
pub fn title(message: &str) -> String {
    let message = message.trim();
    if message.chars().count() > TITLE_CHARS {
        let cut: String = message.chars().take(TITLE_CHARS).collect();
        format!("{cut}...")
    } else {
        message.to_owned()
    }
}

/// The longest caller identifier accepted.
pub const MAX_USER_ID_CHARS: usize = 255;

/// A caller identifier as sent in `user_id`: at most 255 characters, no NUL (it is stored with the
/// conversation and used in queries).
fn check_user(user_id: &str) -> Result<(), AiError> {
    if user_id.contains('\0') || user_id.chars().count() > MAX_USER_ID_CHARS {
        return Err(AiError::Invalid(format!(
            "Invalid user_id: at most {MAX_USER_ID_CHARS} characters, without NUL"
        )));
    }
    Ok(())
}

/// The conversation id a caller sent, as a UUID's canonical text (400 otherwise).
fn conversation_uuid(id: &str) -> Result<String, AiError> {
    Ok(uuid::Uuid::parse_str(id.trim())
        .map_err(|_| AiError::Invalid(format!("Invalid conversation_id: {id:?} is not a UUID")))?
        .to_string())
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[async_trait::async_trait]
impl AiService for AiServiceImpl {
    async fn prepare(
        &self,
        caller: &Caller,
        message: Option<String>,
        conversation_id: Option<String>,
    ) -> Result<Turn, AiError> {
        let user_id = caller.id.as_str();
        check_user(user_id)?;
        let message = message.unwrap_or_default();
        if message.trim().is_empty() {
            return Err(AiError::Invalid("Message must not be empty".into()));
        }
        let length = message.chars().count();
        if length > self.config.max_message_chars {
            return Err(AiError::Invalid(format!(
                "Message too long: {length} characters (max {})",
                self.config.max_message_chars
            )));
        }
        if message.contains('\0') {
            return Err(AiError::Invalid(
                "Invalid message: it contains a NUL character".into(),
            ));
        }
        let conversation_id = match conversation_id.filter(|id| !id.trim().is_empty()) {
            None => None,
            Some(raw) => Some(
                uuid::Uuid::parse_str(raw.trim())
                    .map_err(|_| {
                        AiError::Invalid(format!("Invalid conversation_id: {raw:?} is not a UUID"))
                    })?
                    .to_string(),
            ),
        };
        if let Some(why) = self.unavailable() {
            return Err(AiError::Unavailable(why));
        }
        let mut context = Vec::new();
        let existing = match &conversation_id {
            None => None,
            Some(id) => {
                let conversation = self
                    .store
                    .get(id, Some(self.config.context_messages))
                    .await?
                    .ok_or_else(|| AiError::NotFound(id.clone()))?;
                if conversation.head.user_id != user_id {
                    return Err(AiError::AccessDenied);
                }
                context = conversation.messages;
                Some(conversation.head)
            }
        };
        self.meter.check(caller).await?;
        let spec = self.config.provider;
        let model = self.config.model_for(spec);
        let mut messages: Vec<ChatMessage> = context
            .into_iter()
            .map(|m| ChatMessage {
                role: m.role,
                content: m.content,
            })
            .collect();
        messages.push(ChatMessage {
            role: Role::User,
            content: message.clone(),
        });
        Ok(Turn {
            conversation_id: conversation_id.unwrap_or_else(new_id),
            user_id: user_id.to_owned(),
            message_id: new_id(),
            provider: spec.name.to_owned(),
            model: model.clone(),
            meter_key: caller.metered.then(|| caller.id.clone()),
            request: ChatRequest {
                model,
                system: self.config.system_prompt.clone(),
                messages,
                temperature: self.config.temperature,
                max_tokens: self.config.max_tokens,
            },
            existing,
            question: StoredMessage {
                id: new_id(),
                role: Role::User,
                content: message,
                timestamp: kernel::time::now(),
                provider: None,
                model: None,
            },
            started: Instant::now(),
        })
    }

    async fn chat(&self, mut turn: Turn) -> Result<Reply, AiError> {
        let answered = self.router.complete(&turn.request).await?;
        let completion = answered.value;
        turn.provider = answered.provider.to_owned();
        turn.model = answered.model;
        self.spend(&turn, &completion.content, completion.usage)
            .await;
        let reply = Reply {
            message_id: turn.message_id.clone(),
            content: completion.content.clone(),
            conversation_id: turn.conversation_id.clone(),
            response_time_ms: turn.elapsed_ms(),
            provider: turn.provider.clone(),
            model: turn.model.clone(),
        };
        self.store(turn, &completion.content).await?;
        Ok(reply)
    }

    async fn open_stream(&self, turn: &Turn) -> Result<Opened, AiError> {
        let answered = self.router.stream(&turn.request).await?;
        Ok(Opened {
            stream: answered.value,
            provider: answered.provider.to_owned(),
            model: answered.model,
        })
    }

    async fn finish(&self, turn: Turn, completion: &Completion) -> Result<(), AiError> {
        self.spend(&turn, &completion.content, completion.usage)
            .await;
        self.store(turn, &completion.content).await
    }

    async fn abandon(&self, turn: Turn, streamed: &str) -> Result<(), AiError> {
        self.spend(&turn, streamed, crate::providers::Usage::default())
            .await;
        Ok(())
    }

    async fn usage(&self, caller: &Caller) -> Result<Quota, AiError> {
        check_user(&caller.id)?;
        self.meter.quota(caller).await
    }

    async fn conversations(
        &self,
        user_id: &str,
        limit: usize,
    ) -> Result<Vec<ConversationHead>, AiError> {
        check_user(user_id)?;
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(AiError::Invalid(format!(
                "Invalid limit: {limit} (from 1 to {MAX_LIST_LIMIT})"
            )));
        }
        self.store.list(user_id, limit).await
    }

    async fn conversation(&self, user_id: &str, id: &str) -> Result<Conversation, AiError> {
        check_user(user_id)?;
        let id = conversation_uuid(id)?;
        let conversation = self
            .store
            .get(&id, None)
            .await?
            .ok_or_else(|| AiError::NotFound(id.clone()))?;
        if conversation.head.user_id != user_id {
            return Err(AiError::AccessDenied);
        }
        Ok(conversation)
    }

    async fn delete_conversation(&self, user_id: &str, id: &str) -> Result<(), AiError> {
        check_user(user_id)?;
        let id = conversation_uuid(id)?;
        if self.store.delete(&id, user_id).await? {
            Ok(())
        } else {
            Err(AiError::NotFound(id))
        }
    }

    async fn health(&self) -> Result<Health, AiError> {
        let mut validation_errors = Vec::new();
        if let Some(why) = self.unavailable() {
            validation_errors.push(why);
        }
        Ok(Health {
            enabled: self.config.enabled,
            provider: self.config.provider.name.to_owned(),
            model: self.config.model_for(self.config.provider),
            total_conversations: self.store.count().await.ok(),
            validation_errors,
            providers: self.router.health(),
        })
    }

    fn config(&self) -> &AiConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::title;

    #[test]
    fn titles_are_cut_at_fifty_characters() {
        assert_eq!(title("Hello"), "Hello");
        let long = "é".repeat(60);
        assert_eq!(title(&long), format!("{}...", "é".repeat(50)));
        assert_eq!(title(&"a".repeat(50)), "a".repeat(50));
    }
}
