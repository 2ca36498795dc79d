//! The simulator over real HTTP: every provider's happy path and error shapes, webhook delivery
//! to a receiver on port 0 that verifies signatures independently, faults and the journal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use provider_sim::{
    DeliveryOptions, EVENT_TYPES, EventSpec, Fault, FaultAction, Outcome, Provider, ProviderSim,
    SimConfig, SimHandle, signing,
};
use serde_json::{Value, json};

const STRIPE_FORM: &str = "application/x-www-form-urlencoded";

fn start_with(config: SimConfig) -> SimHandle {
    ProviderSim::start(config).unwrap()
}

fn start() -> SimHandle {
    start_with(SimConfig::default())
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

// ----- a webhook receiver on port 0 that checks signatures itself

#[derive(Clone, Debug)]
struct Hit {
    url: String,
    headers: HashMap<String, String>,
    body: String,
    status: u16,
}

type Check = fn(&str, &HashMap<String, String>, &str) -> u16;

struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    handle: ServerHandle,
}

impl Receiver {
    fn start(check: Check) -> Receiver {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let shared = hits.clone();
        let server = HttpServer::new(move || {
            let hits = shared.clone();
            App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
                let hits = hits.clone();
                async move {
                    let url = format!("http://{}{}", req.connection_info().host(), req.uri());
                    let headers = req
                        .headers()
                        .iter()
                        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                        .collect();
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let status = check(&url, &headers, &body);
                    hits.lock().unwrap().push(Hit {
                        url,
                        headers,
                        body,
                        status,
                    });
                    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap())
                        .json(json!({"received": true}))
                }
            }))
        })
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook?source=sim"),
            hits,
            handle,
        }
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        tokio::spawn(async move { handle.stop(false).await });
    }
}

/// Verifies `Stripe-Signature` as a careful receiver does: every v1, the raw body, 300 s tolerance.
fn stripe_check(_url: &str, headers: &HashMap<String, String>, body: &str) -> u16 {
    let Some(header) = headers.get("stripe-signature") else {
        return 400;
    };
    let mut t = None;
    let mut v1 = Vec::new();
    for item in header.split(',') {
        match item.split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1.push(value.to_owned()),
            _ => {}
        }
    }
    let Some(t) = t else { return 400 };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    if t < now - 300 {
        return 400;
    }
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(SimConfig::default().stripe_webhook_secret.as_bytes())
            .unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    let expected = hex::encode(mac.finalize().into_bytes());
    if v1.contains(&expected) { 200 } else { 400 }
}

/// Verifies `X-Twilio-Signature` over the full URL and the sorted form parameters.
fn twilio_check(url: &str, headers: &HashMap<String, String>, body: &str) -> u16 {
    let mut params: Vec<(String, String)> = serde_urlencoded::from_str(body).unwrap();
    params.sort();
    let mut mac =
        Hmac::<sha1::Sha1>::new_from_slice(SimConfig::default().twilio_auth_token.as_bytes())
            .unwrap();
    mac.update(url.as_bytes());
    for (k, v) in &params {
        mac.update(k.as_bytes());
        mac.update(v.as_bytes());
    }
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    if headers.get("x-twilio-signature") == Some(&expected) {
        204
    } else {
        403
    }
}

// ----- helpers

