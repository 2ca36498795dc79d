//! LLM chat APIs in four dialects: OpenAI-compatible chat completions (OpenAI, Groq, Mistral,
//! Ollama), Anthropic messages, Gemini generateContent and Cohere v2 chat. Each replies with a
//! deterministic echo of the last user message, streamed word by word when asked.

mod anthropic;
mod cohere;
mod gemini;
mod openai;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::journal::Provider;
use crate::state::{Body, Reply, Sim};

/// Mount prefixes, plus the providers' own root paths for clients without a prefix.
pub fn routes(cfg: &mut web::ServiceConfig) {
    for provider in [
        Provider::Openai,
        Provider::Groq,
        Provider::Mistral,
        Provider::Ollama,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Cohere,
    ] {
        cfg.route(
            &format!("/{}/{{tail:.*}}", provider.name()),
            web::post().to(chat),
        );
    }
    cfg.route("/v1/chat/completions", web::post().to(chat))
        .route("/v1/messages", web::post().to(chat))
        .route("/v1beta/models/{tail:.*}", web::post().to(chat))
        .route("/v2/chat", web::post().to(chat));
}

fn provider_of(path: &str) -> Provider {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match Provider::from_name(first) {
        Some(provider) => provider,
        None if path == "/v1/messages" => Provider::Anthropic,
        None if first == "v1beta" => Provider::Gemini,
        None if first == "v2" => Provider::Cohere,
        None => Provider::Openai,
    }
}

async fn chat(sim: web::Data<Sim>, req: HttpRequest, body: Bytes) -> HttpResponse {
    let provider = provider_of(req.path());
    let action = match sim.begin(provider, &req, &body).await {
        Ok(action) => action,
        Err(response) => return response,
    };
    let mut reply = respond(&sim, provider, &req, &body).unwrap_or_else(|e| e);
    if !sim.llm_usage() {
        without_usage(&mut reply);
    }
    sim.finish(reply, action)
}

/// Removes every usage field (`usage`, Gemini's `usageMetadata`, Groq's `x_groq.usage`) from a
/// reply, streamed or not.
fn without_usage(reply: &mut Reply) {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("usage");
                map.remove("usageMetadata");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    match &mut reply.body {
        Body::Json(value) => strip(value),
        Body::Events(frames) => {
            for frame in frames.iter_mut() {
                let rewritten: Vec<String> = frame
                    .split_inclusive('\n')
                    .map(|line| match line.strip_prefix("data: ") {
                        Some(data) => match serde_json::from_str::<Value>(data.trim_end()) {
                            Ok(mut value) => {
                                strip(&mut value);
                                let end = &data[data.trim_end().len()..];
                                format!("data: {value}{end}")
                            }
                            Err(_) => line.to_owned(),
                        },
                        None => line.to_owned(),
                    })
                    .collect();
                *frame = rewritten.concat();
            }
        }
    }
}

fn respond(sim: &Sim, provider: Provider, req: &HttpRequest, body: &[u8]) -> Result<Reply, Reply> {
    let path = req.path();
    let known = match provider {
        Provider::Anthropic => path.ends_with("/messages"),
        Provider::Gemini => {
            path.contains(":generateContent") || path.contains(":streamGenerateContent")
        }
        Provider::Cohere => path.ends_with("/chat"),
        _ => path.ends_with("/chat/completions"),
    };
    if !known {
        return Err(error(provider, 404, None, &format!("Unknown path: {path}")));
    }
    authenticate(sim, provider, req)?;
    let request: Value = serde_json::from_slice(body)
        .map_err(|e| error(provider, 400, None, &format!("Invalid JSON body: {e}")))?;
    if !request.is_object() {
        return Err(error(
            provider,
            400,
            None,
            "The request body must be a JSON object",
        ));
    }
    match provider {
        Provider::Anthropic => anthropic::chat(req, &request),
        Provider::Gemini => gemini::chat(req, &request),
        Provider::Cohere => cohere::chat(&request),
        _ => openai::chat(provider, &request),
    }
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn authenticate(sim: &Sim, provider: Provider, req: &HttpRequest) -> Result<(), Reply> {
    let key = match provider {
        Provider::Ollama => return Ok(()),
        Provider::Anthropic => header(req, "x-api-key").map(str::to_owned),
        Provider::Gemini => header(req, "x-goog-api-key")
            .map(str::to_owned)
            .or_else(|| query_value(req, "key")),
        _ => header(req, "authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(|k| k.trim().to_owned()),
    }
    .filter(|k| !k.is_empty());
    let Some(key) = key else {
        return Err(match provider {
            Provider::Gemini => error(
                provider,
                403,
                None,
                "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
            ),
            Provider::Anthropic => error(provider, 401, None, "x-api-key header is required"),
            Provider::Cohere => error(provider, 401, None, "no api key supplied"),
            _ => error(
                provider,
                401,
                Some("missing_api_key"),
                "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            ),
        });
    };
    if sim
        .config
        .ai_api_key
        .as_ref()
        .is_some_and(|expected| *expected != key)
    {
        return Err(match provider {
            Provider::Gemini => error(
                provider,
                400,
                None,
                "API key not valid. Please pass a valid API key.",
            ),
            Provider::Anthropic => error(provider, 401, None, "invalid x-api-key"),
            Provider::Cohere => error(provider, 401, None, "invalid api token"),
            _ => error(
                provider,
                401,
                None,
                "Incorrect API key provided. You can find your API key in your account settings.",
            ),
        });
    }
    Ok(())
}

fn query_value(req: &HttpRequest, key: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(req.query_string())
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// The provider's error body for `status`.
pub fn error(provider: Provider, status: u16, code: Option<&str>, message: &str) -> Reply {
    let body = match provider {
        Provider::Anthropic => {
            let kind = code.unwrap_or(match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            });
            json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": format!("req_{}", crate::ids::stripe(""))})
        }
        Provider::Gemini => {
            let status_name = code.unwrap_or(match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                _ => "INTERNAL",
            });
            let mut error = json!({"code": status, "message": message, "status": status_name});
            if status == 400 && message.starts_with("API key not valid") {
                error["details"] = json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }]);
            }
            json!({ "error": error })
        }
        Provider::Cohere => json!({ "message": message }),
        _ => {
            let (kind, default_code) = match status {
                401 => ("invalid_request_error", Some("invalid_api_key")),
                404 => ("invalid_request_error", Some("model_not_found")),
                429 if code == Some("insufficient_quota") => ("insufficient_quota", None),
                429 => ("requests", Some("rate_limit_exceeded")),
                s if s >= 500 => ("server_error", None),
                _ => ("invalid_request_error", None),
            };
            let code = code.or(default_code);
            if provider == Provider::Mistral {
                json!({"object": "error", "message": message, "type": kind, "param": null, "code": code})
            } else {
                json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
            }
        }
    };
    Reply::json(status, body)
}

