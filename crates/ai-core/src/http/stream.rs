//! `/ai/chat/stream`: a reply as server-sent events that a browser's `EventSource` can follow.
//!
//! Every event carries an id, `<message_id>:<n>` (`n` counts the events of the reply from 0, the
//! `connect`), and the stream opens with `retry:` ([`RETRY`]). An `EventSource` reconnects on its
//! own whenever a stream ends, the normal end after `complete` included, and then sends the last
//! id it saw as `Last-Event-ID`. A stream is never resumed or asked again: when its connection is
//! lost the provider request is cancelled and nothing is stored, and a finished one is over. So a
//! request with a `Last-Event-ID` is answered `204 No Content` (after the checks a new question
//! gets, so an invalid one is still its 4xx), which makes the `EventSource` stop reconnecting
//! (readyState `CLOSED`, HTML Living Standard, server-sent events).

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::HeaderName;
use actix_web::{Either, HttpRequest, HttpResponse, Responder, get, post, web};
use actix_web_lab::sse;
use futures_util::StreamExt;
use kernel::ApiError;
use kernel::identity;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{AiState, ChatBody, QUOTA_EXCEEDED, StreamQuery, caller, prepare};
use crate::providers::{ChatStream, Completion, StreamItem};
use crate::service::{AiService, Turn};

/// A comment line keeps idle streams open through proxies.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The reconnection time sent as `retry:`. A reconnect is only ever answered 204, so a browser
/// that was not closed after `complete`, or lost its connection, learns within a second that the
/// stream is over.
pub const RETRY: Duration = Duration::from_secs(1);

const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

#[utoipa::path(
    tag = "ai",
    request_body = ChatBody,
    params(("Last-Event-ID" = Option<String>, Header, nullable = false, description = "Sent by a client that reconnects (an EventSource does): answered 204, the stream is not asked again")),
    responses(
        (status = 200, description = "Server-sent events: connect, chunk..., final, complete (or one error). The stream opens with `retry: 1000`; every event has an id `<message_id>:<n>`", content_type = "text/event-stream"),
        (status = 204, description = "A reconnect (a Last-Event-ID was sent): the stream is over, nothing is asked again; an EventSource stops reconnecting"),
        (status = 400, description = "Empty or oversized message, or a conversation_id that is not a UUID"),
        (status = 401), (status = 403, description = "Access denied"),
        (status = 404, description = "Conversation error: Conversation <id> not found"),
        (status = 429, description = QUOTA_EXCEEDED, headers(("Retry-After" = u64, description = "Seconds until the next UTC midnight"))),
        (status = 503, description = "AI service error: <why>"),
    )
)]
#[post("/chat/stream")]
pub async fn chat_stream(
    req: HttpRequest,
    user: identity::Caller,
    state: web::Data<AiState>,
    body: kernel::http::Json<ChatBody>,
) -> Result<Either<HttpResponse, impl Responder>, ApiError> {
    let body = body.into_inner();
    let turn = prepare(
        &state,
        caller(&user, body.user_id)?,
        body.message,
        body.conversation_id,
    )
    .await?;
    if reconnect(&req) {
        return Ok(Either::Left(HttpResponse::NoContent().finish()));
    }
    Ok(Either::Right(open(state.service.clone(), turn)))
}

#[utoipa::path(
    tag = "ai",
    params(StreamQuery, ("Last-Event-ID" = Option<String>, Header, nullable = false, description = "Sent by a client that reconnects (an EventSource does): answered 204, the stream is not asked again")),
    responses(
        (status = 200, description = "Server-sent events, as POST /chat/stream (`retry: 1000`, an id on every event)", content_type = "text/event-stream"),
        (status = 204, description = "A reconnect (a Last-Event-ID was sent): the stream is over, nothing is asked again; an EventSource stops reconnecting"),
        (status = 400), (status = 401), (status = 403, description = "Access denied"),
        (status = 404),
        (status = 429, description = QUOTA_EXCEEDED, headers(("Retry-After" = u64, description = "Seconds until the next UTC midnight"))),
        (status = 503),
    )
)]
#[get("/chat/stream")]
pub async fn chat_stream_get(
    req: HttpRequest,
    user: identity::Caller,
    state: web::Data<AiState>,
    query: web::Query<StreamQuery>,
) -> Result<Either<HttpResponse, impl Responder>, ApiError> {
    let query = query.into_inner();
    let turn = prepare(
        &state,
        caller(&user, query.user_id)?,
        query.message,
        query.conversation_id,
    )
    .await?;
    if reconnect(&req) {
        return Ok(Either::Left(HttpResponse::NoContent().finish()));
    }
    Ok(Either::Right(open(state.service.clone(), turn)))
}

/// Whether the request is a client's reconnect: it names the last event it saw. Browsers send
/// the header only when they have an id, never empty.
fn reconnect(req: &HttpRequest) -> bool {
    req.headers()
        .get(LAST_EVENT_ID)
        .is_some_and(|v| !v.as_bytes().trim_ascii().is_empty())
}