async fn stripe_post(sim: &SimHandle, path: &str, form: &str) -> (u16, Value) {
    let res = client()
        .post(sim.url(path))
        .bearer_auth(&sim.config().stripe_secret_key)
        .header("content-type", STRIPE_FORM)
        .body(form.to_owned())
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn stripe_send(sim: &SimHandle, method: reqwest::Method, path: &str) -> (u16, Value) {
    let res = client()
        .request(method, sim.url(path))
        .bearer_auth(&sim.config().stripe_secret_key)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

fn kinds(hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| {
            serde_json::from_str::<Value>(&h.body).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// (event name, data) of each server-sent event, for LF or CRLF framing.
fn sse(text: &str) -> Vec<(Option<String>, String)> {
    text.replace("\r\n", "\n")
        .split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|frame| {
            let mut event = None;
            let mut data = Vec::new();
            for line in frame.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = Some(e.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push(d);
                }
            }
            (event, data.join("\n"))
        })
        .collect()
}

// ----- Stripe

#[tokio::test]
async fn stripe_payment_checkout_pays_through_the_hosted_page_and_refunds() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });

    let form = "mode=payment&line_items[0][price_data][currency]=usd&line_items[0][price_data][unit_amount]=2500\
        &line_items[0][price_data][product_data][name]=Book&line_items[0][quantity]=2\
        &client_reference_id=42&metadata[user_id]=42&payment_intent_data[metadata][order]=o-1\
        &success_url=http%3A%2F%2Fapp.test%2Fok%3Fsession%3D%7BCHECKOUT_SESSION_ID%7D&cancel_url=http%3A%2F%2Fapp.test%2Fcancel";
    let (status, session) = stripe_post(&sim, "/v1/checkout/sessions", form).await;
    assert_eq!(status, 200, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("cs_test_"));
    assert_eq!(session["object"], "checkout.session");
    assert_eq!(session["status"], "open");
    assert_eq!(session["payment_status"], "unpaid");
    assert_eq!(session["amount_total"], 5000);
    assert_eq!(session["payment_intent"], Value::Null);
    assert_eq!(session["metadata"], json!({"user_id": "42"}));
    assert_eq!(session["client_reference_id"], "42");
    assert_eq!(session["url"], format!("{}/checkout/{id}", sim.base_url()));

    let page = client()
        .get(session["url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Book")
            && page.contains("$50.00")
            && page.contains("/pay")
            && page.contains("/fail")
    );

    let res = client()
        .post(sim.url(&format!("/checkout/{id}/pay")))
        .header("content-type", STRIPE_FORM)
        .body("email=buyer%40example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(
        res.headers()["location"],
        format!("http://app.test/ok?session={id}").as_str()
    );

    let hits = receiver.hits();
    assert_eq!(
        kinds(&hits),
        ["payment_intent.succeeded", "checkout.session.completed"]
    );
    assert!(
        hits.iter().all(|h| h.status == 200),
        "signatures verify: {hits:?}"
    );
    assert_eq!(
        hits[0].headers["content-type"],
        "application/json; charset=utf-8"
    );
    assert!(hits[0].headers["user-agent"].starts_with("Stripe/1.0"));
    let completed: Value = serde_json::from_str(&hits[1].body).unwrap();
    let object = &completed["data"]["object"];
    assert_eq!(completed["object"], "event");
    assert!(completed["id"].as_str().unwrap().starts_with("evt_"));
    assert_eq!(object["status"], "complete");
    assert_eq!(object["payment_status"], "paid");
    assert_eq!(object["customer_details"]["email"], "buyer@example.com");
    assert_eq!(object["metadata"]["user_id"], "42");
    let pi = object["payment_intent"].as_str().unwrap().to_owned();
    let intent: Value = serde_json::from_str(&hits[0].body).unwrap();
    assert_eq!(intent["data"]["object"]["id"], pi.as_str());
    assert_eq!(
        intent["data"]["object"]["metadata"],
        json!({"order": "o-1"})
    );
    let charge = intent["data"]["object"]["latest_charge"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, fetched) = stripe_send(
        &sim,
        reqwest::Method::GET,
        &format!("/v1/checkout/sessions/{id}"),
    )
    .await;
    assert_eq!(
        (status, fetched["status"].as_str()),
        (200, Some("complete"))
    );

    // Refunds: partial, too large, the rest, then nothing left.
    let (status, refund) = stripe_post(
        &sim,
        "/v1/refunds",
        &format!("payment_intent={pi}&amount=1000&reason=requested_by_customer"),
    )
    .await;
    assert_eq!(status, 200, "{refund}");
    assert!(refund["id"].as_str().unwrap().starts_with("re_"));
    assert_eq!(
        (refund["amount"].as_i64(), refund["charge"].as_str()),
        (Some(1000), Some(charge.as_str()))
    );
    assert_eq!(refund["status"], "succeeded");
    let (status, err) =
        stripe_post(&sim, "/v1/refunds", &format!("charge={charge}&amount=4001")).await;
    assert_eq!(status, 400);
    assert_eq!(err["error"]["code"], "amount_too_large");
    assert_eq!(err["error"]["param"], "amount");
    let (status, rest) = stripe_post(&sim, "/v1/refunds", &format!("charge={charge}")).await;
    assert_eq!((status, rest["amount"].as_i64()), (200, Some(4000)));
    let (_, charge_now) =
        stripe_send(&sim, reqwest::Method::GET, &format!("/v1/charges/{charge}")).await;
    assert_eq!(
        (
            charge_now["amount_refunded"].as_i64(),
            charge_now["refunded"].as_bool()
        ),
        (Some(5000), Some(true))
    );
    let (status, err) = stripe_post(&sim, "/v1/refunds", &format!("payment_intent={pi}")).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("charge_already_refunded"))
    );
    let (status, err) = stripe_post(&sim, "/v1/refunds", "payment_intent=pi_missing").await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("resource_missing"))
    );
    assert_eq!(
        err["error"]["message"],
        "No such payment_intent: 'pi_missing'"
    );

    // The session cannot be paid twice.
    assert!(sim.complete_checkout(&id, Outcome::Pay).await.is_err());
}

#[tokio::test]
async fn stripe_failed_checkout_keeps_the_session_open() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let (_, session) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=payment&line_items[0][price]=price_one_time",
    )
    .await;
    let id = session["id"].as_str().unwrap();
    let res = client()
        .post(sim.url(&format!("/checkout/{id}/fail")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("declined"));
    let hits = receiver.hits();
    assert_eq!(kinds(&hits), ["payment_intent.payment_failed"]);
    let event: Value = serde_json::from_str(&hits[0].body).unwrap();
    let intent = &event["data"]["object"];
    assert_eq!(intent["status"], "requires_payment_method");
    assert_eq!(intent["last_payment_error"]["code"], "card_declined");
    assert_eq!(
        intent["last_payment_error"]["decline_code"],
        "generic_decline"
    );
    assert_eq!(sim.stripe_object(id).unwrap()["status"], "open");
}

#[tokio::test]
async fn stripe_subscription_checkout_then_cancel_at_period_end_and_delete() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let (_, customer) = stripe_post(
        &sim,
        "/v1/customers",
        "email=sub%40example.com&metadata[user_id]=9",
    )
    .await;
    let customer_id = customer["id"].as_str().unwrap();
    assert!(customer_id.starts_with("cus_"));
    assert_eq!(customer["metadata"]["user_id"], "9");
    let form = format!(
        "mode=subscription&customer={customer_id}&line_items[0][price]=price_monthly&line_items[0][quantity]=1\
         &subscription_data[metadata][user_id]=9"
    );
    let (status, session) = stripe_post(&sim, "/v1/checkout/sessions", &form).await;
    assert_eq!(status, 200, "{session}");

    let deliveries = sim
        .complete_checkout(session["id"].as_str().unwrap(), Outcome::Pay)
        .await
        .unwrap();
    assert!(deliveries.iter().all(|d| d.accepted()));
    let hits = receiver.hits();
    assert_eq!(
        kinds(&hits),
        [
            "customer.subscription.created",
            "invoice.paid",
            "checkout.session.completed"
        ]
    );
    let sub_event: Value = serde_json::from_str(&hits[0].body).unwrap();
    let sub = &sub_event["data"]["object"];
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    assert_eq!(sub["status"], "active");
    assert_eq!(sub["customer"], customer_id);
    assert_eq!(sub["metadata"]["user_id"], "9");
    assert_eq!(sub["items"]["data"][0]["price"]["id"], "price_monthly");
    assert!(
        sub["items"]["data"][0]["current_period_end"]
            .as_i64()
            .unwrap()
            > sub["created"].as_i64().unwrap()
    );
    let invoice: Value = serde_json::from_str(&hits[1].body).unwrap();
    assert_eq!(
        invoice["data"]["object"]["parent"]["subscription_details"]["subscription"],
        sub_id.as_str()
    );
    assert_eq!(invoice["data"]["object"]["status"], "paid");
    assert_eq!(invoice["data"]["object"]["amount_paid"], 1500);
    let completed: Value = serde_json::from_str(&hits[2].body).unwrap();
    assert_eq!(completed["data"]["object"]["subscription"], sub_id.as_str());

    let (status, updated) = stripe_post(
        &sim,
        &format!("/v1/subscriptions/{sub_id}"),
        "cancel_at_period_end=true",
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(
        (
            updated["status"].as_str(),
            updated["cancel_at_period_end"].as_bool()
        ),
        (Some("active"), Some(true))
    );
    assert_eq!(
        updated["cancel_at"],
        updated["items"]["data"][0]["current_period_end"]
    );

    let (status, canceled) = stripe_send(
        &sim,
        reqwest::Method::DELETE,
        &format!("/v1/subscriptions/{sub_id}?cancellation_details[comment]=bye"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(canceled["status"], "canceled");
    assert!(canceled["canceled_at"].is_i64() && canceled["ended_at"].is_i64());
    assert_eq!(canceled["cancellation_details"]["comment"], "bye");
    let (status, err) =
        stripe_send(&sim, reqwest::Method::DELETE, "/v1/subscriptions/sub_nope").await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("resource_missing"))
    );
}

