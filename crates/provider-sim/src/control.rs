//! The control API under `/_sim/...` (faults, journal, outbox, deliveries, Stripe events and
//! checkout completion, Resend events, Twilio status callbacks and incoming SMS, callback knobs)
//! and the human pages: `/` (settings) and `/outbox`.

use std::time::Duration;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::delivery::CallbackOptions;
use crate::faults::Fault;
use crate::html::{escape, page};
use crate::journal::Provider;
use crate::state::{Sim, lock};
use crate::stripe::{self, DeliveryOptions, EventSpec, Outcome};
use crate::{resend, twilio};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(index))
        .route("/outbox", web::get().to(outbox_page))
        .service(
            web::scope("/_sim")
                .route("/settings", web::get().to(settings_json))
                .route("/journal", web::get().to(journal))
                .route("/journal", web::delete().to(clear_journal))
                .route("/faults", web::get().to(faults))
                .route("/faults", web::delete().to(clear_faults))
                .route("/faults/{provider}", web::post().to(push_faults))
                .route("/outbox", web::get().to(outbox))
                .route("/outbox", web::delete().to(clear_outbox))
                .route("/deliveries", web::get().to(deliveries))
                .route("/deliveries", web::delete().to(clear_deliveries))
                .route("/stripe/events", web::post().to(stripe_events))
                .route(
                    "/stripe/checkout/{id}/{outcome}",
                    web::post().to(stripe_checkout),
                )
                .route(
                    "/stripe/subscriptions/{id}/renew/{outcome}",
                    web::post().to(stripe_renew),
                )
                .route("/stripe/objects/{id}", web::get().to(stripe_object))
                .route("/twilio/{sid}/status", web::post().to(twilio_status))
                .route("/twilio/inbound", web::post().to(twilio_inbound))
                .route("/resend/{email_id}/events", web::post().to(resend_event))
                .route("/callbacks", web::get().to(callback_options))
                .route("/callbacks", web::post().to(set_callback_options))
                .route("/llm/chunk-delay", web::post().to(chunk_delay))
                .route("/llm/usage", web::post().to(llm_usage))
                .route("/reset", web::post().to(reset)),
        );
}

/// The settings that point Keel at the simulator, in print order.
pub fn settings(sim: &Sim) -> Vec<(String, String)> {
    let base = &sim.base_url;
    let c = &sim.config;
    let ai_key = c
        .ai_api_key
        .clone()
        .unwrap_or_else(|| "sim-ai-key".to_owned());
    let mut out: Vec<(String, String)> = [
        ("STRIPE_API_BASE", base.clone()),
        ("STRIPE_SECRET_KEY", c.stripe_secret_key.clone()),
        ("STRIPE_WEBHOOK_SECRET", c.stripe_webhook_secret.clone()),
        ("RESEND_API_BASE", base.clone()),
        ("RESEND_API_KEY", c.resend_api_key.clone()),
        ("RESEND_FROM_EMAIL", "Keel <noreply@example.com>".to_owned()),
        ("RESEND_WEBHOOK_SECRET", c.resend_webhook_secret.clone()),
        ("TWILIO_API_BASE", base.clone()),
        ("TWILIO_ACCOUNT_SID", c.twilio_account_sid.clone()),
        ("TWILIO_AUTH_TOKEN", c.twilio_auth_token.clone()),
        ("TWILIO_PHONE_NUMBER", "+15005550006".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    // Each AI provider's base URL (version prefix included) and a key the simulator accepts.
    for (name, path) in [
        ("OPENAI", "openai/v1"),
        ("ANTHROPIC", "anthropic/v1"),
        ("GEMINI", "gemini/v1beta"),
        ("GOOGLE", "gemini/v1beta"),
        ("GROQ", "groq/openai/v1"),
        ("MISTRAL", "mistral/v1"),
        ("COHERE", "cohere/v2"),
    ] {
        out.push((format!("{name}_BASE_URL"), format!("{base}/{path}")));
        out.push((format!("{name}_API_KEY"), ai_key.clone()));
    }
    out.push(("OLLAMA_BASE_URL".to_owned(), format!("{base}/ollama/v1")));
    out
}

/// Anything no provider serves.
pub async fn not_routed(req: HttpRequest) -> HttpResponse {
    not_found(&format!(
        "no simulated API at {} {}",
        req.method(),
        req.path()
    ))
}

fn bad_request(message: &str) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": message }))
}

fn not_found(message: &str) -> HttpResponse {
    HttpResponse::NotFound().json(json!({ "error": message }))
}

/// A JSON body, or `{}` when the body is empty.
fn body_json(body: &Bytes) -> Result<Value, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))
}

