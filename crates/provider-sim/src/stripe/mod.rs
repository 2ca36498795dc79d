//! Stripe: `/v1/...` with form bodies (bracketed keys), bearer `sk_` keys, `Idempotency-Key`
//! replay and Stripe-shaped errors; the hosted checkout page, billing portal and invoice pages;
//! subscription renewals; signed webhook events.

mod api;
mod checkout;
mod events;
mod objects;
mod portal;
mod renewal;

use std::collections::HashMap;

use actix_web::http::Method;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use base64::Engine;
use serde_json::{Value, json};

pub use checkout::{Outcome, complete_checkout};
pub use events::{DeliveryOptions, EVENT_TYPES, EventSpec, build_event, deliver};
pub use objects::Price;
pub use renewal::renew_subscription;

use crate::form;
use crate::ids;
use crate::journal::Provider;
use crate::state::{Reply, Sim, lock};
use objects::API_VERSION;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/{tail:.*}", web::route().to(dispatch))
        .route("/checkout/{id}", web::get().to(checkout::page))
        .route("/checkout/{id}/{outcome}", web::post().to(checkout::submit))
        .route("/billing_portal/{id}", web::get().to(portal::page))
        .route(
            "/billing_portal/{id}/cancel/{subscription}",
            web::post().to(portal::cancel),
        )
        .route("/invoice/{id}", web::get().to(portal::invoice_page))
        .route("/invoice/{id}/pdf", web::get().to(portal::invoice_pdf));
}

/// Stripe's objects by id, checkout line items and stored idempotent responses.
pub struct State {
    objects: HashMap<String, Value>,
    prices: Vec<Price>,
    sessions: HashMap<String, SessionExtra>,
    idempotency: HashMap<String, Stored>,
}

/// What a checkout session needs at completion beyond its public fields.
#[derive(Clone)]
struct SessionExtra {
    items: Vec<(Price, i64)>,
    subscription_metadata: Value,
    payment_intent_metadata: Value,
}

struct Stored {
    fingerprint: String,
    status: u16,
    body: Value,
}

impl State {
    pub fn new(prices: &[Price]) -> State {
        let mut state = State {
            objects: HashMap::new(),
            prices: prices.to_vec(),
            sessions: HashMap::new(),
            idempotency: HashMap::new(),
        };
        for price in prices {
            state.insert(price.to_json());
        }
        state.insert(objects::portal_configuration(
            portal::DEFAULT_CONFIGURATION,
            crate::state::now(),
        ));
        state
    }

    pub fn get(&self, id: &str) -> Option<&Value> {
        self.objects.get(id)
    }

    /// The object `id` if it is of type `kind` (`"charge"`, `"checkout.session"`, ...).
    pub fn get_kind(&self, id: &str, kind: &str) -> Option<&Value> {
        self.objects.get(id).filter(|o| o["object"] == kind)
    }

    pub fn insert(&mut self, object: Value) {
        if let Some(id) = object["id"].as_str() {
            self.objects.insert(id.to_owned(), object);
        }
    }

    /// The next invoice number of `customer`.
    fn next_invoice_number(&self, customer: &str) -> String {
        let earlier = self
            .objects
            .values()
            .filter(|o| o["object"] == "invoice" && o["customer"] == customer)
            .count();
        objects::invoice_number(customer, earlier)
    }

    /// The objects of type `kind` whose `customer` is `customer`, newest first.
    fn of_customer(&self, kind: &str, customer: &str) -> Vec<&Value> {
        let mut found: Vec<&Value> = self
            .objects
            .values()
            .filter(|o| o["object"] == kind && o["customer"] == customer)
            .collect();
        found.sort_by_key(|o| {
            (
                std::cmp::Reverse(o["created"].as_i64()),
                o["id"].as_str().map(str::to_owned),
            )
        });
        found
    }

    fn first_recurring_price(&self) -> Price {
        self.prices
            .iter()
            .find(|p| p.recurring.is_some())
            .cloned()
            .unwrap_or_else(|| Price::recurring("price_monthly", 1500, "Monthly plan", "month"))
    }
}

/// A Stripe error response.
pub struct ApiError {
    status: u16,
    body: Value,
}

fn error(
    status: u16,
    kind: &str,
    code: Option<&str>,
    message: impl Into<String>,
    param: Option<&str>,
) -> ApiError {
    let mut error = json!({
        "type": kind,
        "message": message.into(),
        "request_log_url": format!("https://dashboard.stripe.com/test/logs/{}", ids::stripe("req_")),
    });
    if let Some(code) = code {
        error["code"] = json!(code);
        error["doc_url"] = json!(format!(
            "https://stripe.com/docs/error-codes/{}",
            code.replace('_', "-")
        ));
    }
    if let Some(param) = param {
        error["param"] = json!(param);
    }
    ApiError {
        status,
        body: json!({ "error": error }),
    }
}

fn invalid(code: &str, message: impl Into<String>, param: Option<&str>) -> ApiError {
    error(400, "invalid_request_error", Some(code), message, param)
}

fn missing_param(param: &str) -> ApiError {
    invalid(
        "parameter_missing",
        format!("Missing required param: {param}."),
        Some(param),
    )
}

fn no_such(kind: &str, id: &str, param: &str) -> ApiError {
    error(
        404,
        "invalid_request_error",
        Some("resource_missing"),
        format!("No such {kind}: '{id}'"),
        Some(param),
    )
}

/// The 401 body: no `code`, the key masked.
fn bad_key(key: &str) -> ApiError {
    let message = if key.is_empty() {
        "You did not provide an API key. You need to provide your API key in the Authorization header, \
         using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication \
         for details, or we can help at https://support.stripe.com/."
            .to_owned()
    } else {
        format!("Invalid API Key provided: {}", mask(key))
    };
    ApiError {
        status: 401,
        body: json!({"error": {"message": message, "type": "invalid_request_error"}}),
    }
}

