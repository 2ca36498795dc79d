//! The communications module over real HTTP, its provider clients against `provider-sim`, on
//! both backends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use comms_core::{CommsConfig, CommsModule};
use hmac::{KeyInit, Mac};
use kernel::identity::AuthFailure;
use kernel::module::{BuildModule, Deps};
use kernel::testing::{TestDb, TestServer, spawn_modules_with_workers};
use kernel::{Authenticator, Principal, Role};
use provider_sim::{Fault, FaultAction, Provider, ProviderSim, SimConfig, SimHandle};
use serde_json::{Value, json};

const USER: &str = "user-token";
const OTHER: &str = "other-token";
const ADMIN: &str = "admin-token";
const INACTIVE: &str = "inactive-token";
const FROM_NUMBER: &str = "+15005550006";
const WEBHOOK_KEY: &[u8] = b"comms-test-webhook-key";

struct StubAuthenticator;

#[async_trait::async_trait]
impl Authenticator for StubAuthenticator {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let principal = |user_id, role| Principal {
            user_id,
            email: format!("u{user_id}@example.com"),
            full_name: None,
            role,
            is_active: true,
        };
        match token {
            USER => Ok(principal(3, Role::User)),
            OTHER => Ok(principal(4, Role::User)),
            ADMIN => Ok(principal(1, Role::Admin)),
            INACTIVE => Err(AuthFailure::Inactive),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

struct Ctx {
    server: TestServer,
    sim: SimHandle,
    _db: TestDb,
}

fn webhook_secret() -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(WEBHOOK_KEY)
    )
}

/// Every channel configured against the simulator; `adjust` changes the settings first.
async fn start_with(
    db: TestDb,
    auth: bool,
    adjust: impl FnOnce(&mut CommsConfig, &SimHandle),
) -> Ctx {
    start_sim(db, auth, false, adjust).await
}

/// Every channel configured against the simulator, served by one HTTP worker: the emails sent
/// at once then queue for one batch (each worker gathers its own).
async fn start_one_worker(db: TestDb) -> Ctx {
    start_served(db, true, false, |_, _| {}, 1).await
}

/// With `live`, the simulator delivers its own Resend events and Twilio callbacks to the server
/// shortly after each send; otherwise only when a test asks (they would race the tests' own).
async fn start_sim(
    db: TestDb,
    auth: bool,
    live: bool,
    adjust: impl FnOnce(&mut CommsConfig, &SimHandle),
) -> Ctx {
    start_served(db, auth, live, adjust, 2).await
}