async fn settings_json(sim: web::Data<Sim>) -> HttpResponse {
    let map: serde_json::Map<String, Value> = settings(&sim)
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    HttpResponse::Ok().json(map)
}

#[derive(Deserialize)]
struct ProviderQuery {
    provider: Option<String>,
}

async fn journal(sim: web::Data<Sim>, query: web::Query<ProviderQuery>) -> HttpResponse {
    let filter = match query.provider.as_deref() {
        None => None,
        Some(name) => match Provider::from_name(name) {
            Some(p) => Some(p),
            None => return bad_request(&format!("unknown provider: {name}")),
        },
    };
    let entries: Vec<_> = sim
        .journal()
        .into_iter()
        .filter(|e| filter.is_none_or(|p| e.provider == p))
        .collect();
    HttpResponse::Ok().json(entries)
}

async fn clear_journal(sim: web::Data<Sim>) -> HttpResponse {
    sim.clear_journal();
    HttpResponse::NoContent().finish()
}

async fn faults(sim: web::Data<Sim>) -> HttpResponse {
    HttpResponse::Ok().json(sim.pending_faults())
}

async fn clear_faults(sim: web::Data<Sim>) -> HttpResponse {
    sim.clear_faults();
    HttpResponse::NoContent().finish()
}

/// Body: one fault object or a list of them.
async fn push_faults(sim: web::Data<Sim>, path: web::Path<String>, body: Bytes) -> HttpResponse {
    let Some(provider) = Provider::from_name(&path) else {
        return not_found(&format!("unknown provider: {path}"));
    };
    let value = match body_json(&body) {
        Ok(v) => v,
        Err(message) => return bad_request(&message),
    };
    let list = if value.is_array() {
        value
    } else {
        Value::Array(vec![value])
    };
    match serde_json::from_value::<Vec<Fault>>(list) {
        Ok(faults) => {
            for fault in faults {
                sim.push_fault(provider, fault);
            }
            HttpResponse::Ok().json(
                sim.pending_faults()
                    .get(&provider)
                    .cloned()
                    .unwrap_or_default(),
            )
        }
        Err(e) => bad_request(&format!("invalid fault: {e}")),
    }
}

async fn outbox(sim: web::Data<Sim>) -> HttpResponse {
    HttpResponse::Ok().json(lock(&sim.outbox).clone())
}

async fn clear_outbox(sim: web::Data<Sim>) -> HttpResponse {
    *lock(&sim.outbox) = crate::outbox::Outbox::default();
    HttpResponse::NoContent().finish()
}

async fn deliveries(sim: web::Data<Sim>) -> HttpResponse {
    HttpResponse::Ok().json(sim.deliveries())
}

async fn clear_deliveries(sim: web::Data<Sim>) -> HttpResponse {
    sim.clear_deliveries();
    HttpResponse::NoContent().finish()
}

/// Body: `{"type": ..., "object": {...}}` or `{"events": [{"type": ...}, ...]}`, plus any of the
/// delivery knobs (`wrong_secret`, `stale`, `two_v1`, `no_signature`, `tamper`, `duplicate`,
/// `out_of_order`, `url`).
async fn stripe_events(sim: web::Data<Sim>, body: Bytes) -> HttpResponse {
    let value = match body_json(&body) {
        Ok(v) => v,
        Err(message) => return bad_request(&message),
    };
    let specs = match value.get("events") {
        Some(list) => serde_json::from_value::<Vec<EventSpec>>(list.clone()),
        None => serde_json::from_value::<EventSpec>(value.clone()).map(|s| vec![s]),
    };
    let specs = match specs {
        Ok(specs) if !specs.is_empty() => specs,
        Ok(_) => return bad_request("no events given"),
        Err(e) => return bad_request(&format!("invalid event: {e}")),
    };
    let options: DeliveryOptions = match serde_json::from_value(value) {
        Ok(options) => options,
        Err(e) => return bad_request(&format!("invalid options: {e}")),
    };
    let events: Vec<Value> = specs.iter().map(|s| stripe::build_event(&sim, s)).collect();
    let deliveries = stripe::deliver(&sim, events.clone(), &options).await;
    HttpResponse::Ok().json(json!({"events": events, "deliveries": deliveries}))
}

#[derive(Deserialize, Default)]
struct CheckoutBody {
    email: Option<String>,
    #[serde(flatten)]
    options: DeliveryOptions,
}