pub fn fault_reply(
    provider: Provider,
    status: u16,
    code: Option<&str>,
    message: Option<&str>,
) -> Reply {
    let default = match status {
        400 => "Invalid request.",
        401 => "Incorrect API key provided.",
        403 => "Permission denied.",
        404 => "The model does not exist.",
        429 => "Rate limit reached for requests. Please try again later.",
        529 => "Overloaded",
        503 => "The service is currently unavailable.",
        _ => "The server had an error while processing your request.",
    };
    error(provider, status, code, message.unwrap_or(default))
}

/// The text of a message's content: a string, or the `text` of each part.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The deterministic reply: the last user message, cut into word chunks (each keeps the
/// whitespace that follows it) and limited to `max_tokens` words.
pub struct Echo {
    pub chunks: Vec<String>,
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The reply was cut at `max_tokens`.
    pub truncated: bool,
}

/// `turns` are (role, text) pairs; the user role is `user` in every dialect.
pub fn echo(turns: &[(String, String)], max_tokens: Option<u64>) -> Echo {
    let last = turns
        .iter()
        .rev()
        .find(|(role, _)| role == "user")
        .map_or("", |(_, t)| t.as_str())
        .trim();
    let source = if last.is_empty() {
        "(empty message)"
    } else {
        last
    };
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in source.chars() {
        // A word starts after whitespace: the chunk so far (a word and its trailing space) is done.
        if !c.is_whitespace() && current.ends_with(char::is_whitespace) {
            chunks.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    chunks.push(current);
    let limit = max_tokens.map_or(usize::MAX, |m| {
        usize::try_from(m.max(1)).unwrap_or(usize::MAX)
    });
    let truncated = chunks.len() > limit;
    chunks.truncate(limit);
    if let Some(last) = chunks.last_mut() {
        let trimmed = last.trim_end().to_owned();
        *last = trimmed;
    }
    let words = |t: &str| t.split_whitespace().count() as u64;
    Echo {
        text: chunks.concat(),
        input_tokens: turns.iter().map(|(_, t)| words(t)).sum::<u64>().max(1),
        output_tokens: chunks.len() as u64,
        chunks,
        truncated,
    }
}

/// `event: <name>` / `data: <json>` frame.
pub fn named_frame(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// A `data: <json>` frame.
pub fn data_frame(data: &Value) -> String {
    format!("data: {data}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(text: &str) -> Vec<(String, String)> {
        vec![
            ("system".into(), "be brief".into()),
            ("user".into(), text.into()),
        ]
    }

    #[test]
    fn echo_is_chunked_by_word_and_limited() {
        let e = echo(&turns("Hello there  big world"), None);
        assert_eq!(e.chunks, vec!["Hello ", "there  ", "big ", "world"]);
        assert_eq!(e.text, "Hello there  big world");
        assert!(!e.truncated);
        let e = echo(&turns("one two three"), Some(2));
        assert_eq!(e.text, "one two");
        assert!(e.truncated);
        assert_eq!(echo(&turns("  "), None).text, "(empty message)");
    }

    #[test]
    fn paths_pick_the_provider() {
        assert_eq!(
            provider_of("/groq/openai/v1/chat/completions"),
            Provider::Groq
        );
        assert_eq!(provider_of("/v1/messages"), Provider::Anthropic);
        assert_eq!(
            provider_of("/v1beta/models/x:generateContent"),
            Provider::Gemini
        );
        assert_eq!(provider_of("/v1/chat/completions"), Provider::Openai);
    }
}
