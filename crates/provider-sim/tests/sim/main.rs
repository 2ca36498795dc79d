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
    CallbackOptions, DeliveryOptions, EVENT_TYPES, EventSpec, Fault, FaultAction, Outcome,
    Provider, ProviderSim, SimConfig, SimHandle, signing,
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

    /// The hits once there are at least `n` (or whatever arrived after a generous wait).
    async fn wait_for(&self, n: usize) -> Vec<Hit> {
        for _ in 0..400 {
            if self.hits().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.hits()
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

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Verifies a Resend (Svix) delivery as Svix's libraries do: HMAC-SHA256 of
/// `"{svix-id}.{svix-timestamp}.{body}"` keyed with the base64-decoded secret after `whsec_`,
/// any of the space-separated `v1,` values, a timestamp within 5 minutes.
fn svix_check(_url: &str, headers: &HashMap<String, String>, body: &str) -> u16 {
    let (Some(id), Some(timestamp), Some(signatures)) = (
        headers.get("svix-id"),
        headers.get("svix-timestamp"),
        headers.get("svix-signature"),
    ) else {
        return 400;
    };
    let Ok(t) = timestamp.parse::<i64>() else {
        return 400;
    };
    if (unix_now() - t).abs() > 300 {
        return 400;
    }
    let secret = SimConfig::default().resend_webhook_secret;
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    if signatures.split(' ').any(|s| s == expected) {
        200
    } else {
        400
    }
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

mod billing;
mod faults;
mod journal;
mod llm;
mod opt_outs;
mod resend;
mod stripe;
mod twilio;
