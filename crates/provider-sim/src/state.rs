//! The simulator's shared state and the plumbing every provider route goes through: journal the
//! request, apply the next scripted fault, render the reply (JSON or an event stream).

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use futures_util::stream::{self, LocalBoxStream, StreamExt};
use serde_json::Value;

use crate::delivery::{CallbackOptions, Delivery};
use crate::faults::{Fault, FaultAction, Faults};
use crate::journal::{JournalEntry, Provider};
use crate::outbox::Outbox;
use crate::{SimConfig, llm, resend, stripe, twilio};

/// Locks a mutex, ignoring poisoning (no invariant spans a panic here).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub struct Sim {
    pub config: SimConfig,
    pub base_url: String,
    pub client: reqwest::Client,
    pub outbox: Mutex<Outbox>,
    pub stripe: Mutex<stripe::State>,
    /// Resend idempotency keys: key -> (request body, response).
    pub resend_idempotency: Mutex<HashMap<String, (String, Value)>>,
    journal: Mutex<Vec<JournalEntry>>,
    faults: Mutex<Faults>,
    deliveries: Mutex<Vec<Delivery>>,
    callback_options: Mutex<CallbackOptions>,
    chunk_delay_ms: AtomicU64,
    /// Whether LLM replies report token usage (changeable at run time).
    llm_usage: AtomicBool,
}

impl Sim {
    pub fn new(config: SimConfig, base_url: String, client: reqwest::Client) -> Sim {
        let delay = u64::try_from(config.chunk_delay.as_millis()).unwrap_or(u64::MAX);
        Sim {
            stripe: Mutex::new(stripe::State::new(&config.prices)),
            config,
            base_url,
            client,
            outbox: Mutex::default(),
            resend_idempotency: Mutex::default(),
            journal: Mutex::default(),
            faults: Mutex::default(),
            deliveries: Mutex::default(),
            callback_options: Mutex::default(),
            chunk_delay_ms: AtomicU64::new(delay),
            llm_usage: AtomicBool::new(true),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    // ----- journal, faults, deliveries

    pub fn journal(&self) -> Vec<JournalEntry> {
        lock(&self.journal).clone()
    }

    pub fn clear_journal(&self) {
        lock(&self.journal).clear();
    }

    pub fn push_fault(&self, provider: Provider, fault: Fault) {
        lock(&self.faults).push(provider, fault);
    }

    pub fn pending_faults(&self) -> HashMap<Provider, Vec<Fault>> {
        lock(&self.faults).pending()
    }

    pub fn clear_faults(&self) {
        lock(&self.faults).clear();
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.deliveries).clone()
    }

    pub fn record_delivery(&self, delivery: Delivery) {
        lock(&self.deliveries).push(delivery);
    }

    pub fn clear_deliveries(&self) {
        lock(&self.deliveries).clear();
    }

    /// The knobs background Resend and Twilio lifecycles deliver with.
    pub fn callback_options(&self) -> CallbackOptions {
        lock(&self.callback_options).clone()
    }

    pub fn set_callback_options(&self, options: CallbackOptions) {
        *lock(&self.callback_options) = options;
    }

    pub fn set_chunk_delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.chunk_delay_ms.store(ms, Ordering::Relaxed);
    }

    pub fn chunk_delay(&self) -> Duration {
        Duration::from_millis(self.chunk_delay_ms.load(Ordering::Relaxed))
    }

    pub fn set_llm_usage(&self, report: bool) {
        self.llm_usage.store(report, Ordering::Relaxed);
    }

    pub fn llm_usage(&self) -> bool {
        self.llm_usage.load(Ordering::Relaxed)
    }

    /// Forgets every request, fault, delivery, callback knob and outbox item (Stripe objects are
    /// kept).
    pub fn reset(&self) {
        self.clear_journal();
        self.clear_faults();
        self.clear_deliveries();
        self.set_callback_options(CallbackOptions::default());
        *lock(&self.outbox) = Outbox::default();
    }

    // ----- the request pipeline

    /// Journals the request and applies the next fault scripted for `provider`. `Err` is the
    /// response to send instead of the normal one; `Ok` tells `finish` how to mangle the reply.
    pub async fn begin(
        &self,
        provider: Provider,
        req: &HttpRequest,
        body: &Bytes,
    ) -> Result<FaultAction, HttpResponse> {
        self.record(provider, req, body);
        let fault = lock(&self.faults).take(provider);
        let Some(fault) = fault else {
            return Ok(FaultAction::Respond);
        };
        if let Some(ms) = fault.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        match (fault.action, fault.status) {
            (FaultAction::Drop, _) => Err(dropped()),
            (FaultAction::Respond, Some(status)) => {
                let mut reply = fault_reply(provider, status, &fault);
                if let Some(seconds) = fault.retry_after {
                    reply = reply.header("retry-after", &seconds.to_string());
                }
                Err(self.finish(reply, FaultAction::Respond))
            }
            (action, _) => Ok(action),
        }
    }

    fn record(&self, provider: Provider, req: &HttpRequest, body: &Bytes) {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut journal = lock(&self.journal);
        let seq = journal.len() as u64 + 1;
        journal.push(JournalEntry {
            seq,
            provider,
            method: req.method().to_string(),
            path: req.path().to_owned(),
            query: req.query_string().to_owned(),
            headers,
            body: String::from_utf8_lossy(body).into_owned(),
            received_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        });
    }

