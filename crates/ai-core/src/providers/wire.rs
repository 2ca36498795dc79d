//! What the four dialects share: URLs, sending a request within the timeout, reading the
//! provider's error body, transport errors in words a deployer can act on, and the streamed
//! reply (server-sent events read one at a time, an idle timeout between them, exactly one
//! `Final` or one `Err` at the end).

use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt, stream};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use kernel::metrics::CallOutcome;

use super::{ChatStream, Completion, ProviderError, StreamItem, Usage};

/// `{base}/{path}`, whether or not the base ends with a slash.
pub(super) fn url(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// The setting that bounds every provider call.
const TIMEOUT_SETTING: &str = "AI_TIMEOUT_SECONDS";

fn no_answer(timeout: Duration) -> ProviderError {
    ProviderError::new(kernel::http_client::no_answer(timeout, TIMEOUT_SETTING))
        .counted_as(CallOutcome::Timeout)
}

/// A failure to send the request or to read the answer.
fn transport(error: &reqwest::Error, timeout: Duration) -> ProviderError {
    ProviderError::new(kernel::http_client::transport_error(
        error,
        timeout,
        TIMEOUT_SETTING,
    ))
    .counted_as(CallOutcome::of_transport(error))
}

/// The message of an error body: `error.message` (OpenAI, Anthropic, Gemini, Mistral), a
/// top-level `message` (Cohere, Mistral) or `detail` (Mistral); else the status and the start of
/// the body.
fn from_answer(status: reqwest::StatusCode, body: &[u8]) -> ProviderError {
    #[derive(Deserialize)]
    struct Detail {
        reason: Option<String>,
    }
    #[derive(Deserialize)]
    struct Inner {
        message: Option<String>,
        #[serde(default)]
        details: Vec<Detail>,
    }
    #[derive(Deserialize)]
    struct Body {
        error: Option<Inner>,
        message: Option<String>,
        detail: Option<serde_json::Value>,
    }
    let parsed = serde_json::from_slice::<Body>(body).ok();
    // Gemini answers an invalid key with 400 and the reason `API_KEY_INVALID`: a key, not the
    // request, is wrong.
    let bad_key = parsed.as_ref().is_some_and(|b| {
        b.error.as_ref().is_some_and(|e| {
            e.details
                .iter()
                .any(|d| d.reason.as_deref() == Some("API_KEY_INVALID"))
        })
    });
    let refused = matches!(status.as_u16(), 400 | 413 | 422) && !bad_key;
    let message = parsed.and_then(|b| {
        let detail = b.detail.and_then(|d| match d {
            serde_json::Value::String(s) => Some(s),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        });
        [b.error.and_then(|e| e.message), b.message, detail]
            .into_iter()
            .flatten()
            .find(|m| !m.trim().is_empty())
    });
    let error = ProviderError::new(message.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        let snippet: String = text.trim().chars().take(200).collect();
        if snippet.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {snippet}")
        }
    }))
    .counted_as(CallOutcome::HttpError);
    if refused {
        error.refusing_the_request()
    } else {
        error
    }
}

/// Sends `request` and reads the whole answer within `timeout`: a success's body as `T`, or the
/// provider's error.
pub(super) async fn complete<T: DeserializeOwned>(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<T, ProviderError> {
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| transport(&e, timeout))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| transport(&e, timeout))?;
    if !status.is_success() {
        return Err(from_answer(status, &body));
    }
    serde_json::from_slice(&body)
        .map_err(|e| ProviderError::new(format!("the provider's answer could not be read: {e}")))
}

/// What one event of a stream meant.
pub(super) enum Step {
    /// Nothing to pass on (a ping, a start event, usage only, an empty delta).
    Skip,
    /// Text to append to the reply.
    Text(String),
    /// The provider's end marker.
    End,
}

/// How a dialect's stream ends.
#[derive(Clone, Copy)]
pub(super) enum Ending {
    /// An end event (`[DONE]`, `message_stop`, `message-end`).
    Marker,
    /// End of the body after a chunk that carried a stop reason (Gemini).
    EofAfterStopReason,
}

/// Reads one event into the reply being built (model, usage, stop reason).
pub(super) type Decode = fn(&Event, &mut Completion) -> Result<Step, ProviderError>;