/// [`start_sim`] with `workers` HTTP workers.
async fn start_served(
    db: TestDb,
    auth: bool,
    live: bool,
    adjust: impl FnOnce(&mut CommsConfig, &SimHandle),
    workers: usize,
) -> Ctx {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let sim = ProviderSim::start(SimConfig {
        callback_delay: Duration::from_millis(if live { 20 } else { 3_600_000 }),
        resend_webhook_url: live.then(|| format!("{base}/api/v1/comms/webhooks/resend")),
        resend_webhook_secret: webhook_secret(),
        ..SimConfig::default()
    })
    .unwrap();
    let mut config = CommsConfig {
        resend_api_key: Some(sim.config().resend_api_key.clone()),
        resend_from_email: Some("Keel <noreply@example.com>".into()),
        resend_api_base: sim.base_url().to_owned(),
        resend_webhook_secret: Some(webhook_secret()),
        twilio_account_sid: Some(sim.config().twilio_account_sid.clone()),
        twilio_auth_token: Some(sim.config().twilio_auth_token.clone()),
        twilio_phone_number: Some(FROM_NUMBER.into()),
        twilio_messaging_service_sid: None,
        twilio_api_base: sim.base_url().to_owned(),
        twilio_webhook_shared_keys: Vec::new(),
        public_base_url: Some(base),
        timeout: Duration::from_secs(2),
    };
    adjust(&mut config, &sim);
    let pool = db.migrated_pool(&[comms_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool).unwrap();
    deps.read_cache = db.read_cache;
    if auth {
        deps = deps.with_authenticator(Arc::new(StubAuthenticator));
    }
    let module = Arc::new(CommsModule::build(config, &deps).await.unwrap());
    let server = spawn_modules_with_workers(vec![module], listener, workers);
    Ctx {
        server,
        sim,
        _db: db,
    }
}

async fn start(db: TestDb) -> Ctx {
    start_with(db, true, |_, _| {}).await
}

impl Ctx {
    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let mut req = self
            .server
            .client
            .post(self.server.url(&format!("/api/v1/comms{path}")))
            .json(&body);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self
            .server
            .client
            .get(self.server.url(&format!("/api/v1/comms{path}")));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn send_email(&self) -> String {
        let (status, body) = self
            .post(
                "/email/send",
                Some(USER),
                json!({"to": ["a@example.com"], "subject": "Hi", "text": "Hello"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    async fn send_sms(&self, body: &str) -> Value {
        let (status, answer) = self
            .post(
                "/sms/send",
                Some(USER),
                json!({"to": "+15005550010", "body": body}),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    /// The log's first hundred messages, as the admin sees them.
    async fn log(&self) -> Vec<Value> {
        let (status, body) = self.get("/messages?page_size=100", Some(ADMIN)).await;
        assert_eq!(status, 200, "{body}");
        body["messages"].as_array().unwrap().clone()
    }

    /// The logged message with this provider id (as the admin sees the log).
    async fn logged(&self, provider_id: &str) -> Value {
        let log = self.log().await;
        log.iter()
            .find(|m| m["provider_id"] == provider_id)
            .cloned()
            .unwrap_or_else(|| panic!("{provider_id} is not in the log: {log:?}"))
    }

    /// Posts a Resend event signed with Svix headers (`age` seconds old, `key` as the secret),
    /// carrying the email's tags as Resend's events do (one object).
    async fn resend_event(&self, kind: &str, email_id: &str, age: i64, key: &[u8]) -> (u16, Value) {
        let tags: serde_json::Map<String, Value> = (self.sim.outbox().emails.iter())
            .filter(|e| e.id == email_id)
            .flat_map(|e| e.tags.as_array().cloned().unwrap_or_default())
            .map(|t| (t["name"].as_str().unwrap().to_owned(), t["value"].clone()))
            .collect();
        self.resend_event_with(kind, email_id, Value::Object(tags), age, key)
            .await
    }

    /// [`Self::resend_event`] with these tags.
    async fn resend_event_with(
        &self,
        kind: &str,
        email_id: &str,
        tags: Value,
        age: i64,
        key: &[u8],
    ) -> (u16, Value) {
        let body = json!({
            "type": kind,
            "created_at": "2026-11-23T10:00:00.000Z",
            "data": {"email_id": email_id, "to": ["a@example.com"], "subject": "Hi", "tags": tags,
                     "bounce": {"message": "Mailbox does not exist", "type": "Permanent"}},
        })
        .to_string();
        let timestamp = (chrono::Utc::now().timestamp() - age).to_string();
        let id = format!("msg_{kind}_{email_id}");
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
        let signature =
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        let res = self
            .server
            .client
            .post(self.server.url("/api/v1/comms/webhooks/resend"))
            .header("svix-id", id)
            .header("svix-timestamp", timestamp)
            .header("svix-signature", format!("v1,{signature}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }
}

#[path = "http/batches.rs"]
mod batches;
#[path = "http/cancellation.rs"]
mod cancellation;
#[path = "http/mailer.rs"]
mod mailer;
#[path = "http/mounts.rs"]
mod mounts;
#[path = "http/references.rs"]
mod references;
#[path = "http/suppressions.rs"]
mod suppressions;
#[path = "http/twilio_signatures.rs"]
mod twilio_signatures;

kernel::backend_tests! {
    every_validation_rule_answers_400_with_its_text,
    missing_settings_answer_503_naming_them,
    an_email_is_sent_as_resend_expects_and_logged,
    an_sms_is_sent_as_twilio_expects_with_its_segments,
    a_call_is_started_as_twilio_expects,
    provider_failures_are_502_with_the_providers_message,
    twilio_callbacks_move_the_log_forward_only,
    resend_events_move_the_log_forward_only,
    sends_need_an_active_user_and_the_log_is_per_user,
    health_status_and_version_follow_the_contract,
    the_simulators_own_deliveries_are_accepted,
    a_messaging_service_stands_in_for_the_number,
}

async fn every_validation_rule_answers_400_with_its_text(db: TestDb) {
    // Validation comes before configuration: a module with no channel set up still answers 400.
    let c = start_with(db, true, |config, _| *config = CommsConfig::default()).await;
    let cases = [
        (
            "/email/send",
            json!({"subject": "s", "text": "t"}),
            "Field required: to",
        ),
        (
            "/email/send",
            json!({"to": [], "subject": "s", "text": "t"}),
            "Field required: to",
        ),
        (
            "/email/send",
            json!({"to": ["nope"], "subject": "s", "text": "t"}),
            "Invalid email address: nope",
        ),
        (
            "/email/send",
            json!({"to": "a@example.com", "cc": ["x@y"], "subject": "s", "text": "t"}),
            "Invalid email address: x@y",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "text": "t"}),
            "Field required: subject",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "s"}),
            "Either text or html content is required",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "s", "text": "t",
                   "tags": [{"name": "keel_message", "value": "x"}]}),
            "Reserved tag name: keel_message (keel names each email with it; choose another name)",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "s", "html": "  "}),
            "Either text or html content is required",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "x".repeat(999), "text": "t"}),
            "Subject too long: 999 characters (max 998)",
        ),
        (
            "/email/send",
            json!({"to": (0..51).map(|i| format!("u{i}@example.com")).collect::<Vec<_>>(), "subject": "s", "text": "t"}),
            "Too many recipients: 51 (max 50)",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "s", "text": "t", "from_email": "Keel <nope>"}),
            "Invalid email address: Keel <nope>",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "a\u{0}b", "text": "t"}),
            "Invalid subject: it contains a NUL character",
        ),
        (
            "/email/send",
            json!({"to": ["a@example.com"], "subject": "s", "html": "<p>\u{0}</p>"}),
            "Invalid html: it contains a NUL character",
        ),
        (
            "/email/send",
            json!({"to": ["a\u{0}@example.com"], "subject": "s", "text": "t"}),
            "Invalid email address: a\u{0}@example.com",
        ),
        (
            "/sms/send",
            json!({"to": "+15005550006", "body": "a\u{0}"}),
            "Invalid body: it contains a NUL character",
        ),
        (
            "/sms/send",
            json!({"to": "5550006", "body": "hi"}),
            "Invalid phone number: 5550006",
        ),
        ("/sms/send", json!({"body": "hi"}), "Field required: to"),
        (
            "/sms/send",
            json!({"to": "+15005550006"}),
            "Field required: body",
        ),
        (
            "/sms/send",
            json!({"to": "+15005550006", "body": "a".repeat(1601)}),
            "Message too long: 1601 characters (max 1600)",
        ),
        (
            "/sms/send",
            json!({"to": "+15005550006", "body": "hi", "from_number": "+0"}),
            "Invalid phone number: +0",
        ),
        (
            "/call/make",
            json!({"to": "+15005550006", "twiml_url": "ftp://x/y"}),
            "Invalid twiml_url: it must be an absolute http or https URL",
        ),
        (
            "/call/make",
            json!({"to": "+15005550006"}),
            "Field required: twiml_url",
        ),
        (
            "/call/make",
            json!({"to": "+15005550006", "twiml_url": "https://x.example/t", "timeout": 4}),
            "Invalid timeout: 4 (from 5 to 600 seconds)",
        ),
        (
            "/call/make",
            json!({"to": "+1", "twiml_url": "https://x.example/t"}),
            "Invalid phone number: +1",
        ),
    ];
    for (path, body, detail) in cases {
        let (status, answer) = c.post(path, Some(USER), body.clone()).await;
        assert_eq!(
            (status, answer["detail"].as_str()),
            (400, Some(detail)),
            "{path} {body}"
        );
    }
    assert!(c.sim.journal().is_empty(), "nothing reached a provider");
}

