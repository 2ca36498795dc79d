//! Gemini: `POST {base}/models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse` with `x-goog-api-key`. Each streamed chunk is a whole
//! response holding one delta; there is no end event: the stream is complete when a chunk carried
//! a `finishReason` and the body then ends.

use eventsource_stream::Event;
use serde::{Deserialize, Serialize};

use super::wire::{self, Ending, Step};
use super::{ChatModel, ChatRequest, ChatStream, Completion, Endpoint, ProviderError, Role};

pub struct Gemini {
    http: kernel::http_client::HttpClient,
    endpoint: Endpoint,
}

impl Gemini {
    pub fn new(http: kernel::http_client::HttpClient, endpoint: Endpoint) -> Self {
        Gemini { http, endpoint }
    }

    fn request(&self, request: &ChatRequest, stream: bool) -> reqwest::RequestBuilder {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        let body = Body {
            contents: request
                .messages
                .iter()
                .map(|m| Content {
                    role: match m.role {
                        Role::User => "user",
                        Role::Assistant => "model",
                    },
                    parts: [Part { text: &m.content }],
                })
                .collect(),
            system_instruction: request
                .system
                .as_deref()
                .filter(|s| !s.trim().is_empty())
                .map(|text| Instruction {
                    parts: [Part { text }],
                }),
            generation_config: GenerationConfig {
                temperature: request.temperature,
                max_output_tokens: request.max_tokens,
            },
        };
        let path = format!("models/{}:{method}", request.model);
        let builder = self
            .http
            .get()
            .post(wire::url(&self.endpoint.base_url, &path))
            .json(&body);
        match &self.endpoint.api_key {
            Some(key) => builder.header("x-goog-api-key", key),
            None => builder,
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for Gemini {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ProviderError> {
        let answer: Answer =
            wire::complete(self.request(request, false), self.endpoint.timeout).await?;
        if answer.candidates.is_empty() {
            return Err(blocked(&answer));
        }
        let mut reply = Completion {
            content: String::new(),
            model: request.model.clone(),
            usage: super::Usage::default(),
            stop_reason: None,
        };
        reply.content = read(answer, &mut reply);
        Ok(reply)
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        wire::stream(
            self.request(request, true),
            self.endpoint.timeout,
            &request.model,
            decode,
            Ending::EofAfterStopReason,
        )
        .await
    }
}

/// One chunk: its text, and the model, usage and finish reason it carries.
pub(super) fn decode(event: &Event, reply: &mut Completion) -> Result<Step, ProviderError> {
    let answer: Answer = wire::chunk(&event.data)?;
    if let Some(error) = &answer.error {
        return Err(ProviderError::new(
            error
                .message
                .as_deref()
                .unwrap_or("the provider sent an error in the stream"),
        ));
    }
    let blocked_prompt = answer
        .prompt_feedback
        .as_ref()
        .is_some_and(|f| f.block_reason.is_some());
    if answer.candidates.is_empty() && blocked_prompt {
        return Err(blocked(&answer));
    }
    Ok(Step::Text(read(answer, reply)))
}

/// The text of the first candidate; the rest goes into `reply`.
fn read(answer: Answer, reply: &mut Completion) -> String {
    if let Some(model) = answer.model_version.filter(|m| !m.is_empty()) {
        reply.model = model;
    }
    if let Some(usage) = answer.usage_metadata {
        wire::merge_usage(
            &mut reply.usage,
            usage.prompt_token_count,
            usage.candidates_token_count,
        );
    }
    let Some(candidate) = answer.candidates.into_iter().next() else {
        return String::new();
    };
    if let Some(reason) = candidate.finish_reason {
        reply.stop_reason = Some(reason);
    }
    candidate
        .content
        .map(|c| c.parts.into_iter().filter_map(|p| p.text).collect())
        .unwrap_or_default()
}

/// An answer without candidates: the prompt was blocked (or nothing came back).
fn blocked(answer: &Answer) -> ProviderError {
    match answer
        .prompt_feedback
        .as_ref()
        .and_then(|f| f.block_reason.as_deref())
    {
        Some(reason) => ProviderError::new(format!("the prompt was blocked ({reason})")),
        None => ProviderError::new("the provider's answer had no candidates"),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Instruction<'a>>,
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Instruction<'a> {
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Part<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    temperature: f32,
    max_output_tokens: u32,
}

/// A `GenerateContentResponse` (the whole answer, or one streamed chunk).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    candidates: Vec<Candidate>,
    usage_metadata: Option<Counts>,
    model_version: Option<String>,
    prompt_feedback: Option<Feedback>,
    /// An error sent in the stream.
    error: Option<StreamError>,
}

#[derive(Deserialize)]
struct StreamError {
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<CandidateContent>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<AnswerPart>,
}

#[derive(Deserialize)]
struct AnswerPart {
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Counts {
    prompt_token_count: Option<u32>,
    candidates_token_count: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Feedback {
    block_reason: Option<String>,
}