#[tokio::test]
async fn stripe_errors_have_stripes_shape() {
    let sim = start();
    let res = client()
        .post(sim.url("/v1/checkout/sessions"))
        .bearer_auth("sk_test_wrongkey1234")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid API Key provided: sk_test_")
    );
    assert!(body["error"]["message"].as_str().unwrap().ends_with("1234"));
    assert!(body["error"].get("code").is_none());
    let res = client()
        .get(sim.url("/v1/customers/cus_1"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // Basic auth with the key as the user works too.
    let res = client()
        .get(sim.url("/v1/prices/price_monthly"))
        .basic_auth(&sim.config().stripe_secret_key, Some(""))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["request-id"]
            .to_str()
            .unwrap()
            .starts_with("req_")
    );

    let (status, err) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=payment&line_items[0][price]=price_nope",
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["code"], "resource_missing");
    assert_eq!(err["error"]["param"], "line_items[0][price]");
    assert_eq!(err["error"]["message"], "No such price: 'price_nope'");
    let (status, err) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=payment&line_items[0][price]=price_monthly",
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("recurring price")
    );
    let (status, err) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=subscription&line_items[0][price]=price_one_time",
    )
    .await;
    assert_eq!(status, 400, "{err}");
    let (status, err) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "line_items[0][price]=price_one_time",
    )
    .await;
    assert_eq!(
        (
            status,
            err["error"]["code"].as_str(),
            err["error"]["param"].as_str()
        ),
        (400, Some("parameter_missing"), Some("mode"))
    );
    let (status, err) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=payment&line_items[0][price]=price_one_time&line_items[0][quantity]=0",
    )
    .await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("line_items[0][quantity]"))
    );
    let (status, err) = stripe_post(&sim, "/v1/nothing_here", "").await;
    assert_eq!(status, 404);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Unrecognized request URL")
    );

    // A scripted card decline.
    sim.push_fault(Provider::Stripe, Fault::status(402));
    let (status, err) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=payment&line_items[0][price]=price_one_time",
    )
    .await;
    assert_eq!(status, 402);
    assert_eq!(err["error"]["type"], "card_error");
    assert_eq!(err["error"]["code"], "card_declined");
    assert_eq!(err["error"]["decline_code"], "generic_decline");
}

#[tokio::test]
async fn stripe_idempotency_keys_replay_and_reject_other_parameters() {
    let sim = start();
    let post = |key: &'static str, form: &'static str| {
        client()
            .post(sim.url("/v1/customers"))
            .bearer_auth(&sim.config().stripe_secret_key)
            .header("idempotency-key", key)
            .header("content-type", STRIPE_FORM)
            .body(form)
            .send()
    };
    let first = post("key-1", "email=a%40example.com").await.unwrap();
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    let again = post("key-1", "email=a%40example.com").await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(first["id"], again["id"]);
    let other = post("key-1", "email=b%40example.com").await.unwrap();
    assert_eq!(other.status(), 400);
    let other: Value = other.json().await.unwrap();
    assert_eq!(other["error"]["type"], "idempotency_error");
    let fresh: Value = post("key-2", "email=a%40example.com")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(fresh["id"], first["id"]);
}

