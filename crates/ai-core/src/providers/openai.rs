//! OpenAI-compatible chat completions (OpenAI, Groq, Mistral, Ollama, Pollinations):
//! `POST {base}/chat/completions`, a bearer key when there is one, `data:` chunks ending with
//! `data: [DONE]`.

use eventsource_stream::Event;
use serde::{Deserialize, Serialize};

use super::wire::{self, Ending, Step};
use super::{ChatModel, ChatRequest, ChatStream, Completion, Endpoint, ProviderError, Role, Usage};

pub struct OpenAi {
    http: kernel::http_client::HttpClient,
    endpoint: Endpoint,
}

impl OpenAi {
    pub fn new(http: kernel::http_client::HttpClient, endpoint: Endpoint) -> Self {
        OpenAi { http, endpoint }
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
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        let builder = self
            .http
            .get()
            .post(wire::url(&self.endpoint.base_url, "chat/completions"))
            .json(&body);
        match &self.endpoint.api_key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenAi {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ProviderError> {
        let answer: Answer =
            wire::complete(self.request(request, false), self.endpoint.timeout).await?;
        let choice = answer.choices.into_iter().next();
        Ok(Completion {
            content: choice
                .as_ref()
                .and_then(|c| c.message.content.clone())
                .unwrap_or_default(),
            model: answer.model.unwrap_or_else(|| request.model.clone()),
            usage: answer.usage.map(Counts::usage).unwrap_or_default(),
            stop_reason: choice.and_then(|c| c.finish_reason),
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

/// One `data:` chunk. The finish reason alone is not the end: usage may follow (a chunk with
/// empty `choices`, or Groq's `x_groq.usage`), then `[DONE]`.
pub(super) fn decode(event: &Event, reply: &mut Completion) -> Result<Step, ProviderError> {
    if event.data.trim() == "[DONE]" {
        return Ok(Step::End);
    }
    let chunk: Chunk = wire::chunk(&event.data)?;
    if let Some(error) = chunk.error {
        return Err(ProviderError::new(error.message.unwrap_or_else(|| {
            "the provider sent an error in the stream".to_owned()
        })));
    }
    if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
        reply.model = model;
    }
    if let Some(usage) = chunk.usage.or(chunk.x_groq.and_then(|x| x.usage)) {
        wire::merge_usage(
            &mut reply.usage,
            usage.prompt_tokens,
            usage.completion_tokens,
        );
    }
    let Some(choice) = chunk.choices.into_iter().next() else {
        return Ok(Step::Skip);
    };
    if let Some(reason) = choice.finish_reason {
        reply.stop_reason = Some(reason);
    }
    Ok(choice
        .delta
        .and_then(|d| d.content)
        .map_or(Step::Skip, Step::Text))
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    temperature: f32,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Deserialize)]
struct Answer {
    model: Option<String>,
    choices: Vec<Choice>,
    usage: Option<Counts>,
}

#[derive(Deserialize)]
struct Choice {
    message: AnswerMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Counts {
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
}

impl Counts {
    fn usage(self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
        }
    }
}

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<Counts>,
    x_groq: Option<Groq>,
    error: Option<ChunkError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Groq {
    usage: Option<Counts>,
}

#[derive(Deserialize)]
struct ChunkError {
    message: Option<String>,
}