/// An event's data as `T`; data that is not that JSON is a malformed chunk.
pub(super) fn chunk<T: DeserializeOwned>(data: &str) -> Result<T, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        ProviderError::new(format!(
            "a chunk of the provider's stream could not be read: {e}"
        ))
    })
}

/// Sets the counts the provider reported, keeping earlier ones it does not repeat.
pub(super) fn merge_usage(usage: &mut Usage, input: Option<u32>, output: Option<u32>) {
    usage.input_tokens = input.or(usage.input_tokens);
    usage.output_tokens = output.or(usage.output_tokens);
}

/// The event's name: its `event:` field, else the `type` its data names.
pub(super) fn event_name<'a>(event: &'a Event, kind: Option<&'a str>) -> &'a str {
    match (event.event.as_str(), kind) {
        ("message", Some(kind)) => kind,
        (name, _) => name,
    }
}

type Events =
    std::pin::Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send>>;

/// A stream being read: the response's events and the reply so far. Dropping it drops the
/// response, which closes the request.
struct Reading {
    events: Events,
    reply: Completion,
    decode: Decode,
    ending: Ending,
    timeout: Duration,
}

/// Sends a streaming `request` (its head within `timeout`, no limit on the whole) and reads the
/// answer's events with `decode`, passing text on as it arrives.
pub(super) async fn stream(
    request: reqwest::RequestBuilder,
    timeout: Duration,
    model: &str,
    decode: Decode,
    ending: Ending,
) -> Result<ChatStream, ProviderError> {
    let head = async {
        let response = request.send().await.map_err(|e| transport(&e, timeout))?;
        let status = response.status();
        if status.is_success() {
            Ok(response)
        } else {
            let body = response.bytes().await.map_err(|e| transport(&e, timeout))?;
            Err(from_answer(status, &body))
        }
    };
    let response = tokio::time::timeout(timeout, head)
        .await
        .map_err(|_| no_answer(timeout))??;
    Ok(read_body(
        response.bytes_stream(),
        timeout,
        model,
        decode,
        ending,
    ))
}

/// Reads a streamed answer's body as server-sent events with `decode`.
pub(super) fn read_body<S, B>(
    body: S,
    timeout: Duration,
    model: &str,
    decode: Decode,
    ending: Ending,
) -> ChatStream
where
    S: Stream<Item = Result<B, reqwest::Error>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    let reading = Reading {
        events: Box::pin(without_leading_bom(body).eventsource()),
        reply: Completion {
            content: String::new(),
            model: model.to_owned(),
            usage: Usage::default(),
            stop_reason: None,
        },
        decode,
        ending,
        timeout,
    };
    Box::pin(stream::unfold(Some(reading), |reading| async {
        let mut reading = reading?;
        let item = reading.next_item().await;
        let more = matches!(item, Ok(StreamItem::Delta(_)));
        Some((item, more.then_some(reading)))
    }))
}

/// The body without the byte order marks it starts with: `eventsource-stream` 0.2.3 drops a
/// leading BOM by slicing its first text at byte 1, which panics (a BOM is 3 bytes in UTF-8).
fn without_leading_bom<S, B>(body: S) -> impl Stream<Item = Result<Vec<u8>, reqwest::Error>>
where
    S: Stream<Item = Result<B, reqwest::Error>>,
    B: AsRef<[u8]>,
{
    const BOM: &[u8] = "\u{feff}".as_bytes();
    // The start of the body, held back until it cannot be (part of) a BOM; `None` after.
    body.scan(Some(Vec::new()), |head, item| {
        let item = item.map(|bytes| match head {
            None => bytes.as_ref().to_vec(),
            Some(held) => {
                held.extend_from_slice(bytes.as_ref());
                while held.starts_with(BOM) {
                    held.drain(..BOM.len());
                }
                if BOM.starts_with(held) {
                    Vec::new()
                } else {
                    head.take().unwrap_or_default()
                }
            }
        });
        std::future::ready(Some(item))
    })
}