async fn missing_settings_answer_503_naming_them(db: TestDb) {
    let c = start_with(db, true, |config, _| {
        config.resend_from_email = None;
        config.twilio_auth_token = None;
    })
    .await;
    let email = json!({"to": ["a@example.com"], "subject": "s", "text": "t"});
    let (status, body) = c.post("/email/send", Some(USER), email).await;
    assert_eq!(status, 503);
    assert_eq!(
        body["detail"],
        "Email not configured: RESEND_FROM_EMAIL is not set"
    );
    let (status, body) = c
        .post(
            "/sms/send",
            Some(USER),
            json!({"to": "+15005550010", "body": "x"}),
        )
        .await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            503,
            Some("SMS not configured: TWILIO_AUTH_TOKEN is not set")
        )
    );
    let call = json!({"to": "+15005550010", "twiml_url": "https://x.example/t"});
    let (status, body) = c.post("/call/make", Some(USER), call).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            503,
            Some("Voice not configured: TWILIO_AUTH_TOKEN is not set")
        )
    );
    assert!(c.sim.journal().is_empty());
}

async fn an_email_is_sent_as_resend_expects_and_logged(db: TestDb) {
    let c = start(db).await;
    let email = json!({
        "to": ["a@example.com", "b@example.com"],
        "subject": "Welcome",
        "text": "Hello there",
        "html": "<p>Hello there</p>",
        "cc": ["c@example.com"],
        "reply_to": "support@example.com",
        "tags": [{"name": "kind", "value": "welcome"}],
    });
    let (status, body) = c.post("/email/send", Some(USER), email).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "sent");
    assert_eq!(body["to"], json!(["a@example.com", "b@example.com"]));
    let id = body["id"].as_str().unwrap();
    let sent = c.sim.journal_for(Provider::Resend);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/emails");
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {}", c.sim.config().resend_api_key).as_str())
    );
    let payload: Value = serde_json::from_str(&sent[0].body).unwrap();
    assert_eq!(payload["from"], "Keel <noreply@example.com>");
    assert_eq!(payload["to"], json!(["a@example.com", "b@example.com"]));
    assert_eq!(payload["cc"], json!(["c@example.com"]));
    assert_eq!(payload["reply_to"], json!(["support@example.com"]));
    // The send's own tags, then keel's reference (a UUIDv7) for Resend's events to carry back.
    let tags = payload["tags"].as_array().unwrap();
    assert_eq!(tags[0], json!({"name": "kind", "value": "welcome"}));
    assert_eq!((tags.len(), &tags[1]["name"]), (2, &json!("keel_message")));
    let reference = uuid::Uuid::parse_str(tags[1]["value"].as_str().unwrap()).unwrap();
    assert_eq!(reference.get_version_num(), 7);
    assert_eq!(payload["text"], "Hello there");
    assert!(payload.get("bcc").is_none());
    let logged = c.logged(id).await;
    assert_eq!(logged["channel"], "email");
    assert_eq!(logged["status"], "sent");
    assert_eq!(logged["subject"], "Welcome");
    assert_eq!(logged["preview"], "Hello there");
    assert_eq!(logged["user_id"], 3);
    assert_eq!(
        logged["recipients"],
        json!(["a@example.com", "b@example.com"])
    );
}