#[tokio::test]
async fn stripe_builds_all_event_kinds_signed_like_stripe() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let mut specs: Vec<EventSpec> = EVENT_TYPES.iter().map(|k| EventSpec::new(k)).collect();
    specs.push(EventSpec::new("customer.tax_id.created"));
    let deliveries = sim
        .deliver_stripe_events(&specs, &DeliveryOptions::default())
        .await;
    assert_eq!(deliveries.len(), 14);
    assert!(deliveries.iter().all(|d| d.accepted()), "{deliveries:?}");
    let mut expected: Vec<String> = EVENT_TYPES.iter().map(|s| (*s).to_owned()).collect();
    expected.push("customer.tax_id.created".to_owned());
    assert_eq!(kinds(&receiver.hits()), expected);

    let events: HashMap<String, Value> = receiver
        .hits()
        .iter()
        .map(|h| {
            let e: Value = serde_json::from_str(&h.body).unwrap();
            (e["type"].as_str().unwrap().to_owned(), e)
        })
        .collect();
    let object = |kind: &str| events[kind]["data"]["object"].clone();
    assert_eq!(
        object("radar.early_fraud_warning.created")["object"],
        "radar.early_fraud_warning"
    );
    assert!(
        object("radar.early_fraud_warning.created")["charge"]
            .as_str()
            .unwrap()
            .starts_with("ch_")
    );
    assert_eq!(object("charge.dispute.created")["status"], "needs_response");
    assert_eq!(object("charge.dispute.closed")["status"], "won");
    assert_eq!(
        events["charge.dispute.updated"]["data"]["previous_attributes"]["status"],
        "needs_response"
    );
    assert_eq!(
        events["customer.subscription.updated"]["data"]["previous_attributes"]["cancel_at_period_end"],
        false
    );
    assert!(
        events["customer.subscription.created"]["data"]
            .get("previous_attributes")
            .is_none()
    );
    assert_eq!(
        object("customer.subscription.deleted")["status"],
        "canceled"
    );
    assert_eq!(object("charge.refunded")["refunded"], true);
    assert_eq!(object("invoice.payment_failed")["status"], "open");
    assert_eq!(
        object("customer.tax_id.created")["object"],
        "customer.tax_id"
    );

    // Objects named by events exist for later API calls; overrides tie events together.
    let charge = object("payment_intent.succeeded")["latest_charge"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) =
        stripe_send(&sim, reqwest::Method::GET, &format!("/v1/charges/{charge}")).await;
    assert_eq!(status, 200);
    let dispute = sim.build_stripe_event(
        &EventSpec::new("charge.dispute.created")
            .object(json!({"charge": charge, "reason": "duplicate"})),
    );
    assert_eq!(dispute["data"]["object"]["charge"], charge.as_str());
    assert_eq!(dispute["data"]["object"]["reason"], "duplicate");
    assert_eq!(dispute["data"]["object"]["amount"], 2000);
    assert_eq!(sim.stripe_object(&charge).unwrap()["disputed"], true);
    let dispute_id = dispute["data"]["object"]["id"].as_str().unwrap();
    let closed = sim.build_stripe_event(
        &EventSpec::new("charge.dispute.closed")
            .object(json!({"id": dispute_id, "status": "lost"})),
    );
    assert_eq!(closed["data"]["object"]["charge"], charge.as_str());
    assert_eq!(closed["data"]["object"]["reason"], "duplicate");
    assert_eq!(closed["data"]["object"]["status"], "lost");
    let sub = object("customer.subscription.created")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = stripe_post(
        &sim,
        &format!("/v1/subscriptions/{sub}"),
        "cancel_at_period_end=true",
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn stripe_delivery_knobs_break_or_bend_delivery_as_asked() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let one = [EventSpec::new("payment_intent.succeeded")];
    for (options, accepted) in [
        (
            DeliveryOptions {
                wrong_secret: true,
                ..Default::default()
            },
            false,
        ),
        (
            DeliveryOptions {
                stale: true,
                ..Default::default()
            },
            false,
        ),
        (
            DeliveryOptions {
                no_signature: true,
                ..Default::default()
            },
            false,
        ),
        (
            DeliveryOptions {
                tamper: true,
                ..Default::default()
            },
            false,
        ),
        (
            DeliveryOptions {
                two_v1: true,
                ..Default::default()
            },
            true,
        ),
    ] {
        let d = sim.deliver_stripe_events(&one, &options).await;
        assert_eq!(d[0].accepted(), accepted, "{options:?}: {:?}", d[0]);
    }
    let two_v1 = receiver.hits().last().unwrap().headers["stripe-signature"].clone();
    assert_eq!(two_v1.matches("v1=").count(), 2);

    let d = sim
        .deliver_stripe_events(
            &one,
            &DeliveryOptions {
                duplicate: true,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].id, d[1].id);
    assert_eq!(d[0].body, d[1].body);

    let specs = [
        EventSpec::new("charge.dispute.created"),
        EventSpec::new("charge.dispute.updated"),
        EventSpec::new("charge.dispute.closed"),
    ];
    let d = sim
        .deliver_stripe_events(
            &specs,
            &DeliveryOptions {
                out_of_order: true,
                ..Default::default()
            },
        )
        .await;
    let order: Vec<_> = d.iter().map(|d| d.kind.clone().unwrap()).collect();
    assert_eq!(
        order,
        [
            "charge.dispute.closed",
            "charge.dispute.updated",
            "charge.dispute.created"
        ]
    );

    // A fixed event id replays an event.
    let spec = [EventSpec::new("invoice.paid").id("evt_fixed")];
    let a = sim
        .deliver_stripe_events(&spec, &DeliveryOptions::default())
        .await;
    let b = sim
        .deliver_stripe_events(&spec, &DeliveryOptions::default())
        .await;
    assert_eq!(
        (a[0].id.as_deref(), b[0].id.as_deref()),
        (Some("evt_fixed"), Some("evt_fixed"))
    );
    assert_eq!(sim.deliveries().len(), 5 + 2 + 3 + 2);
}

#[test]
fn stripe_signature_known_answer_vector() {
    let body = br#"{"id":"evt_1","object":"event","type":"checkout.session.completed"}"#;
    assert_eq!(
        signing::stripe_header("whsec_test123", 1_700_000_000, body),
        "t=1700000000,v1=da18c53571f980bec817a29170d51086c8feeb6daaea5ec460593480521e0751"
    );
}

// ----- Resend