impl Reading {
    /// The next delta, or the end of the stream: `Final` or the error that cut it short.
    async fn next_item(&mut self) -> Result<StreamItem, ProviderError> {
        loop {
            let event = tokio::time::timeout(self.timeout, self.events.next())
                .await
                .map_err(|_| {
                    ProviderError::new(format!(
                        "no new chunk within {} (AI_TIMEOUT_SECONDS)",
                        kernel::http_client::seconds(self.timeout)
                    ))
                    .counted_as(CallOutcome::Timeout)
                })?;
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(EventStreamError::Transport(e))) => {
                    return Err(if e.is_timeout() {
                        no_answer(self.timeout)
                    } else {
                        ProviderError::new(format!(
                            "the stream broke off: {}",
                            kernel::error::cause_chain(&e)
                        ))
                        .counted_as(CallOutcome::of_transport(&e))
                    });
                }
                Some(Err(e)) => {
                    return Err(ProviderError::new(format!(
                        "the provider's stream could not be read: {e}"
                    )));
                }
                None => {
                    let complete = matches!(self.ending, Ending::EofAfterStopReason)
                        && self.reply.stop_reason.is_some();
                    return if complete {
                        Ok(StreamItem::Final(self.reply.clone()))
                    } else {
                        Err(ProviderError::new(
                            "the stream ended before the provider's end marker",
                        ))
                    };
                }
            };
            match (self.decode)(&event, &mut self.reply)? {
                Step::Text(text) if !text.is_empty() => {
                    self.reply.content.push_str(&text);
                    return Ok(StreamItem::Delta(text));
                }
                Step::Text(_) | Step::Skip => {}
                Step::End => return Ok(StreamItem::Final(self.reply.clone())),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_leading_byte_order_mark_is_skipped() {
        // Split inside the BOM too: eventsource-stream panicked on a body starting with one.
        let body = b"\xef\xbb\xbfdata: [DONE]\n\n".to_vec();
        for cut in [0, 1, 2, 3, 5] {
            let chunks = vec![body[..cut].to_vec(), body[cut..].to_vec()];
            let chunks = stream::iter(chunks.into_iter().map(Ok::<_, reqwest::Error>));
            let items: Vec<_> = read_body(
                chunks,
                Duration::from_secs(5),
                "m",
                |e, _| {
                    Ok(if e.data == "[DONE]" {
                        Step::End
                    } else {
                        Step::Skip
                    })
                },
                Ending::Marker,
            )
            .collect()
            .await;
            assert!(matches!(items[..], [Ok(StreamItem::Final(_))]), "{cut}");
        }
    }

    #[test]
    fn urls_join_with_or_without_a_trailing_slash() {
        assert_eq!(url("http://h/v1", "chat"), "http://h/v1/chat");
        assert_eq!(url("http://h/v1/", "chat"), "http://h/v1/chat");
    }

    #[test]
    fn error_bodies_give_the_providers_message_or_the_status() {
        let status = reqwest::StatusCode::BAD_GATEWAY;
        let message = |body: &str| from_answer(status, body.as_bytes()).message;
        assert_eq!(message(r#"{"error":{"message":"nested"}}"#), "nested");
        assert_eq!(message(r#"{"object":"error","message":"top"}"#), "top");
        assert_eq!(message(r#"{"detail":"Unauthorized"}"#), "Unauthorized");
        assert_eq!(
            message(r#"{"detail":[{"msg":"field required"}]}"#),
            r#"[{"msg":"field required"}]"#
        );
        assert_eq!(message(""), "HTTP 502 Bad Gateway");
        assert_eq!(
            message("<html>bad gateway</html>"),
            "HTTP 502 Bad Gateway: <html>bad gateway</html>"
        );
        assert_eq!(
            message(&"x".repeat(500)).len(),
            "HTTP 502 Bad Gateway: ".len() + 200
        );
    }

    #[test]
    fn only_a_refused_request_stops_the_fallbacks() {
        let falls = |status: u16, body: &str| {
            from_answer(
                reqwest::StatusCode::from_u16(status).unwrap(),
                body.as_bytes(),
            )
            .falls_through()
        };
        for status in [401, 403, 404, 408, 429, 500, 502, 503, 529] {
            assert!(falls(status, "{}"), "{status}");
        }
        for status in [400, 413, 422] {
            assert!(
                !falls(status, r#"{"error":{"message":"too long"}}"#),
                "{status}"
            );
        }
        let gemini_bad_key = r#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}"#;
        assert!(falls(400, gemini_bad_key));
        assert!(ProviderError::new("unreadable").falls_through());
    }
}
