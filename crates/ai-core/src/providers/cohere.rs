//! Cohere v2 chat: `POST {base}/chat` with a bearer key, the system prompt as a `system` message,
//! named events ending with `message-end`.

use eventsource_stream::Event;
use serde::{Deserialize, Serialize};

use super::wire::{self, Ending, Step};
use super::{ChatModel, ChatRequest, ChatStream, Completion, Endpoint, ProviderError, Role, Usage};

pub struct Cohere {
    http: kernel::http_client::HttpClient,
    endpoint: Endpoint,
}

impl Cohere {
    pub fn new(http: kernel::http_client::HttpClient, endpoint: Endpoint) -> Self {
        Cohere { http, endpoint }
    }

    fn request(&self, request: &ChatRequest, stream: bool) -> reqwest::RequestBuilder {
        let mut messages: Vec<Message<'_>> = request
            .system
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(|content| Message {
                role: "system",
                content,
            })
            .into_iter()
            .collect();
        messages.extend(request.messages.iter().map(|m| Message {
            role: match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            },
            content: &m.content,
        }));
        let body = Body {
            model: &request.model,
            messages,
            temperature: request.temperature,
            max_tokens: request.max_tokens,
            stream,
        };
        let builder = self
            .http
            .get()
            .post(wire::url(&self.endpoint.base_url, "chat"))
            .json(&body);
        match &self.endpoint.api_key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for Cohere {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ProviderError> {
        let answer: Answer =
            wire::complete(self.request(request, false), self.endpoint.timeout).await?;
        Ok(Completion {
            content: answer
                .message
                .content
                .iter()
                .filter(|b| b.kind == "text")
                .filter_map(|b| b.text.as_deref())
                .collect(),
            model: request.model.clone(),
            usage: answer.usage.map(Counts::usage).unwrap_or_default(),
            stop_reason: answer.finish_reason,
        })
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        wire::stream(
            self.request(request, true),
            self.endpoint.timeout,
            &request.model,
            decode,
            Ending::Marker,
        )
        .await
    }
}

/// One named event: `content-delta` (text), `message-end` (finish reason, usage: the end).
pub(super) fn decode(event: &Event, reply: &mut Completion) -> Result<Step, ProviderError> {
    let data: StreamEvent = wire::chunk(&event.data)?;
    let delta = data.delta;
    match wire::event_name(event, data.kind.as_deref()) {
        "content-delta" => Ok(delta
            .and_then(|d| d.message)
            .and_then(|m| m.content)
            .and_then(|c| c.get("text").and_then(|t| t.as_str()).map(str::to_owned))
            .map_or(Step::Skip, Step::Text)),
        "message-end" => {
            if let Some(delta) = delta {
                if let Some(reason) = delta.finish_reason {
                    reply.stop_reason = Some(reason);
                }
                if let Some(usage) = delta.usage.map(Counts::usage) {
                    wire::merge_usage(&mut reply.usage, usage.input_tokens, usage.output_tokens);
                }
            }
            Ok(Step::End)
        }
        _ => Ok(Step::Skip),
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    temperature: f32,
    max_tokens: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Deserialize)]
struct Answer {
    finish_reason: Option<String>,
    message: AnswerMessage,
    usage: Option<Counts>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    #[serde(default)]
    content: Vec<Block>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

/// `usage`: the billed units, else the raw token counts (Cohere sends numbers that may be
/// written as floats).
#[derive(Deserialize)]
struct Counts {
    billed_units: Option<Tokens>,
    tokens: Option<Tokens>,
}

#[derive(Deserialize)]
struct Tokens {
    input_tokens: Option<f64>,
    output_tokens: Option<f64>,
}

impl Counts {
    fn usage(self) -> Usage {
        let count = |n: Option<f64>| n.map(|n| n.max(0.0).round() as u32);
        let pick = |f: fn(&Tokens) -> Option<f64>| {
            count(
                self.billed_units
                    .as_ref()
                    .and_then(f)
                    .or_else(|| self.tokens.as_ref().and_then(f)),
            )
        };
        Usage {
            input_tokens: pick(|t| t.input_tokens),
            output_tokens: pick(|t| t.output_tokens),
        }
    }
}

#[derive(Deserialize)]
struct StreamEvent {
    #[serde(rename = "type")]
    kind: Option<String>,
    delta: Option<Delta>,
}

#[derive(Deserialize)]
struct Delta {
    message: Option<DeltaMessage>,
    finish_reason: Option<String>,
    usage: Option<Counts>,
}

/// `content` is a list in `message-start` and one part in `content-start`/`content-delta`.
#[derive(Deserialize)]
struct DeltaMessage {
    content: Option<serde_json::Value>,
}