async fn an_sms_is_sent_as_twilio_expects_with_its_segments(db: TestDb) {
    let c = start(db).await;
    let body = c.send_sms("Hello from Keel").await;
    assert_eq!(body["status"], "sent");
    assert_eq!(body["segments"], 1);
    assert!(body["sid"].as_str().unwrap().starts_with("SM"));
    let sent = c.sim.journal_for(Provider::Twilio);
    let request = sent.last().unwrap();
    let account = &c.sim.config().twilio_account_sid;
    assert_eq!(
        request.path,
        format!("/2010-04-01/Accounts/{account}/Messages.json")
    );
    assert!(
        request.body.contains("To=%2B15005550010"),
        "{}",
        request.body
    );
    assert!(
        request.body.contains("From=%2B15005550006"),
        "{}",
        request.body
    );
    let fields: Vec<(String, String)> = serde_urlencoded::from_str(&request.body).unwrap();
    let callback = fields.iter().find(|(k, _)| k == "StatusCallback").unwrap();
    assert_eq!(
        callback.1,
        c.server.url("/api/v1/comms/webhooks/twilio/status")
    );
    let token = &c.sim.config().twilio_auth_token;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{account}:{token}"));
    assert_eq!(
        request.header("authorization"),
        Some(format!("Basic {basic}").as_str())
    );
    let logged = c.logged(body["sid"].as_str().unwrap()).await;
    assert_eq!(
        (logged["channel"].as_str(), logged["status"].as_str()),
        (Some("sms"), Some("queued"))
    );
    for (text, segments) in [
        ("a".repeat(160), 1),
        ("a".repeat(161), 2),
        ("a".repeat(306), 2),
        ("a".repeat(307), 3),
        ("a".repeat(459), 3),
        ("€".repeat(80), 1),
        ("[".repeat(81), 2),
        ("😀".repeat(35), 1),
        ("😀".repeat(36), 2),
    ] {
        assert_eq!(c.send_sms(&text).await["segments"], segments, "{text}");
    }
}