fn mask(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let prefix = ["sk_test_", "sk_live_", "rk_test_", "rk_live_"]
        .iter()
        .find(|p| key.starts_with(*p))
        .map_or(0, |p| p.len());
    let tail = chars.len().saturating_sub(prefix).min(4);
    let stars = chars.len() - prefix - tail;
    let head: String = chars[..prefix].iter().collect();
    let end: String = chars[chars.len() - tail..].iter().collect();
    format!("{head}{}{end}", "*".repeat(stars.max(4)))
}

/// The error body of a scripted fault.
pub fn fault_reply(status: u16, code: Option<&str>, message: Option<&str>) -> Reply {
    let err = match status {
        401 => bad_key(message.unwrap_or("sk_test_****")),
        402 => {
            let code = code.unwrap_or("card_declined");
            let mut e = error(402, "card_error", Some(code), message.unwrap_or("Your card was declined."), None);
            if code == "card_declined" {
                e.body["error"]["decline_code"] = json!("generic_decline");
            }
            e
        }
        404 => error(404, "invalid_request_error", Some(code.unwrap_or("resource_missing")), message.unwrap_or("No such object: 'unknown'"), Some("id")),
        409 => error(
            409,
            "idempotency_error",
            Some(code.unwrap_or("idempotency_key_in_use")),
            message.unwrap_or("There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through). Please try again later."),
            None,
        ),
        429 => error(
            429,
            "invalid_request_error",
            Some(code.unwrap_or("rate_limit")),
            message.unwrap_or("Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits."),
            None,
        ),
        s if s >= 500 => error(s, "api_error", code, message.unwrap_or("An unknown error occurred while processing your request."), None),
        s => error(s, "invalid_request_error", code, message.unwrap_or("Invalid request."), None),
    };
    let mut reply = Reply::json(status, err.body)
        .header("request-id", &ids::stripe("req_"))
        .header("stripe-version", API_VERSION);
    if status == 409 || status >= 500 {
        reply = reply.header("stripe-should-retry", "true");
    }
    reply
}

async fn dispatch(sim: web::Data<Sim>, req: HttpRequest, body: Bytes) -> HttpResponse {
    let action = match sim.begin(Provider::Stripe, &req, &body).await {
        Ok(action) => action,
        Err(response) => return response,
    };
    let (status, value, replayed, events) = respond(&sim, &req, &body);
    if sim.config.stripe_auto_events && !events.is_empty() {
        let sim = sim.clone().into_inner();
        tokio::spawn(async move {
            tokio::time::sleep(sim.config.callback_delay).await;
            deliver(&sim, events, &DeliveryOptions::default()).await;
        });
    }
    let mut reply = Reply::json(status, value)
        .header("request-id", &ids::stripe("req_"))
        .header("stripe-version", API_VERSION);
    if replayed {
        reply = reply.header("idempotent-replayed", "true");
    }
    sim.finish(reply, action)
}

/// Authenticates, replays or runs the request: (status, body, replayed, events it caused).
fn respond(sim: &Sim, req: &HttpRequest, body: &[u8]) -> (u16, Value, bool, Vec<Value>) {
    if let Err(e) = authenticate(sim, req) {
        return (e.status, e.body, false, Vec::new());
    }
    let post = req.method() == Method::POST;
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|_| post)
        .map(str::to_owned);
    let fingerprint = format!(
        "{} {} {}",
        req.method(),
        req.path(),
        String::from_utf8_lossy(body)
    );
    let mut st = lock(&sim.stripe);
    if let Some(key) = &key
        && let Some(stored) = st.idempotency.get(key)
    {
        if stored.fingerprint == fingerprint {
            return (stored.status, stored.body.clone(), true, Vec::new());
        }
        let e = error(
            400,
            "idempotency_error",
            None,
            format!(
                "Keys for idempotent requests can only be used with the same parameters they were first used with. \
                 Try using a key other than '{key}' if you meant to execute a different request."
            ),
            None,
        );
        return (e.status, e.body, false, Vec::new());
    }
    let params = form::nested(if post {
        body
    } else {
        req.query_string().as_bytes()
    });
    let (status, value, events) =
        match api::route(&mut st, &sim.base_url, req.method(), req.path(), &params) {
            Ok((value, events)) => (200, value, events),
            Err(e) => (e.status, e.body, Vec::new()),
        };
    if let Some(key) = key {
        st.idempotency.insert(
            key,
            Stored {
                fingerprint,
                status,
                body: value.clone(),
            },
        );
    }
    (status, value, false, events)
}

fn authenticate(sim: &Sim, req: &HttpRequest) -> Result<(), ApiError> {
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let key = if let Some(bearer) = header.strip_prefix("Bearer ") {
        bearer.trim().to_owned()
    } else if let Some(basic) = header.strip_prefix("Basic ") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(basic.trim())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&decoded).into_owned();
        text.split(':').next().unwrap_or("").to_owned()
    } else {
        String::new()
    };
    if key == sim.config.stripe_secret_key {
        Ok(())
    } else {
        Err(bad_key(&key))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_masked_like_stripe() {
        assert_eq!(super::mask("sk_test_abcdefgh1234"), "sk_test_********1234");
        assert_eq!(super::mask("x"), "****x");
    }

    #[test]
    fn money_is_formatted() {
        assert_eq!(super::api::money(2050, "usd"), "$20.50");
        assert_eq!(super::api::money(700, "eur"), "7.00 EUR");
    }
}
