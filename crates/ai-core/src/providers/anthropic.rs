//! Anthropic Messages: `POST {base}/messages` with `x-api-key` and `anthropic-version`, the
//! system prompt as the top-level `system`, named events ending with `message_stop`.

use eventsource_stream::Event;
use serde::{Deserialize, Serialize};

use super::wire::{self, Ending, Step};
use super::{ChatModel, ChatRequest, ChatStream, Completion, Endpoint, ProviderError, Role};

const VERSION: &str = "2023-06-01";

pub struct Anthropic {
    http: kernel::http_client::HttpClient,
    endpoint: Endpoint,
}

impl Anthropic {
    pub fn new(http: kernel::http_client::HttpClient, endpoint: Endpoint) -> Self {
        Anthropic { http, endpoint }
    }

    fn request(&self, request: &ChatRequest, stream: bool) -> reqwest::RequestBuilder {
        let body = Body {
            model: &request.model,
            max_tokens: request.max_tokens,
            system: request.system.as_deref().filter(|s| !s.trim().is_empty()),
            messages: request
                .messages
                .iter()
                .map(|m| Message {
                    role: match m.role {
                        Role::User => "user",
                        Role::Assistant => "assistant",
                    },
                    content: &m.content,
                })
                .collect(),
            temperature: request.temperature,
            stream,
        };
        let builder = self
            .http
            .get()
            .post(wire::url(&self.endpoint.base_url, "messages"))
            .header("anthropic-version", VERSION)
            .json(&body);
        match &self.endpoint.api_key {
            Some(key) => builder.header("x-api-key", key),
            None => builder,
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for Anthropic {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ProviderError> {
        let answer: Answer =
            wire::complete(self.request(request, false), self.endpoint.timeout).await?;
        Ok(Completion {
            content: answer
                .content
                .iter()
                .filter(|b| b.kind == "text")
                .filter_map(|b| b.text.as_deref())
                .collect(),
            model: answer.model.unwrap_or_else(|| request.model.clone()),
            usage: super::Usage {
                input_tokens: answer.usage.as_ref().and_then(|u| u.input_tokens),
                output_tokens: answer.usage.as_ref().and_then(|u| u.output_tokens),
            },
            stop_reason: answer.stop_reason,
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

/// One named event: `message_start` (model, input tokens), `content_block_delta` (text),
/// `message_delta` (stop reason, output tokens), `message_stop` (the end), `error`.
pub(super) fn decode(event: &Event, reply: &mut Completion) -> Result<Step, ProviderError> {
    let data: StreamEvent = wire::chunk(&event.data)?;
    let name = wire::event_name(event, data.kind.as_deref());
    if name == "error" {
        let message = data.error.and_then(|e| e.message);
        return Err(ProviderError::new(message.unwrap_or_else(|| {
            "the provider sent an error in the stream".to_owned()
        })));
    }
    if let Some(message) = data.message {
        if let Some(model) = message.model.filter(|m| !m.is_empty()) {
            reply.model = model;
        }
        if let Some(usage) = message.usage {
            wire::merge_usage(&mut reply.usage, usage.input_tokens, usage.output_tokens);
        }
    }
    if let Some(usage) = data.usage {
        wire::merge_usage(&mut reply.usage, usage.input_tokens, usage.output_tokens);
    }
    match name {
        "message_stop" => Ok(Step::End),
        "content_block_delta" => Ok(data
            .delta
            .filter(|d| d.kind.as_deref() == Some("text_delta"))
            .and_then(|d| d.text)
            .map_or(Step::Skip, Step::Text)),
        "message_delta" => {
            if let Some(reason) = data.delta.and_then(|d| d.stop_reason) {
                reply.stop_reason = Some(reason);
            }
            Ok(Step::Skip)
        }
        _ => Ok(Step::Skip),
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: Vec<Message<'a>>,
    temperature: f32,
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
    model: Option<String>,
    content: Vec<Block>,
    stop_reason: Option<String>,
    usage: Option<Counts>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct Counts {
    input_tokens: Option<u32>,
    output_tokens: Option<u32>,
}

/// Every event's data, read with one shape (each event fills some of it).
#[derive(Deserialize)]
struct StreamEvent {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<StartMessage>,
    delta: Option<Delta>,
    usage: Option<Counts>,
    error: Option<StreamError>,
}

#[derive(Deserialize)]
struct StartMessage {
    model: Option<String>,
    usage: Option<Counts>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct StreamError {
    message: Option<String>,
}