async fn resend(sim: &SimHandle, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = client().post(sim.url("/emails")).json(&body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test]
async fn resend_sends_to_the_outbox_and_validates_like_resend() {
    let sim = start();
    let key = sim.config().resend_api_key.clone();
    let email = json!({
        "from": "Keel <noreply@example.com>",
        "to": ["a@example.com", "B <b@example.com>"],
        "subject": "Hello <there>",
        "html": "<p>Hi</p>",
        "reply_to": "support@example.com",
        "tags": [{"name": "kind", "value": "welcome"}],
    });
    let (status, body) = resend(&sim, Some(&key), email.clone()).await;
    assert_eq!(status, 200);
    let id = body["id"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    assert_eq!(body.as_object().unwrap().len(), 1);
    let outbox = sim.outbox();
    assert_eq!(outbox.emails.len(), 1);
    assert_eq!(outbox.emails[0].to, ["a@example.com", "B <b@example.com>"]);
    assert_eq!(outbox.emails[0].reply_to, ["support@example.com"]);
    let fetched: Value = client()
        .get(sim.url(&format!("/emails/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["subject"], "Hello <there>");
    let page = client()
        .get(sim.url("/outbox"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Hello &lt;there&gt;"));

    let shape = |body: &Value, status: u16, name: &str| {
        assert_eq!(body["statusCode"], status, "{body}");
        assert_eq!(body["name"], name, "{body}");
        assert!(body["message"].is_string());
        assert_eq!(body.as_object().unwrap().len(), 3);
    };
    let (status, body) = resend(&sim, None, email.clone()).await;
    assert_eq!(status, 401);
    shape(&body, 401, "missing_api_key");
    let (status, body) = resend(&sim, Some("re_wrong"), email.clone()).await;
    assert_eq!(status, 403);
    shape(&body, 403, "invalid_api_key");
    let mut bad = email.clone();
    bad["to"] = json!("not-an-address");
    let (status, body) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    shape(&body, 422, "validation_error");
    assert!(body["message"].as_str().unwrap().contains("`to`"));
    let mut bad = email.clone();
    bad.as_object_mut().unwrap().remove("subject");
    let (status, body) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    shape(&body, 422, "missing_required_field");
    let mut bad = email.clone();
    bad.as_object_mut().unwrap().remove("html");
    let (status, _) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    let mut bad = email.clone();
    bad["to"] = json!(
        (0..51)
            .map(|i| format!("u{i}@example.com"))
            .collect::<Vec<_>>()
    );
    let (status, _) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    assert_eq!(sim.outbox().emails.len(), 1);

    // Batch.
    let res = client()
        .post(sim.url("/emails/batch"))
        .bearer_auth(&key)
        .json(&json!([email, email]))
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn resend_idempotency_and_rate_limit_fault() {
    let sim = start();
    let key = sim.config().resend_api_key.clone();
    let email =
        json!({"from": "a@example.com", "to": "b@example.com", "subject": "s", "text": "t"});
    let send = |body: Value| {
        client()
            .post(sim.url("/emails"))
            .bearer_auth(&key)
            .header("idempotency-key", "welcome-1")
            .json(&body)
            .send()
    };
    let a: Value = send(email.clone()).await.unwrap().json().await.unwrap();
    let b: Value = send(email.clone()).await.unwrap().json().await.unwrap();
    assert_eq!(a["id"], b["id"]);
    assert_eq!(sim.outbox().emails.len(), 1);
    let mut other = email.clone();
    other["subject"] = json!("changed");
    let res = send(other).await.unwrap();
    assert_eq!(res.status(), 409);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["name"], "invalid_idempotent_request");

    sim.push_fault(Provider::Resend, Fault::status(429).retry_after(2));
    let res = client()
        .post(sim.url("/emails"))
        .bearer_auth(&key)
        .json(&email)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "2");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["name"], "rate_limit_exceeded");
    assert_eq!(body["statusCode"], 429);
}

// ----- Twilio

fn twilio_url(sim: &SimHandle, resource: &str) -> String {
    sim.url(&format!(
        "/2010-04-01/Accounts/{}/{resource}",
        sim.config().twilio_account_sid
    ))
}

async fn twilio_post(sim: &SimHandle, resource: &str, form: &str) -> (u16, Value) {
    let c = sim.config();
    let res = client()
        .post(twilio_url(sim, resource))
        .basic_auth(&c.twilio_account_sid, Some(&c.twilio_auth_token))
        .header("content-type", STRIPE_FORM)
        .body(form.to_owned())
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

fn is_rfc2822(date: &Value) -> bool {
    let text = date.as_str().unwrap_or("");
    text.ends_with(" +0000") && text.as_bytes().get(3) == Some(&b',')
}

#[tokio::test]
async fn twilio_messages_and_calls_with_signed_status_callbacks() {
    let receiver = Receiver::start(twilio_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_millis(1),
        ..SimConfig::default()
    });
    let callback =
        serde_urlencoded::to_string([("StatusCallback", receiver.url.as_str())]).unwrap();

    let (status, msg) = twilio_post(
        &sim,
        "Messages.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Body=Hello+there&{callback}"),
    )
    .await;
    assert_eq!(status, 201, "{msg}");
    let sid = msg["sid"].as_str().unwrap().to_owned();
    assert!(sid.starts_with("SM") && sid.len() == 34);
    assert_eq!(
        (msg["status"].as_str(), msg["direction"].as_str()),
        (Some("queued"), Some("outbound-api"))
    );
    assert_eq!(
        (msg["to"].as_str(), msg["body"].as_str()),
        (Some("+15551234567"), Some("Hello there"))
    );
    assert_eq!(msg["num_segments"], "1");
    assert_eq!(msg["date_sent"], Value::Null);
    assert!(is_rfc2822(&msg["date_created"]), "{}", msg["date_created"]);

    let (status, msg2) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551234567&MessagingServiceSid=MG00000000000000000000000000000001&Body=x",
    )
    .await;
    assert_eq!((status, msg2["status"].as_str()), (201, Some("accepted")));

    let (status, call) = twilio_post(
        &sim,
        "Calls.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Url=https%3A%2F%2Fexample.com%2Ftwiml&{callback}&StatusCallbackEvent=initiated&StatusCallbackEvent=completed"),
    )
    .await;
    assert_eq!(status, 201, "{call}");
    let call_sid = call["sid"].as_str().unwrap().to_owned();
    assert!(call_sid.starts_with("CA") && call_sid.len() == 34);
    assert_eq!(call["status"], "queued");
    assert_eq!(call["to_formatted"], "(555) 123-4567");
    assert!(is_rfc2822(&call["date_created"]));

    // Callbacks arrive in the background: sent and delivered for the SMS, initiated and completed for the call.
    for _ in 0..200 {
        if receiver.hits().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let hits = receiver.hits();
    assert_eq!(hits.len(), 4, "{hits:?}");
    assert!(
        hits.iter().all(|h| h.status == 204),
        "signatures verify: {hits:?}"
    );
    let form = |h: &Hit| serde_urlencoded::from_str::<HashMap<String, String>>(&h.body).unwrap();
    let sms_statuses: Vec<String> = hits
        .iter()
        .map(form)
        .filter(|f| f.get("MessageSid") == Some(&sid))
        .map(|f| f["MessageStatus"].clone())
        .collect();
    assert_eq!(sms_statuses, ["sent", "delivered"]);
    let call_statuses: Vec<String> = hits
        .iter()
        .map(form)
        .filter(|f| f.get("CallSid") == Some(&call_sid))
        .map(|f| f["CallStatus"].clone())
        .collect();
    assert_eq!(call_statuses, ["initiated", "completed"]);
    assert!(hits[0].url.ends_with("/hook?source=sim"));
    assert_eq!(sim.outbox().sms[0].status, "delivered");

    let c = sim.config();
    let fetched: Value = client()
        .get(twilio_url(&sim, &format!("Messages/{sid}.json")))
        .basic_auth(&c.twilio_account_sid, Some(&c.twilio_auth_token))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["status"], "delivered");
    let d = sim.twilio_status_callback(&sid, "failed").await.unwrap();
    assert_eq!(d.status, Some(204));
    assert!(d.body.contains("ErrorCode=30003"));
}

#[tokio::test]
async fn twilio_errors_have_twilios_shape() {
    let sim = start();
    let check = |body: &Value, status: u16, code: u64| {
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(
            body["more_info"],
            format!("https://www.twilio.com/docs/errors/{code}")
        );
        assert!(body["message"].is_string());
    };
    // An unencoded `+` arrives as a space: invalid To.
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        "To=+15551234567&From=%2B15005550006&Body=x",
    )
    .await;
    assert_eq!(status, 400);
    check(&body, 400, 21211);
    let (status, body) = twilio_post(&sim, "Messages.json", "From=%2B15005550006&Body=x").await;
    check(&body, status, 21604);
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551234567&From=%2B15005550006",
    )
    .await;
    check(&body, status, 21602);
    let long = "a".repeat(1601);
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Body={long}"),
    )
    .await;
    check(&body, status, 21617);
    let (status, body) =
        twilio_post(&sim, "Calls.json", "To=%2B15551234567&From=%2B15005550006").await;
    check(&body, status, 21205);
    let (status, body) = twilio_post(
        &sim,
        "Calls.json",
        "To=%2B15551234567&From=%2B15005550006&Url=not-a-url",
    )
    .await;
    check(&body, status, 21205);
    let (status, body) = twilio_post(
        &sim,
        "Calls.json",
        "To=%2B15005550001&From=%2B15005550006&Url=https%3A%2F%2Fx.test%2Ft",
    )
    .await;
    check(&body, status, 21211);

    let res = client()
        .post(twilio_url(&sim, "Messages.json"))
        .basic_auth(&sim.config().twilio_account_sid, Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    check(&res.json().await.unwrap(), 401, 20003);
    assert!(sim.outbox().sms.is_empty() && sim.outbox().calls.is_empty());
}