async fn a_call_is_started_as_twilio_expects(db: TestDb) {
    let c = start(db).await;
    let call = json!({"to": "+15005550010", "twiml_url": "https://x.example/twiml?a=1&b=2", "timeout": 20});
    let (status, body) = c.post("/call/make", Some(USER), call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "queued");
    assert!(body["sid"].as_str().unwrap().starts_with("CA"));
    let request = c.sim.journal_for(Provider::Twilio).pop().unwrap();
    assert!(request.path.ends_with("/Calls.json"));
    let fields: Vec<(String, String)> = serde_urlencoded::from_str(&request.body).unwrap();
    let field = |k: &str| {
        fields
            .iter()
            .filter(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(field("To"), ["+15005550010"]);
    assert_eq!(field("From"), [FROM_NUMBER]);
    assert_eq!(field("Url"), ["https://x.example/twiml?a=1&b=2"]);
    assert_eq!(field("Timeout"), ["20"]);
    assert_eq!(
        field("StatusCallbackEvent"),
        ["initiated", "ringing", "answered", "completed"]
    );
    assert_eq!(
        c.logged(body["sid"].as_str().unwrap()).await["channel"],
        "voice"
    );
}

async fn provider_failures_are_502_with_the_providers_message(db: TestDb) {
    let c = start(db).await;
    let email = json!({"to": ["a@example.com"], "subject": "s", "text": "t"});
    for status in [400, 401, 429, 500] {
        c.sim.push_fault(
            Provider::Resend,
            Fault {
                message: Some(format!("refused with {status}")),
                ..Fault::status(status)
            },
        );
        let (code, body) = c.post("/email/send", Some(USER), email.clone()).await;
        assert_eq!(code, 502, "{body}");
        assert_eq!(
            body["detail"],
            format!("Email provider error: refused with {status}")
        );
    }
    // Twilio's own refusal of a magic number.
    let (code, body) = c
        .post(
            "/sms/send",
            Some(USER),
            json!({"to": "+15005550001", "body": "x"}),
        )
        .await;
    assert_eq!(code, 502);
    assert_eq!(
        body["detail"],
        "SMS provider error: The 'To' number +15005550001 is not a valid phone number."
    );
    // A provider that answers 200 with a body that is not its JSON.
    c.sim
        .push_fault(Provider::Resend, Fault::action(FaultAction::Malformed));
    let (code, body) = c.post("/email/send", Some(USER), email.clone()).await;
    assert_eq!(code, 502, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("Email provider error: unexpected answer"),
        "{body}"
    );
    // A provider that hangs past COMMS_TIMEOUT_SECONDS (2 s here).
    c.sim
        .push_fault(Provider::Twilio, Fault::action(FaultAction::Stall));
    let call = json!({"to": "+15005550010", "twiml_url": "https://x.example/t"});
    let (code, body) = c.post("/call/make", Some(USER), call).await;
    assert_eq!(code, 502);
    assert_eq!(
        body["detail"],
        "Voice provider error: no answer within 2 s (COMMS_TIMEOUT_SECONDS)"
    );
    // Failed sends are in the log with the provider's message.
    let (_, log) = c
        .get("/messages?channel=email&status=failed", Some(ADMIN))
        .await;
    assert_eq!(log["total"], 5);
    assert_eq!(log["messages"][1]["error"], "refused with 500");
    drop(c);
    // A host that cannot be reached.
    let closed = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let dead = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let c = start_with(TestDb::sqlite().await, true, |config, _| {
        config.resend_api_base = dead
    })
    .await;
    let (code, body) = c.post("/email/send", Some(USER), email).await;
    assert_eq!(code, 502);
    assert_eq!(
        body["detail"],
        "Email provider error: cannot connect to 127.0.0.1"
    );
}

async fn twilio_callbacks_move_the_log_forward_only(db: TestDb) {
    let c = start(db).await;
    let sid = c.send_sms("hello").await["sid"]
        .as_str()
        .unwrap()
        .to_owned();
    for status in ["sent", "delivered"] {
        let delivery = c.sim.twilio_status_callback(&sid, status).await.unwrap();
        assert_eq!(delivery.status, Some(200), "{status}");
        assert_eq!(c.logged(&sid).await["status"], status);
    }
    // A late "sent" and a replayed "delivered" change nothing.
    for status in ["sent", "delivered"] {
        let delivery = c.sim.twilio_status_callback(&sid, status).await.unwrap();
        assert_eq!(delivery.status, Some(200));
        assert_eq!(
            serde_json::from_str::<Value>(&delivery.response).unwrap()["applied"],
            false
        );
    }
    assert_eq!(c.logged(&sid).await["status"], "delivered");
    // A call through its lifecycle.
    let call = json!({"to": "+15005550010", "twiml_url": "https://x.example/t"});
    let (_, body) = c.post("/call/make", Some(USER), call).await;
    let call_sid = body["sid"].as_str().unwrap().to_owned();
    for status in ["ringing", "in-progress", "completed"] {
        c.sim
            .twilio_status_callback(&call_sid, status)
            .await
            .unwrap();
    }
    assert_eq!(c.logged(&call_sid).await["status"], "completed");
    // Signatures: wrong token, missing header, an unknown message.
    let url = c.server.url("/api/v1/comms/webhooks/twilio/status");
    let params = vec![
        ("MessageSid".to_owned(), sid.clone()),
        ("MessageStatus".to_owned(), "failed".to_owned()),
    ];
    let post = |signature: Option<String>, params: Vec<(String, String)>| {
        let mut req = c.server.client.post(&url).form(&params);
        if let Some(signature) = signature {
            req = req.header("x-twilio-signature", signature);
        }
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let wrong = provider_sim::signing::twilio("not-the-token", &url, &params);
    assert_eq!(
        post(Some(wrong), params.clone()).await,
        (403, json!({"detail": "Invalid signature"}))
    );
    assert_eq!(post(None, params.clone()).await.0, 403);
    let token = &c.sim.config().twilio_auth_token;
    let mut tampered = params.clone();
    let good = provider_sim::signing::twilio(token, &url, &params);
    tampered[1].1 = "undelivered".to_owned();
    assert_eq!(post(Some(good), tampered).await.0, 403);
    assert_eq!(c.logged(&sid).await["status"], "delivered");
    let unknown = vec![
        ("MessageSid".to_owned(), "SM0000".to_owned()),
        ("MessageStatus".to_owned(), "delivered".to_owned()),
    ];
    let signature = provider_sim::signing::twilio(token, &url, &unknown);
    assert_eq!(
        post(Some(signature), unknown).await,
        (200, json!({"applied": false}))
    );
}

async fn resend_events_move_the_log_forward_only(db: TestDb) {
    let c = start(db).await;
    let id = c.send_email().await;
    assert_eq!(
        c.resend_event("email.delivered", &id, 0, WEBHOOK_KEY).await,
        (200, json!({"applied": true}))
    );
    assert_eq!(c.logged(&id).await["status"], "delivered");
    // A replay, a late "sent", and a bounce after delivery change nothing; a complaint moves on.
    assert_eq!(
        c.resend_event("email.delivered", &id, 0, WEBHOOK_KEY)
            .await
            .1["applied"],
        false
    );
    assert_eq!(
        c.resend_event("email.sent", &id, 0, WEBHOOK_KEY).await.1["applied"],
        false
    );
    assert_eq!(
        c.resend_event("email.complained", &id, 0, WEBHOOK_KEY)
            .await
            .1["applied"],
        true
    );
    assert_eq!(c.logged(&id).await["status"], "complained");
    // The complaint suppressed the address (tests/http/suppressions.rs): an administrator lifts it.
    let lift = "/suppressions/a@example.com";
    assert_eq!(c.delete(lift, Some(ADMIN)).await.0, 200);
    // A bounce records the reason.
    let bounced = c.send_email().await;
    assert_eq!(
        c.resend_event("email.bounced", &bounced, 0, WEBHOOK_KEY)
            .await
            .1["applied"],
        true
    );
    let logged = c.logged(&bounced).await;
    assert_eq!(
        (logged["status"].as_str(), logged["error"].as_str()),
        (Some("bounced"), Some("Mailbox does not exist"))
    );
    assert_eq!(c.delete(lift, Some(ADMIN)).await.0, 200);
    // Stale, wrongly signed and unsigned events: 403, nothing changed.
    let fresh = c.send_email().await;
    let (status, body) = c
        .resend_event("email.delivered", &fresh, 301, WEBHOOK_KEY)
        .await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (403, Some("Invalid signature"))
    );
    assert_eq!(
        c.resend_event("email.delivered", &fresh, 0, b"another key")
            .await
            .0,
        403
    );
    let res = c
        .server
        .client
        .post(c.server.url("/api/v1/comms/webhooks/resend"))
        .json(&json!({"type": "email.delivered", "data": {"email_id": fresh}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
    assert_eq!(c.logged(&fresh).await["status"], "sent");
    // An unknown email and an untracked kind: 200, nothing changed.
    assert_eq!(
        c.resend_event("email.delivered", "unknown", 0, WEBHOOK_KEY)
            .await,
        (200, json!({"applied": false}))
    );
    assert_eq!(
        c.resend_event("email.opened", &fresh, 0, WEBHOOK_KEY).await,
        (200, json!({"applied": false}))
    );
}

async fn sends_need_an_active_user_and_the_log_is_per_user(db: TestDb) {
    let c = start(db).await;
    let email = json!({"to": ["a@example.com"], "subject": "s", "text": "t"});
    let (status, body) = c.post("/email/send", None, email.clone()).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (401, Some("Not authenticated"))
    );
    let (status, body) = c
        .post(
            "/sms/send",
            Some(INACTIVE),
            json!({"to": "+15005550010", "body": "x"}),
        )
        .await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (401, Some("Inactive user"))
    );
    // Refused before the body is read: a malformed body still answers 401.
    let res = c
        .server
        .client
        .post(c.server.url("/api/v1/comms/call/make"))
        .header("content-type", "application/json")
        .body("{\"to\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    assert!(c.sim.journal().is_empty());
    let mine = c.send_email().await;
    let (_, log) = c.get("/messages", Some(USER)).await;
    assert_eq!(log["total"], 1);
    let id = log["messages"][0]["id"].as_i64().unwrap();
    assert_eq!(log["messages"][0]["provider_id"], mine);
    assert_eq!(c.get(&format!("/messages/{id}"), Some(USER)).await.0, 200);
    let (status, body) = c.get(&format!("/messages/{id}"), Some(OTHER)).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (404, Some("Message not found"))
    );
    assert_eq!(c.get("/messages", Some(OTHER)).await.1["total"], 0);
    assert_eq!(c.get(&format!("/messages/{id}"), Some(ADMIN)).await.0, 200);
    assert_eq!(c.get("/messages", None).await.0, 401);
    assert_eq!(c.get("/messages?channel=fax", Some(USER)).await.0, 400);
    // A filter value that is no status (a NUL byte included) is refused before any query.
    for status in ["bogus", "%00"] {
        let (code, body) = c
            .get(&format!("/messages?status={status}"), Some(USER))
            .await;
        assert_eq!(code, 400, "{body}");
    }
}

async fn health_status_and_version_follow_the_contract(db: TestDb) {
    let c = start_with(db, true, |config, _| {
        config.twilio_account_sid = None;
        config.twilio_phone_number = None;
    })
    .await;
    let (status, health) = c.get("/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(health["service"], "communications");
    assert_eq!(health["status"], "healthy");
    assert_eq!(
        health["channels"]["email"],
        json!({"configured": true, "provider": "resend", "errors": []})
    );
    assert_eq!(
        health["channels"]["sms"]["errors"],
        json!([
            "TWILIO_ACCOUNT_SID is not set",
            "TWILIO_PHONE_NUMBER is not set"
        ])
    );
    assert_eq!(health["total_errors"], 4);
    let (_, status_body) = c.get("/status", None).await;
    assert_eq!(
        status_body["email"],
        json!({"configured": true, "api_key_set": true, "from_email_set": true, "from_email": "Keel <noreply@example.com>"})
    );
    assert_eq!(status_body["sms"]["auth_token_set"], true);
    assert_eq!(status_body["voice"]["phone_number_set"], false);
    let text = status_body.to_string();
    assert!(
        !text.contains(&c.sim.config().resend_api_key)
            && !text.contains(&c.sim.config().twilio_auth_token)
    );
    let (_, version) = c.get("/version", None).await;
    assert_eq!(version["version"], "1.0");
    assert!(
        version["features"]
            .as_array()
            .unwrap()
            .contains(&json!("webhook_handlers"))
    );
    assert_eq!(
        version["providers"],
        json!({"email": "resend", "sms": "twilio", "voice": "twilio"})
    );
    assert!(
        version["endpoints"]
            .as_array()
            .unwrap()
            .contains(&json!("POST /comms/email/send"))
    );
}

/// The simulator's own, independently signed deliveries (Svix for Resend, Twilio's HMAC-SHA1)
/// pass the module's verification and walk the log to `delivered`.
async fn the_simulators_own_deliveries_are_accepted(db: TestDb) {
    let c = start_sim(db, true, true, |_, _| {}).await;
    let email = c.send_email().await;
    let sms = c.send_sms("hello").await["sid"]
        .as_str()
        .unwrap()
        .to_owned();
    for id in [email, sms] {
        let mut status = Value::Null;
        for _ in 0..200 {
            status = c.logged(&id).await["status"].clone();
            if status == "delivered" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(status, "delivered", "{id}: {:?}", c.sim.deliveries());
    }
}

/// With `TWILIO_MESSAGING_SERVICE_SID` and no number, SMS go through the service (no `From`).
async fn a_messaging_service_stands_in_for_the_number(db: TestDb) {
    let c = start_with(db, true, |config, _| {
        config.twilio_phone_number = None;
        config.twilio_messaging_service_sid = Some("MG00000000000000000000000000000001".into());
    })
    .await;
    c.send_sms("via the service").await;
    let request = c.sim.journal_for(Provider::Twilio).pop().unwrap();
    let fields: Vec<(String, String)> = serde_urlencoded::from_str(&request.body).unwrap();
    let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        names.contains(&"MessagingServiceSid") && !names.contains(&"From"),
        "{names:?}"
    );
    // Calls still need the number.
    let call = json!({"to": "+15005550010", "twiml_url": "https://x.example/t"});
    let (status, body) = c.post("/call/make", Some(USER), call).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            503,
            Some("Voice not configured: TWILIO_PHONE_NUMBER is not set")
        )
    );
}