    /// Renders a reply, mangled as the fault `action` says.
    pub fn finish(&self, reply: Reply, action: FaultAction) -> HttpResponse {
        let mut builder = HttpResponse::build(reply.status);
        for (k, v) in &reply.headers {
            builder.append_header((k.as_str(), v.as_str()));
        }
        match reply.body {
            Body::Json(value) => {
                builder.content_type("application/json");
                let bytes = serde_json::to_vec(&value).unwrap_or_default();
                let half = bytes.len() / 2;
                match action {
                    FaultAction::Respond | FaultAction::Drop => builder.body(bytes),
                    FaultAction::Truncate => builder.body(bytes[..half].to_vec()),
                    FaultAction::Malformed => builder.body(format!(
                        "{}<<malformed>>",
                        String::from_utf8_lossy(&bytes[..half])
                    )),
                    FaultAction::Disconnect | FaultAction::Stall => builder.streaming(
                        stream::iter([Ok(Bytes::from(bytes[..half].to_vec()))]).chain(tail(action)),
                    ),
                }
            }
            Body::Events(frames) => {
                builder
                    .content_type("text/event-stream; charset=utf-8")
                    .insert_header(("cache-control", "no-cache"));
                let frames = mangle_frames(frames, action);
                let delay = self.chunk_delay();
                let body = stream::iter(frames.into_iter().enumerate()).then(
                    move |(i, frame)| async move {
                        if i > 0 && !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        Ok::<_, io::Error>(Bytes::from(frame))
                    },
                );
                builder.streaming(body.chain(tail(action)))
            }
        }
    }
}

/// The provider's error body for a scripted status.
fn fault_reply(provider: Provider, status: u16, fault: &Fault) -> Reply {
    let code = fault.code.as_deref();
    let message = fault.message.as_deref();
    match provider {
        Provider::Stripe => stripe::fault_reply(status, code, message),
        Provider::Resend => resend::fault_reply(status, code, message),
        Provider::Twilio => twilio::fault_reply(status, code, message),
        _ => llm::fault_reply(provider, status, code, message),
    }
}

/// A response that closes the connection before anything is written.
fn dropped() -> HttpResponse {
    HttpResponse::Ok().streaming(stream::once(async {
        Err::<Bytes, io::Error>(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "dropped by fault",
        ))
    }))
}

/// What follows the frames that were sent: nothing, an abort, or silence forever.
fn tail(action: FaultAction) -> LocalBoxStream<'static, Result<Bytes, io::Error>> {
    match action {
        FaultAction::Disconnect => stream::once(async {
            // Let the frames already written reach the client before the connection drops.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "disconnected by fault",
            ))
        })
        .boxed_local(),
        FaultAction::Stall => stream::pending().boxed_local(),
        _ => stream::empty().boxed_local(),
    }
}

fn mangle_frames(mut frames: Vec<String>, action: FaultAction) -> Vec<String> {
    let half = (frames.len() / 2).max(1);
    match action {
        FaultAction::Truncate | FaultAction::Disconnect | FaultAction::Stall => {
            frames.truncate(half);
            frames
        }
        FaultAction::Malformed => {
            let i = 1.min(frames.len().saturating_sub(1));
            if let Some(frame) = frames.get_mut(i) {
                *frame = corrupt(frame);
            }
            frames
        }
        FaultAction::Respond | FaultAction::Drop => frames,
    }
}

/// Cuts the JSON of a frame's `data:` line in half, keeping the frame's framing.
fn corrupt(frame: &str) -> String {
    let sep = if frame.ends_with("\r\n\r\n") {
        "\r\n\r\n"
    } else {
        "\n\n"
    };
    let content = frame.trim_end_matches(['\r', '\n']);
    match content.rfind("data: ") {
        Some(at) => {
            let data = &content[at + 6..];
            let cut = data
                .char_indices()
                .nth(data.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            format!("{}{}{sep}", &content[..at + 6], &data[..cut])
        }
        None => format!("data: {{\"malformed\":{sep}"),
    }
}

/// A provider's answer before faults are applied.
pub struct Reply {
    pub status: StatusCode,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

pub enum Body {
    Json(Value),
    /// Complete server-sent-event frames, each with its own separator.
    Events(Vec<String>),
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::new(status, Body::Json(body))
    }

    pub fn events(frames: Vec<String>) -> Reply {
        Reply::new(200, Body::Events(frames))
    }

    pub fn new(status: u16, body: Body) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            headers: Vec::new(),
            body,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_keeps_framing_and_breaks_json() {
        assert_eq!(
            corrupt("event: x\ndata: {\"a\":1}\n\n"),
            "event: x\ndata: {\"a\n\n"
        );
        assert_eq!(corrupt("data: {\"a\":1}\r\n\r\n"), "data: {\"a\r\n\r\n");
    }

    #[test]
    fn truncation_keeps_the_first_half() {
        let frames: Vec<String> = (0..5).map(|i| format!("data: {i}\n\n")).collect();
        assert_eq!(
            mangle_frames(frames.clone(), FaultAction::Truncate).len(),
            2
        );
        assert_eq!(
            mangle_frames(frames, FaultAction::Malformed)[1],
            "data: \n\n"
        );
    }
}
