//! Twilio callbacks signed over the forms of the URL Twilio signs: with and without the scheme's
//! default port, with a query string, with a SharedKey (HMAC-SHA256), with a JSON body.

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use kernel::testing::TestDb;
use serde_json::{Value, json};

use provider_sim::Provider;

use super::{Ctx, start_with};

const PATH: &str = "/api/v1/comms/webhooks/twilio/status";
const SHARED_KEY_ID: &str = "webhooks_sharedkey_http";
const SHARED_KEY_SECRET: &str = "shared-key-secret-of-the-http-tests";
const SETTINGS: &str = "key=webhooks_sharedkey_http,algorithm=HMAC_SHA256";

kernel::backend_tests! {
    https_callbacks_signed_with_or_without_443_are_accepted,
    http_callbacks_signed_with_or_without_80_are_accepted,
}

/// Base64 HMAC-SHA256 over the URL and the sorted fields, as Twilio signs with a SharedKey.
fn sign_sha256(secret: &str, url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn fields(sid: &str, status: &str) -> Vec<(String, String)> {
    [
        ("MessageSid", sid),
        ("SmsSid", sid),
        ("MessageStatus", status),
        ("SmsStatus", status),
        ("To", "+15005550010"),
        ("ApiVersion", "2010-04-01"),
    ]
    .iter()
    .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
    .collect()
}

/// The module with `public` as `PUBLIC_BASE_URL` (it really listens on 127.0.0.1) and a
/// SharedKey. The simulator's own callbacks are held back, so only the tests' move the log.
async fn start_public(db: TestDb, public: &str) -> Ctx {
    start_with(db, true, |config, _| {
        config.public_base_url = Some(public.to_owned());
        config.twilio_webhook_shared_keys =
            vec![(SHARED_KEY_ID.to_owned(), SHARED_KEY_SECRET.to_owned())];
    })
    .await
}

impl Ctx {
    async fn twilio_callback(
        &self,
        query: &str,
        params: &[(String, String)],
        signature: &str,
        settings: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self
            .server
            .client
            .post(self.server.url(&format!("{PATH}{query}")))
            .form(params)
            .header("x-twilio-signature", signature);
        if let Some(settings) = settings {
            req = req.header("x-twilio-webhooks-signature-settings", settings);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    fn token(&self) -> String {
        self.sim.config().twilio_auth_token.clone()
    }
}

async fn https_callbacks_signed_with_or_without_443_are_accepted(db: TestDb) {
    let (configured, other) = ("https://keel.example", "https://keel.example:443");
    default_port_forms_are_accepted(db, configured, other, "https://keel.example:8443").await;
}

async fn http_callbacks_signed_with_or_without_80_are_accepted(db: TestDb) {
    let (configured, other) = ("http://keel.example", "http://keel.example:80");
    default_port_forms_are_accepted(db, configured, other, "http://keel.example:8080").await;
}

/// `configured` is `PUBLIC_BASE_URL`, `other` the same with the default port, `elsewhere` with
/// another port.
async fn default_port_forms_are_accepted(
    db: TestDb,
    configured: &str,
    other: &str,
    elsewhere: &str,
) {
    let c = start_public(db, configured).await;
    let sid = c.send_sms("hello").await["sid"]
        .as_str()
        .unwrap()
        .to_owned();
    // Sends ask for callbacks at the URL as configured.
    let request = c.sim.journal_for(Provider::Twilio).pop().unwrap();
    let sent_fields: Vec<(String, String)> = serde_urlencoded::from_str(&request.body).unwrap();
    assert!(
        sent_fields.contains(&("StatusCallback".to_owned(), format!("{configured}{PATH}"))),
        "{sent_fields:?}"
    );
    let applied = (200, json!({"applied": true}));
    let token = c.token();
    // `sent`, signed by the auth token over the other form.
    let sent = fields(&sid, "sent");
    let signature = provider_sim::signing::twilio(&token, &format!("{other}{PATH}"), &sent);
    assert_eq!(
        c.twilio_callback("", &sent, &signature, None).await,
        applied
    );
    assert_eq!(c.logged(&sid).await["status"], "sent");
    // Refused: a port that is not the default, another host, the query left out.
    let delivered = fields(&sid, "delivered");
    let query = "?attempt=2&name=%27Keel%27";
    let refused = (403, json!({"detail": "Invalid signature"}));
    for url in [
        format!("{elsewhere}{PATH}{query}"),
        format!("https://other.example{PATH}{query}"),
        format!("{other}{PATH}"),
    ] {
        let signature = provider_sim::signing::twilio(&token, &url, &delivered);
        assert_eq!(
            c.twilio_callback(query, &delivered, &signature, None).await,
            refused,
            "{url}"
        );
    }
    // `delivered`, signed by the SharedKey with HMAC-SHA256 over the other form and the query.
    let signature = sign_sha256(
        SHARED_KEY_SECRET,
        &format!("{other}{PATH}{query}"),
        &delivered,
    );
    assert_eq!(
        c.twilio_callback(query, &delivered, &signature, None).await,
        refused
    );
    assert_eq!(
        c.twilio_callback(query, &delivered, &signature, Some(SETTINGS))
            .await,
        applied
    );
    assert_eq!(c.logged(&sid).await["status"], "delivered");
    // A JSON body: the URL carries its SHA-256 and the signature covers the URL alone.
    let body = json!({"MessageSid": "SM0000", "MessageStatus": "delivered"}).to_string();
    let hash: String = <sha2::Sha256 as sha2::Digest>::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let query = format!("?bodySHA256={hash}");
    let signature = provider_sim::signing::twilio(&token, &format!("{other}{PATH}{query}"), &[]);
    let post_json = |body: String| {
        let req = c
            .server
            .client
            .post(c.server.url(&format!("{PATH}{query}")))
            .header("content-type", "application/json")
            .header("x-twilio-signature", &signature)
            .body(body);
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    assert_eq!(
        post_json(body.clone()).await,
        (200, json!({"applied": false}))
    );
    assert_eq!(post_json(body.replace("SM0000", "SM0001")).await, refused);
    assert_eq!(c.logged(&sid).await["status"], "delivered");
    // A shared-key header names a key the settings do not hold.
    let signature = sign_sha256(SHARED_KEY_SECRET, &format!("{configured}{PATH}"), &sent);
    let unknown_key = "key=webhooks_sharedkey_other,algorithm=HMAC_SHA256";
    assert_eq!(
        c.twilio_callback("", &sent, &signature, Some(unknown_key))
            .await,
        refused
    );
}
