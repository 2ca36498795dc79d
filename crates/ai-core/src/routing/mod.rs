//! The chain of providers a reply is asked from: `AI_PROVIDER`, then `AI_FALLBACK_PROVIDERS` in
//! order. A provider that fails before its first chunk (no answer, a timeout, an error status
//! other than a refusal of the request itself, an unreadable answer) passes the question to the
//! next one; once a chunk has been passed on, a failure is the stream's and nobody else is asked.
//! Each provider has a circuit breaker ([`circuit`]) that skips it for a while after repeated
//! failures.

pub mod circuit;

use std::sync::Arc;
use std::time::Instant;

use futures_util::{StreamExt, stream};

use crate::config::{AiConfig, ProviderSpec};
use crate::error::AiError;
use crate::providers::{
    self, ChatModel, ChatRequest, ChatStream, Completion, Endpoint, ProviderError, StreamItem,
};
use circuit::{Circuit, CircuitView, Permit};

/// One provider of the chain, with its model.
pub struct Route {
    pub provider: &'static ProviderSpec,
    pub model: String,
    /// Why it cannot be asked (its key is missing).
    pub unusable: Option<String>,
    client: Arc<dyn ChatModel>,
    circuit: Circuit,
}

/// A reply and who gave it.
pub struct Answered<T> {
    pub value: T,
    pub provider: &'static str,
    pub model: String,
}

/// What the health answer shows of one provider of the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteHealth {
    pub provider: &'static str,
    pub model: String,
    /// Why it cannot be asked, when it cannot.
    pub error: Option<String>,
    pub circuit: CircuitView,
}

/// What a provider was asked for.
enum Got {
    Whole(Completion),
    Stream(ChatStream),
}

pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// The chain of `config` over the outbound HTTP client, each call counted in the provider-call
    /// metric under its provider.
    pub fn new(config: &AiConfig, http: &kernel::http_client::HttpClient) -> Self {
        let routes = config
            .chain()
            .into_iter()
            .map(|(spec, model)| {
                let client = providers::client(
                    http.clone(),
                    Endpoint {
                        dialect: spec.dialect,
                        base_url: config.base_url(spec),
                        api_key: config.api_keys.get(spec.name).cloned(),
                        timeout: config.timeout,
                    },
                );
                Route {
                    provider: spec,
                    model,
                    unusable: config.missing_key(spec),
                    client: providers::metered(spec.name, client),
                    circuit: Circuit::new(config.circuit_failures, config.circuit_cooldown),
                }
            })
            .collect();
        Router { routes }
    }

    /// The whole reply from the first provider of the chain that gives one.
    pub async fn complete(&self, request: &ChatRequest) -> Result<Answered<Completion>, AiError> {
        let (got, route) = self.ask(request, false).await?;
        match got {
            Got::Whole(completion) => Ok(Answered {
                value: completion,
                provider: route.provider.name,
                model: route.model.clone(),
            }),
            Got::Stream(_) => Err(AiError::Provider("a stream came for a whole reply".into())),
        }
    }

    /// A stream from the first provider of the chain that sends its first chunk.
    pub async fn stream(&self, request: &ChatRequest) -> Result<Answered<ChatStream>, AiError> {
        let (got, route) = self.ask(request, true).await?;
        match got {
            Got::Stream(stream) => Ok(Answered {
                value: stream,
                provider: route.provider.name,
                model: route.model.clone(),
            }),
            Got::Whole(_) => Err(AiError::Provider("a whole reply came for a stream".into())),
        }
    }

    pub fn health(&self) -> Vec<RouteHealth> {
        self.routes
            .iter()
            .map(|r| RouteHealth {
                provider: r.provider.name,
                model: r.model.clone(),
                error: r.unusable.clone(),
                circuit: r.circuit.view(),
            })
            .collect()
    }

    async fn ask(&self, request: &ChatRequest, streaming: bool) -> Result<(Got, &Route), AiError> {
        // What happened to each provider passed over, for the error when none answers.
        let mut notes: Vec<String> = Vec::new();
        let mut tried = 0;
        let mut last_failure = String::new();
        let mut soonest: Option<Instant> = None;
        for (i, route) in self.routes.iter().enumerate() {
            let name = route.provider.name;
            if let Some(why) = &route.unusable {
                notes.push(format!("{name}: skipped, {why}"));
                continue;
            }
            let permit = match route.circuit.acquire() {
                Ok(permit) => permit,
                Err(until) => {
                    notes.push(format!(
                        "{name}: skipped after repeated failures (circuit open, retry in {} s)",
                        seconds_until(until)
                    ));
                    soonest = Some(soonest.map_or(until, |s| s.min(until)));
                    continue;
                }
            };
            tried += 1;
            let request = ChatRequest {
                model: route.model.clone(),
                ..request.clone()
            };
            let result = if streaming {
                first_chunk(route, &request).await.map(Got::Stream)
            } else {
                route.client.complete(&request).await.map(Got::Whole)
            };
            match result {
                Ok(got) => {
                    let got = match got {
                        Got::Whole(completion) => {
                            permit.succeed();
                            Got::Whole(completion)
                        }
                        Got::Stream(stream) => Got::Stream(settled_at_end(stream, permit)),
                    };
                    if i > 0 {
                        tracing::warn!(
                            provider = name,
                            model = %route.model,
                            failed = %notes.join("; "),
                            "an AI reply came from a fallback provider"
                        );
                    }
                    return Ok((got, route));
                }
                Err(e) => {
                    notes.push(format!("{name}: {}", e.message));
                    last_failure = e.message.clone();
                    if !e.falls_through() {
                        // The provider is up and refused the question: the next would too.
                        permit.succeed();
                        break;
                    }
                    permit.fail(&e.message);
                }
            }
        }
        if tried == 0 {
            let retry_after = soonest.map_or(1, seconds_until);
            return Err(AiError::NoProvider {
                detail: format!("no AI provider can be asked now: {}", notes.join("; ")),
                retry_after,
            });
        }
        Err(AiError::Provider(if notes.len() == 1 {
            last_failure
        } else {
            notes.join("; ")
        }))
    }
}

/// Whole seconds until `until`, rounded up, at least 1.
fn seconds_until(until: Instant) -> u64 {
    let left = until.saturating_duration_since(Instant::now());
    (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1)
}

/// Opens `route`'s stream and waits for its first item: an error before it is the provider's
/// failure (the caller may ask the next); after it, the stream is the caller's.
async fn first_chunk(route: &Route, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
    let mut opened = route.client.stream(request).await?;
    let first = match opened.next().await {
        Some(Ok(item)) => item,
        Some(Err(e)) => return Err(e),
        None => {
            return Err(ProviderError::new(
                "the stream ended before the provider's end marker",
            ));
        }
    };
    Ok(Box::pin(
        stream::once(async move { Ok(first) }).chain(opened),
    ))
}

/// `stream` settling `permit` when it ends: a success at its `Final`, a failure at its error (a
/// stream that breaks off after its first chunk counts against its provider, though nobody else
/// is asked). A stream dropped before (its client left) tells nothing of the provider.
fn settled_at_end(stream: ChatStream, permit: Permit) -> ChatStream {
    let mut permit = Some(permit);
    Box::pin(stream.inspect(move |item| match item {
        Ok(StreamItem::Final(_)) => {
            if let Some(permit) = permit.take() {
                permit.succeed();
            }
        }
        Err(e) => {
            if let Some(permit) = permit.take() {
                permit.fail(&e.message);
            }
        }
        Ok(StreamItem::Delta(_)) => {}
    }))
}