// ----- LLM dialects

async fn post_json(
    sim: &SimHandle,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> reqwest::Response {
    let mut req = client().post(sim.url(path)).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

const BEARER: (&str, &str) = ("authorization", "Bearer sim-ai-key");

#[tokio::test]
async fn openai_compatible_chat_streams_and_not() {
    let sim = start();
    let messages = json!([{"role": "system", "content": "be nice"}, {"role": "user", "content": "Hello simulated world"}]);
    for (path, provider) in [
        ("/openai/v1/chat/completions", Provider::Openai),
        ("/groq/openai/v1/chat/completions", Provider::Groq),
        ("/mistral/v1/chat/completions", Provider::Mistral),
        ("/ollama/v1/chat/completions", Provider::Ollama),
        ("/v1/chat/completions", Provider::Openai),
    ] {
        let res = post_json(
            &sim,
            path,
            &[BEARER],
            json!({"model": "m", "messages": messages}),
        )
        .await;
        assert_eq!(res.status(), 200, "{path}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["object"], "chat.completion");
        assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "Hello simulated world"
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["completion_tokens"], 3);
        assert_eq!(sim.journal().last().unwrap().provider, provider);
    }

    let body = json!({"model": "m", "messages": messages, "stream": true, "stream_options": {"include_usage": true}});
    let res = post_json(&sim, "/groq/openai/v1/chat/completions", &[BEARER], body).await;
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = sse(&res.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello simulated world");
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty()))
            .count(),
        3
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["x_groq"]["usage"]["completion_tokens"], 3);
    assert_eq!(chunks.last().unwrap()["choices"], json!([]));
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 8);

    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[BEARER],
        json!({"model": "m", "messages": messages, "max_tokens": 2}),
    )
    .await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (
            body["choices"][0]["message"]["content"].as_str(),
            body["choices"][0]["finish_reason"].as_str()
        ),
        (Some("Hello simulated"), Some("length"))
    );

    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[],
        json!({"model": "m", "messages": messages}),
    )
    .await;
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].is_string());
    let res = post_json(
        &sim,
        "/mistral/v1/chat/completions",
        &[BEARER],
        json!({"model": "m", "messages": []}),
    )
    .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "error");
}

#[tokio::test]
async fn openai_rejects_a_wrong_key_when_one_is_configured() {
    let sim = start_with(SimConfig {
        ai_api_key: Some("right".to_owned()),
        ..SimConfig::default()
    });
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let res = post_json(&sim, "/openai/v1/chat/completions", &[BEARER], body.clone()).await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "invalid_api_key");
    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[("authorization", "Bearer right")],
        body,
    )
    .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn anthropic_messages_with_named_events() {
    let sim = start();
    let headers = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    let body = json!({"model": "test-model", "max_tokens": 100, "system": "terse",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi from Keel"}]}]});
    let res = post_json(&sim, "/anthropic/v1/messages", &headers, body.clone()).await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    assert_eq!(reply["type"], "message");
    assert!(reply["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        reply["content"][0],
        json!({"type": "text", "text": "Hi from Keel"})
    );
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["usage"]["output_tokens"], 3);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = sse(&post_json(&sim, "/v1/messages", &headers, streamed)
        .await
        .text()
        .await
        .unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let text: String = events
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["delta"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Hi from Keel");
    let delta: Value = serde_json::from_str(&events[7].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");

    let mut no_max = body.clone();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let res = post_json(&sim, "/anthropic/v1/messages", &headers, no_max).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "invalid_request_error");
    let res = post_json(
        &sim,
        "/anthropic/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        body.clone(),
    )
    .await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["type"], "authentication_error");
    let mut short = body;
    short["max_tokens"] = json!(1);
    let reply: Value = post_json(&sim, "/anthropic/v1/messages", &headers, short)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            reply["content"][0]["text"].as_str(),
            reply["stop_reason"].as_str()
        ),
        (Some("Hi"), Some("max_tokens"))
    );
}

#[tokio::test]
async fn gemini_generate_content_and_crlf_sse_without_done() {
    let sim = start();
    let key = [("x-goog-api-key", "k")];
    let body = json!({"systemInstruction": {"parts": [{"text": "terse"}]},
        "contents": [{"role": "user", "parts": [{"text": "Bonjour le monde"}]}],
        "generationConfig": {"maxOutputTokens": 50}});
    let reply: Value = post_json(
        &sim,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        &key,
        body.clone(),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        reply["candidates"][0]["content"]["parts"][0]["text"],
        "Bonjour le monde"
    );
    assert_eq!(reply["candidates"][0]["content"]["role"], "model");
    assert_eq!(reply["candidates"][0]["finishReason"], "STOP");
    assert_eq!(reply["usageMetadata"]["candidatesTokenCount"], 3);
    assert_eq!(reply["modelVersion"], "gemini-2.0-flash");

    let res = post_json(
        &sim,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&key=k",
        &[],
        body.clone(),
    )
    .await;
    assert_eq!(res.status(), 200);
    let raw = res.text().await.unwrap();
    assert!(raw.contains("\r\n\r\n"));
    assert!(!raw.contains("[DONE]"));
    let chunks: Vec<Value> = sse(&raw)
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks.len(), 3);
    let text: String = chunks
        .iter()
        .map(|c| {
            c["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(text, "Bonjour le monde");
    assert!(chunks[0]["candidates"][0].get("finishReason").is_none());
    assert_eq!(chunks[2]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(chunks[2]["usageMetadata"]["totalTokenCount"], 7);

    let res = post_json(
        &sim,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        &[],
        body.clone(),
    )
    .await;
    assert_eq!(res.status(), 403);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["status"], "PERMISSION_DENIED");
    let res = post_json(
        &sim,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        &key,
        json!({"contents": []}),
    )
    .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(
        (
            err["error"]["code"].as_u64(),
            err["error"]["status"].as_str()
        ),
        (Some(400), Some("INVALID_ARGUMENT"))
    );
}

#[tokio::test]
async fn gemini_bad_key_is_400_api_key_invalid() {
    let sim = start_with(SimConfig {
        ai_api_key: Some("good".to_owned()),
        ..SimConfig::default()
    });
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}]});
    let res = post_json(
        &sim,
        "/gemini/v1beta/models/g:generateContent",
        &[("x-goog-api-key", "bad")],
        body,
    )
    .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["details"][0]["reason"], "API_KEY_INVALID");
}