async fn stripe_checkout(
    sim: web::Data<Sim>,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> HttpResponse {
    let (id, outcome) = path.into_inner();
    let outcome = match outcome.as_str() {
        "pay" => Outcome::Pay,
        "fail" => Outcome::Fail,
        other => return not_found(&format!("unknown outcome: {other} (pay or fail)")),
    };
    let request: CheckoutBody = match body_json(&body).map(serde_json::from_value) {
        Ok(Ok(request)) => request,
        Ok(Err(e)) => return bad_request(&format!("invalid body: {e}")),
        Err(message) => return bad_request(&message),
    };
    match stripe::complete_checkout(
        &sim,
        &id,
        outcome,
        request.email.as_deref(),
        &request.options,
    )
    .await
    {
        Ok(deliveries) => HttpResponse::Ok().json(json!({ "deliveries": deliveries })),
        Err(message) => bad_request(&message),
    }
}

/// `POST /_sim/stripe/subscriptions/{id}/renew/{pay|fail}`: the subscription's period ends
/// (body: optional delivery options); answers the deliveries.
async fn stripe_renew(
    sim: web::Data<Sim>,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> HttpResponse {
    let (id, outcome) = path.into_inner();
    let outcome = match outcome.as_str() {
        "pay" => Outcome::Pay,
        "fail" => Outcome::Fail,
        other => return not_found(&format!("unknown outcome: {other} (pay or fail)")),
    };
    let options: DeliveryOptions = match body_json(&body).map(serde_json::from_value) {
        Ok(Ok(options)) => options,
        Ok(Err(e)) => return bad_request(&format!("invalid body: {e}")),
        Err(message) => return bad_request(&message),
    };
    match stripe::renew_subscription(&sim, &id, outcome, &options).await {
        Ok(deliveries) => HttpResponse::Ok().json(json!({ "deliveries": deliveries })),
        Err(message) => bad_request(&message),
    }
}

async fn stripe_object(sim: web::Data<Sim>, path: web::Path<String>) -> HttpResponse {
    match lock(&sim.stripe).get(&path) {
        Some(object) => HttpResponse::Ok().json(object),
        None => not_found(&format!("no Stripe object {path}")),
    }
}

/// A JSON body (or `{}`) read as `T`, or why not.
fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_value(body_json(body)?).map_err(|e| format!("invalid body: {e}"))
}

#[derive(Deserialize)]
struct StatusBody {
    status: String,
    #[serde(flatten)]
    options: CallbackOptions,
}

/// Body: `{"status": "delivered"}` plus any callback knob.
async fn twilio_status(sim: web::Data<Sim>, path: web::Path<String>, body: Bytes) -> HttpResponse {
    let request: StatusBody = match parse(&body) {
        Ok(request) => request,
        Err(message) => return bad_request(&message),
    };
    match twilio::status_callback(&sim, &path, &request.status, &request.options).await {
        Ok(deliveries) => HttpResponse::Ok().json(json!({ "deliveries": deliveries })),
        Err(message) => bad_request(&message),
    }
}

#[derive(Deserialize)]
struct InboundBody {
    from: String,
    to: Option<String>,
    body: String,
    #[serde(flatten)]
    options: CallbackOptions,
}

/// Body: `{"from": "+15005550010", "body": "STOP"}` (`to` optional) plus any callback knob.
async fn twilio_inbound(sim: web::Data<Sim>, body: Bytes) -> HttpResponse {
    let request: InboundBody = match parse(&body) {
        Ok(request) => request,
        Err(message) => return bad_request(&message),
    };
    match twilio::inbound_sms(
        &sim,
        &request.from,
        request.to.as_deref(),
        &request.body,
        &request.options,
    )
    .await
    {
        Ok(deliveries) => HttpResponse::Ok().json(json!({ "deliveries": deliveries })),
        Err(message) => bad_request(&message),
    }
}

#[derive(Deserialize)]
struct EventBody {
    #[serde(rename = "type")]
    kind: String,
    #[serde(flatten)]
    options: CallbackOptions,
}

/// Body: `{"type": "email.bounced"}` plus any callback knob.
async fn resend_event(sim: web::Data<Sim>, path: web::Path<String>, body: Bytes) -> HttpResponse {
    let request: EventBody = match parse(&body) {
        Ok(request) => request,
        Err(message) => return bad_request(&message),
    };
    match resend::event_for(&sim, &path, &request.kind, &request.options).await {
        Ok(deliveries) => HttpResponse::Ok().json(json!({ "deliveries": deliveries })),
        Err(message) => bad_request(&message),
    }
}

async fn callback_options(sim: web::Data<Sim>) -> HttpResponse {
    HttpResponse::Ok().json(sim.callback_options())
}

/// Body: the knobs background lifecycles use from now on (`{}` restores normal deliveries).
async fn set_callback_options(sim: web::Data<Sim>, body: Bytes) -> HttpResponse {
    match parse::<CallbackOptions>(&body) {
        Ok(options) => {
            sim.set_callback_options(options.clone());
            HttpResponse::Ok().json(options)
        }
        Err(message) => bad_request(&message),
    }
}

#[derive(Deserialize)]
struct DelayBody {
    ms: u64,
}

async fn chunk_delay(sim: web::Data<Sim>, body: web::Json<DelayBody>) -> HttpResponse {
    sim.set_chunk_delay(Duration::from_millis(body.ms));
    HttpResponse::Ok().json(json!({ "ms": body.ms }))
}

#[derive(Deserialize)]
struct UsageBody {
    report: bool,
}

async fn llm_usage(sim: web::Data<Sim>, body: web::Json<UsageBody>) -> HttpResponse {
    sim.set_llm_usage(body.report);
    HttpResponse::Ok().json(json!({ "report": body.report }))
}

async fn reset(sim: web::Data<Sim>) -> HttpResponse {
    sim.reset();
    HttpResponse::NoContent().finish()
}

async fn index(sim: web::Data<Sim>, req: HttpRequest) -> HttpResponse {
    let lines: String = settings(&sim)
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let host = req.connection_info().host().to_owned();
    let body = format!(
        "<h1>Provider simulator</h1><p>Stripe, Resend, Twilio and LLM APIs on <code>{}</code>. \
         See the <a href=\"/outbox\">outbox</a>, the <a href=\"/_sim/journal\">journal</a> and the \
         <a href=\"/_sim/deliveries\">webhook deliveries</a>.</p><h2>Settings for Keel</h2><pre>{}</pre>",
        escape(&host),
        escape(&lines)
    );
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(page("Provider simulator", &body))
}

fn cell(text: &str) -> String {
    format!("<td>{}</td>", escape(text))
}

async fn outbox_page(sim: web::Data<Sim>) -> HttpResponse {
    let outbox = lock(&sim.outbox).clone();
    let emails: String = outbox
        .emails
        .iter()
        .rev()
        .map(|e| {
            let content = e
                .text
                .clone()
                .or_else(|| e.html.clone())
                .unwrap_or_default();
            format!(
                "<tr>{}{}{}{}<td><details><summary>{}</summary><pre>{}</pre></details></td></tr>",
                cell(&e.created_at),
                cell(&e.from),
                cell(&e.to.join(", ")),
                cell(&e.subject),
                if e.html.is_some() { "html" } else { "text" },
                escape(&content)
            )
        })
        .collect();
    let sms: String = outbox
        .sms
        .iter()
        .rev()
        .map(|m| {
            let from = m
                .from
                .clone()
                .or_else(|| m.messaging_service_sid.clone())
                .unwrap_or_default();
            format!(
                "<tr>{}{}{}<td><pre>{}</pre></td>{}</tr>",
                cell(&m.date_created),
                cell(&from),
                cell(&m.to),
                escape(&m.body),
                cell(&m.status)
            )
        })
        .collect();
    let calls: String = outbox
        .calls
        .iter()
        .rev()
        .map(|c| {
            let what = c
                .url
                .clone()
                .or_else(|| c.twiml.clone())
                .or_else(|| c.application_sid.clone())
                .unwrap_or_default();
            format!(
                "<tr>{}{}{}<td><pre>{}</pre></td>{}</tr>",
                cell(&c.date_created),
                cell(&c.from),
                cell(&c.to),
                escape(&what),
                cell(&c.status)
            )
        })
        .collect();
    let body = format!(
        "<h1>Outbox</h1><p><a href=\"/\">Settings</a></p>\
         <h2>Emails ({})</h2><table><tr><th>Sent</th><th>From</th><th>To</th><th>Subject</th><th>Content</th></tr>{emails}</table>\
         <h2>SMS ({})</h2><table><tr><th>Sent</th><th>From</th><th>To</th><th>Body</th><th>Status</th></tr>{sms}</table>\
         <h2>Calls ({})</h2><table><tr><th>Placed</th><th>From</th><th>To</th><th>TwiML</th><th>Status</th></tr>{calls}</table>",
        outbox.emails.len(),
        outbox.sms.len(),
        outbox.calls.len()
    );
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(page("Outbox", &body))
}