/// Starts the provider stream on a task of its own and answers its events as they come.
fn open(service: Arc<dyn AiService>, turn: Turn) -> impl Responder {
    let (tx, rx) = mpsc::channel(32);
    tokio::spawn(relay(service, turn, tx));
    sse::Sse::from_infallible_receiver(rx)
        .with_retry_duration(RETRY)
        .with_keep_alive(KEEP_ALIVE)
}

/// The events of one reply, each with its id.
struct Events {
    tx: mpsc::Sender<sse::Event>,
    message_id: String,
    sent: u64,
}

impl Events {
    /// Sends the next event; false once the client is gone.
    async fn send(&mut self, name: &str, data: Value) -> bool {
        let id = format!("{}:{}", self.message_id, self.sent);
        self.sent += 1;
        let event = sse::Data::new(data.to_string()).event(name).id(id);
        self.tx.send(event.into()).await.is_ok()
    }

    /// The one `error` event that ends a failed stream.
    async fn fail(&mut self, detail: String) {
        let error = detail.split(':').next().unwrap_or("error").to_owned();
        self.send("error", json!({"error": error, "detail": detail}))
            .await;
    }
}

/// Relays the provider's stream as the spec's events. Returns as soon as the client is gone,
/// which drops the provider stream and so closes the provider request.
async fn relay(service: Arc<dyn AiService>, turn: Turn, tx: mpsc::Sender<sse::Event>) {
    let _open = kernel::metrics::OpenStream::start();
    let mut events = Events {
        tx,
        message_id: turn.message_id.clone(),
        sent: 0,
    };
    let connect = json!({"status": "connected", "message": "Stream started"});
    if !events.send("connect", connect).await {
        return;
    }
    // The chain may ask several providers, each within AI_TIMEOUT_SECONDS: a client that
    // leaves meanwhile ends the relay (the stream opened after all is dropped unread).
    let opened = tokio::select! {
        opened = service.open_stream(&turn) => opened,
        () = events.tx.closed() => {
            // The prompt was sent: it counts, as for any reply broken off.
            if let Err(e) = service.abandon(turn, "").await {
                tracing::error!(error = %e, "the tokens of a broken-off reply could not be counted");
            }
            return;
        }
    };
    let mut turn = turn;
    let mut stream = match opened {
        Ok(opened) => {
            turn.provider = opened.provider;
            turn.model = opened.model;
            opened.stream
        }
        Err(e) => {
            events.fail(e.to_string()).await;
            return;
        }
    };
    let ids = (turn.message_id.clone(), turn.conversation_id.clone());
    let mut streamed = String::new();
    let ended = follow(&mut stream, &mut events, &ids, &mut streamed).await;
    drop(stream);
    let completion = match ended {
        Ok(completion) => completion,
        Err(failure) => {
            if let Some(detail) = failure {
                events.fail(detail).await;
            }
            // The provider spent tokens on what was streamed: they count, estimated.
            if let Err(e) = service.abandon(turn, &streamed).await {
                tracing::error!(error = %e, "the tokens of a broken-off reply could not be counted");
            }
            return;
        }
    };
    let response_time_ms = turn.elapsed_ms();
    let (provider, model) = (turn.provider.clone(), turn.model.clone());
    if let Err(e) = service.finish(turn, &completion).await {
        tracing::error!(error = %e, "a completed reply could not be stored");
        let detail = "AI service error: the reply could not be stored";
        events.fail(detail.to_owned()).await;
        return;
    }
    let final_event = json!({
        "content": completion.content, "is_final": true, "is_delta": false,
        "message_id": ids.0, "conversation_id": ids.1,
        "timestamp": kernel::time::format(&kernel::time::now()),
        "response_time_ms": response_time_ms, "provider": provider, "model": model,
    });
    if events.send("final", final_event).await {
        // Who answered, as in `final` (a client may listen to `complete` alone).
        let complete = json!({
            "status": "completed", "message": "Stream completed",
            "provider": provider, "model": model,
        });
        events.send("complete", complete).await;
    }
}

/// Relays the provider's deltas as `chunk` events (and keeps them in `streamed`) until its
/// `Final`. `Err(None)` when the client left, `Err(Some(detail))` when the stream failed (the
/// `error` event's detail).
async fn follow(
    stream: &mut ChatStream,
    events: &mut Events,
    ids: &(String, String),
    streamed: &mut String,
) -> Result<Completion, Option<String>> {
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = events.tx.closed() => return Err(None),
        };
        match item {
            Some(Ok(StreamItem::Delta(content))) => {
                streamed.push_str(&content);
                let chunk = json!({
                    "content": content, "is_final": false, "is_delta": true,
                    "message_id": ids.0, "conversation_id": ids.1,
                    "timestamp": kernel::time::format(&kernel::time::now()),
                });
                if !events.send("chunk", chunk).await {
                    return Err(None);
                }
            }
            Some(Ok(StreamItem::Final(completion))) => return Ok(completion),
            Some(Err(e)) => return Err(Some(format!("AI provider error: {e}"))),
            None => {
                return Err(Some(
                    "AI provider error: the stream ended without a reply".to_owned(),
                ));
            }
        }
    }
}