#[tokio::test]
async fn cohere_v2_chat_streams_named_events() {
    let sim = start();
    let body =
        json!({"model": "command-r", "messages": [{"role": "user", "content": "Ciao tutti"}]});
    let reply: Value = post_json(&sim, "/cohere/v2/chat", &[BEARER], body.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["finish_reason"], "COMPLETE");
    assert_eq!(reply["message"]["content"][0]["text"], "Ciao tutti");
    assert_eq!(reply["usage"]["billed_units"]["output_tokens"], 2);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = sse(&post_json(&sim, "/v2/chat", &[BEARER], streamed)
        .await
        .text()
        .await
        .unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message-start",
            "content-start",
            "content-delta",
            "content-delta",
            "content-end",
            "message-end"
        ]
    );
    let text: String = events
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content-delta"))
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["delta"]["message"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Ciao tutti");
    let end: Value = serde_json::from_str(&events[5].1).unwrap();
    assert_eq!(end["delta"]["finish_reason"], "COMPLETE");

    let res = post_json(&sim, "/cohere/v2/chat", &[], body).await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert!(err["message"].is_string());
}

// ----- faults

#[tokio::test]
async fn faults_answer_with_the_providers_error_and_retry_after() {
    let sim = start();
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    sim.push_fault(Provider::Openai, Fault::status(429).retry_after(7).times(2));
    for _ in 0..2 {
        let res = post_json(&sim, "/openai/v1/chat/completions", &[BEARER], chat.clone()).await;
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers()["retry-after"], "7");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], "rate_limit_exceeded");
    }
    assert_eq!(
        post_json(&sim, "/openai/v1/chat/completions", &[BEARER], chat.clone())
            .await
            .status(),
        200
    );

    sim.push_fault(Provider::Anthropic, Fault::status(529));
    let res = post_json(&sim, "/anthropic/v1/messages", &[], json!({})).await;
    assert_eq!(res.status(), 529);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["type"], "overloaded_error");

    sim.push_fault(Provider::Gemini, Fault::status(503));
    let err: Value = post_json(
        &sim,
        "/gemini/v1beta/models/g:generateContent",
        &[],
        json!({}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(err["error"]["status"], "UNAVAILABLE");

    sim.push_fault(Provider::Cohere, Fault::status(429).message("slow down"));
    let err: Value = post_json(&sim, "/cohere/v2/chat", &[], json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(err, json!({"message": "slow down"}));

    sim.push_fault(Provider::Twilio, Fault::status(429).code("20429"));
    let (status, err) = twilio_post(&sim, "Messages.json", "").await;
    assert_eq!((status, err["code"].as_u64()), (429, Some(20429)));

    sim.push_fault(Provider::Stripe, Fault::status(500));
    let res = client()
        .get(sim.url("/v1/customers/cus_x"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 500);
    assert_eq!(res.headers()["stripe-should-retry"], "true");
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["type"], "api_error");

    // A delay alone still answers normally.
    sim.push_fault(Provider::Ollama, Fault::default().delay_ms(20));
    assert_eq!(
        post_json(&sim, "/ollama/v1/chat/completions", &[], chat)
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn stream_faults_truncate_corrupt_disconnect_and_drop() {
    let sim = start();
    let chat = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "one two three four five six"}]});
    let path = "/openai/v1/chat/completions";

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Truncate));
    let text = post_json(&sim, path, &[BEARER], chat.clone())
        .await
        .text()
        .await
        .unwrap();
    let events = sse(&text);
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|(_, d)| d != "[DONE]" && !d.contains("\"finish_reason\":\"stop\""))
    );
    assert!(
        events
            .iter()
            .all(|(_, d)| serde_json::from_str::<Value>(d).is_ok())
    );

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Malformed));
    let text = post_json(&sim, path, &[BEARER], chat.clone())
        .await
        .text()
        .await
        .unwrap();
    let events = sse(&text);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    assert_eq!(
        events
            .iter()
            .filter(|(_, d)| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
            .count(),
        1
    );

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Disconnect));
    let res = post_json(&sim, path, &[BEARER], chat.clone()).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.is_err());

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Drop));
    assert!(
        client()
            .post(sim.url(path))
            .json(&chat)
            .send()
            .await
            .is_err()
    );

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Stall));
    let mut res = post_json(&sim, path, &[BEARER], chat.clone()).await;
    let first = res.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));
    drop(res);

    // Non-streamed JSON is cut too.
    sim.push_fault(Provider::Resend, Fault::action(FaultAction::Truncate));
    let res = client()
        .post(sim.url("/emails"))
        .bearer_auth("re_provider_sim")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert!(serde_json::from_str::<Value>(&res.text().await.unwrap()).is_err());

    // With a chunk delay the stream still completes.
    sim.set_chunk_delay(Duration::from_millis(1));
    let events = sse(&post_json(&sim, path, &[BEARER], chat)
        .await
        .text()
        .await
        .unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
}

