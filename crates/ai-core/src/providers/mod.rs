//! The chat model clients: one [`ChatModel`] trait, four dialects written on the workspace's
//! `reqwest` and `eventsource-stream` (OpenAI-compatible chat completions, Anthropic Messages,
//! Gemini `generateContent`, Cohere v2 chat), each exact to its provider's wire protocol.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use kernel::metrics::{CallOutcome, PendingCall};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// One earlier message, or the new user message (the last one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// What a provider is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    /// Sent the way the dialect takes a system prompt (a `system` message, Anthropic's `system`,
    /// Gemini's `systemInstruction`).
    pub system: Option<String>,
    /// Oldest first; the last is the user's new message.
    pub messages: Vec<ChatMessage>,
    pub temperature: f32,
    pub max_tokens: u32,
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
}

/// A whole reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub content: String,
    /// The model that answered, as the provider named it (the requested one when it does not say).
    pub model: String,
    pub usage: Usage,
    /// The provider's own word for why it stopped (`stop`, `end_turn`, `STOP`, `COMPLETE`, ...).
    pub stop_reason: Option<String>,
}

/// One item of a streamed reply: text deltas as they arrive, then exactly one `Final`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamItem {
    Delta(String),
    /// The whole reply (the deltas joined), with usage and stop reason.
    Final(Completion),
}

/// A streamed reply. It ends after `Final`, or with one `Err` (a provider error event, a broken
/// connection, a malformed chunk, no chunk within the timeout, or the stream ending before the
/// provider's end marker: never a silently short reply). Dropping it closes the provider request.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<StreamItem, ProviderError>> + Send>>;

/// A provider refused, failed, timed out or could not be reached: `message` is the provider's own
/// message (from its error body) or the transport error, shown after `AI provider error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub message: String,
    /// What kind of failure it was, as the provider-call metric counts it.
    outcome: CallOutcome,
    /// The provider refused the request itself (400, 413, 422: its content or size), which the
    /// next provider of the chain would be sent as well: no fallback for it.
    request_refused: bool,
}

impl ProviderError {
    /// An answer that could not be used (counted as `invalid_response`).
    pub fn new(message: impl Into<String>) -> Self {
        ProviderError {
            message: message.into(),
            outcome: CallOutcome::InvalidResponse,
            request_refused: false,
        }
    }

    /// The same error marked as a refusal of the request itself (see [`Self::falls_through`]).
    pub fn refusing_the_request(mut self) -> Self {
        self.request_refused = true;
        self
    }

    /// Whether the next provider of the chain is asked after this failure: after every failure
    /// (no answer, a timeout, an error status, an unreadable answer, a refused key) but the
    /// provider refusing the request itself, which the next one would be sent unchanged.
    pub fn falls_through(&self) -> bool {
        !self.request_refused
    }

    /// The same error counted as `outcome`.
    pub fn counted_as(mut self, outcome: CallOutcome) -> Self {
        self.outcome = outcome;
        self
    }

    pub fn outcome(&self) -> CallOutcome {
        self.outcome
    }
}

#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// The whole reply at once.
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ProviderError>;
    /// The reply as it is written. An error before the first chunk (refused, unreachable) is the
    /// `Err` here; later ones come through the stream.
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError>;
}

/// `model` with each call counted under `provider` in the provider-call metric: a `complete` when
/// it returns, a stream when it ends (`Final` or an error) or is dropped before (`cancelled`).
pub fn metered(provider: &'static str, model: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
    Arc::new(Metered { provider, model })
}

struct Metered {
    provider: &'static str,
    model: Arc<dyn ChatModel>,
}

#[async_trait::async_trait]
impl ChatModel for Metered {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ProviderError> {
        let result = self.model.complete(request).await;
        let outcome = result
            .as_ref()
            .map_or_else(ProviderError::outcome, |_| CallOutcome::Ok);
        kernel::metrics::provider_call(self.provider, outcome);
        result
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        let mut call = PendingCall::new(self.provider);
        let stream = self.model.stream(request).await.inspect_err(|e| {
            call.settle(e.outcome());
        })?;
        Ok(Box::pin(stream.inspect(move |item| match item {
            Ok(StreamItem::Final(_)) => call.settle(CallOutcome::Ok),
            Err(e) => call.settle(e.outcome()),
            Ok(StreamItem::Delta(_)) => {}
        })))
    }
}

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `POST {base}/chat/completions`, bearer key (none for `public` and `ollama`).
    OpenAi,
    /// `POST {base}/messages`, `x-api-key`, `anthropic-version: 2023-06-01`.
    Anthropic,
    /// `POST {base}/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`,
    /// `x-goog-api-key`.
    Gemini,
    /// `POST {base}/chat` (v2), bearer key.
    Cohere,
}

/// How to reach one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub dialect: Dialect,
    /// The base URL including its version path (`https://api.openai.com/v1`), with or without a
    /// trailing slash.
    pub base_url: String,
    pub api_key: Option<String>,
    /// The longest wait for the answer's head, for a whole `complete`, and between two chunks of
    /// a stream (`AI_TIMEOUT_SECONDS`).
    pub timeout: Duration,
}

/// The client for `endpoint`, over the outbound HTTP client.
pub fn client(http: kernel::http_client::HttpClient, endpoint: Endpoint) -> Arc<dyn ChatModel> {
    match endpoint.dialect {
        Dialect::OpenAi => Arc::new(openai::OpenAi::new(http, endpoint)),
        Dialect::Anthropic => Arc::new(anthropic::Anthropic::new(http, endpoint)),
        Dialect::Gemini => Arc::new(gemini::Gemini::new(http, endpoint)),
        Dialect::Cohere => Arc::new(cohere::Cohere::new(http, endpoint)),
    }
}

mod anthropic;
mod cohere;
mod gemini;
mod openai;
mod wire;

#[cfg(test)]
mod proptests;