// ----- journal and control API

#[tokio::test]
async fn journal_records_method_path_headers_and_body() {
    let sim = start();
    stripe_post(&sim, "/v1/customers", "email=j%40example.com&metadata[a]=1").await;
    post_json(
        &sim,
        "/anthropic/v1/messages",
        &[("x-api-key", "secret-key")],
        json!({"model": "x"}),
    )
    .await;
    let stripe = sim.journal_for(Provider::Stripe);
    assert_eq!(stripe.len(), 1);
    let entry = &stripe[0];
    assert_eq!(
        (entry.method.as_str(), entry.path.as_str()),
        ("POST", "/v1/customers")
    );
    assert_eq!(
        entry.header("Authorization"),
        Some("Bearer sk_test_provider_sim")
    );
    assert_eq!(entry.form_value("metadata[a]").as_deref(), Some("1"));
    assert_eq!(entry.body, "email=j%40example.com&metadata[a]=1");
    let anthropic = &sim.journal_for(Provider::Anthropic)[0];
    assert_eq!(anthropic.header("x-api-key"), Some("secret-key"));
    assert_eq!(anthropic.json()["model"], "x");
    assert_eq!(
        sim.journal().iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2]
    );

    sim.clear_journal();
    client()
        .delete(sim.url("/v1/subscriptions/sub_x?prorate=true"))
        .send()
        .await
        .unwrap();
    let entry = &sim.journal()[0];
    assert_eq!(
        (
            entry.method.as_str(),
            entry.query_value("prorate").as_deref()
        ),
        ("DELETE", Some("true"))
    );
}

#[tokio::test]
async fn control_api_drives_the_simulator_over_http() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let c = client();
    let settings: Value = c
        .get(sim.url("/_sim/settings"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(settings["STRIPE_API_BASE"], sim.base_url());
    assert_eq!(
        settings["OPENAI_BASE_URL"],
        format!("{}/openai/v1", sim.base_url())
    );
    assert_eq!(
        settings["TWILIO_AUTH_TOKEN"],
        sim.config().twilio_auth_token.as_str()
    );

    let res = c
        .post(sim.url("/_sim/faults/stripe"))
        .json(&json!([{"status": 503, "times": 2}, {"action": "drop"}]))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let pending: Value = c
        .get(sim.url("/_sim/faults"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pending["stripe"].as_array().unwrap().len(), 2);
    assert_eq!(
        c.get(sim.url("/v1/customers/x"))
            .send()
            .await
            .unwrap()
            .status(),
        503
    );
    assert_eq!(
        c.delete(sim.url("/_sim/faults"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        c.get(sim.url("/v1/customers/x"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        c.post(sim.url("/_sim/faults/nope"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    let journal: Value = c
        .get(sim.url("/_sim/journal?provider=stripe"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(journal.as_array().unwrap().len(), 2);
    assert_eq!(journal[0]["path"], "/v1/customers/x");

    let res: Value = c
        .post(sim.url("/_sim/stripe/events"))
        .json(&json!({"type": "charge.dispute.created", "object": {"reason": "fraudulent"}, "duplicate": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(res["deliveries"].as_array().unwrap().len(), 2);
    assert_eq!(res["deliveries"][0]["status"], 200);
    let res: Value = c
        .post(sim.url("/_sim/stripe/events"))
        .json(&json!({"events": [{"type": "invoice.paid"}, {"type": "invoice.payment_failed"}], "stale": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(res["deliveries"][1]["status"], 400);

    let (_, session) = stripe_post(
        &sim,
        "/v1/checkout/sessions",
        "mode=payment&line_items[0][price]=price_one_time",
    )
    .await;
    let id = session["id"].as_str().unwrap();
    let res: Value = c
        .post(sim.url(&format!("/_sim/stripe/checkout/{id}/pay")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(res["deliveries"][1]["kind"], "checkout.session.completed");
    let object: Value = c
        .get(sim.url(&format!("/_sim/stripe/objects/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(object["status"], "complete");
    let deliveries: Value = c
        .get(sim.url("/_sim/deliveries"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(deliveries.as_array().unwrap().len(), 6);

    let outbox: Value = c
        .get(sim.url("/_sim/outbox"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(outbox, json!({"emails": [], "sms": [], "calls": []}));
    assert_eq!(
        c.post(sim.url("/_sim/llm/chunk-delay"))
            .json(&json!({"ms": 0}))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        c.post(sim.url("/_sim/reset"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let journal: Value = c
        .get(sim.url("/_sim/journal"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(journal, json!([]));
    let index = c
        .get(sim.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(index.contains("STRIPE_WEBHOOK_SECRET=whsec_provider_sim"));
}

#[tokio::test]
async fn auto_events_follow_api_refunds_and_subscription_changes() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        stripe_auto_events: true,
        callback_delay: Duration::from_millis(1),
        ..SimConfig::default()
    });
    let built = sim.build_stripe_event(&EventSpec::new("payment_intent.succeeded"));
    let pi = built["data"]["object"]["id"].as_str().unwrap().to_owned();
    let (status, _) = stripe_post(
        &sim,
        "/v1/refunds",
        &format!("payment_intent={pi}&amount=500"),
    )
    .await;
    assert_eq!(status, 200);
    for _ in 0..200 {
        if !receiver.hits().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let hits = receiver.hits();
    assert_eq!(kinds(&hits), ["charge.refunded"]);
    let event: Value = serde_json::from_str(&hits[0].body).unwrap();
    assert_eq!(
        (
            event["data"]["object"]["amount_refunded"].as_i64(),
            event["data"]["object"]["refunded"].as_bool()
        ),
        (Some(500), Some(false))
    );
}
