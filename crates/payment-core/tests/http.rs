//! The payment module over real HTTP against `provider-sim` (Stripe), on both backends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use kernel::identity::AuthFailure;
use kernel::module::{BuildModule, Deps};
use kernel::testing::{TestDb, TestServer, spawn_modules_on};
use kernel::{Authenticator, Principal, Role};
use payment_core::{PaymentConfig, PaymentModule};
use provider_sim::{DeliveryOptions, Outcome, ProviderSim, SimConfig, SimHandle};
use serde_json::{Value, json};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

struct StubAuthenticator;

#[async_trait::async_trait]
impl Authenticator for StubAuthenticator {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let user = |user_id, email: &str| Principal {
            user_id,
            email: email.to_owned(),
            full_name: None,
            role: Role::User,
            is_active: true,
        };
        match token {
            ALICE => Ok(user(1, "alice@example.com")),
            BOB => Ok(user(2, "bob@example.com")),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

struct Ctx {
    server: TestServer,
    sim: SimHandle,
}

async fn start(db: &TestDb, adjust: impl FnOnce(&mut PaymentConfig)) -> Ctx {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let sim = ProviderSim::start(SimConfig {
        webhook_url: Some(format!("{base}/api/v1/payment/webhook")),
        ..SimConfig::default()
    })
    .unwrap();
    let mut config = PaymentConfig {
        secret_key: Some(sim.config().stripe_secret_key.clone()),
        webhook_secret: Some(sim.config().stripe_webhook_secret.clone()),
        api_base: sim.base_url().to_owned(),
        public_base_url: base,
        timeout: Duration::from_secs(3),
        ..PaymentConfig::default()
    };
    adjust(&mut config);
    let pool = db.migrated_pool(&[payment_core::MIGRATIONS]).await;
    let deps = Deps::new(pool)
        .unwrap()
        .with_authenticator(Arc::new(StubAuthenticator));
    let module = Arc::new(PaymentModule::build(config, &deps).await.unwrap());
    Ctx {
        server: spawn_modules_on(vec![module], listener),
        sim,
    }
}

impl Ctx {
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = self.server.url(&format!("/api/v1/payment{path}"));
        let mut req = match method {
            "GET" => self.server.client.get(url),
            _ => self.server.client.post(url),
        };
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Checks out and pays on the simulator's page; the session id.
    async fn pay(&self, token: &str, mode: &str, price: &str) -> String {
        let (status, body) = self
            .call(
                "POST",
                "/checkout",
                Some(token),
                Some(json!({"price_id": price, "mode": mode})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["provider_key"], "stripe");
        let session = body["session_id"].as_str().unwrap().to_owned();
        let deliveries = self
            .sim
            .complete_checkout(&session, Outcome::Pay)
            .await
            .unwrap();
        assert!(
            deliveries.iter().all(|d| d.status == Some(200)),
            "{deliveries:?}"
        );
        session
    }
}

kernel::backend_tests! {
    a_paid_checkout_is_the_payers_transaction_only,
    refunds_follow_the_contract,
    a_subscription_is_created_paid_and_cancelled,
    webhook_deliveries_are_verified_and_processed_once,
    out_of_order_and_repeated_events_end_in_the_same_rows,
}

async fn a_paid_checkout_is_the_payers_transaction_only(db: TestDb) {
    let c = start(&db, |_| {}).await;
    assert_eq!(
        c.call("POST", "/checkout", None, Some(json!({}))).await.0,
        401
    );
    let (status, body) = c
        .call(
            "POST",
            "/checkout",
            Some(ALICE),
            Some(json!({"price_id": "price_one_time", "mode": "rent"})),
        )
        .await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (422, Some("mode must be payment or subscription"))
    );
    c.pay(ALICE, "payment", "price_one_time").await;
    let (status, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 1, "{list}");
    let tx = &list["transactions"][0];
    assert_eq!(
        (
            tx["type"].as_str(),
            tx["status"].as_str(),
            tx["amount"].as_i64()
        ),
        (Some("charge"), Some("succeeded"), Some(2000))
    );
    let id = tx["id"].as_i64().unwrap();
    assert_eq!(
        c.call("GET", &format!("/transactions/{id}"), Some(ALICE), None)
            .await
            .0,
        200
    );
    // Bob sees nothing of it, on every route.
    assert_eq!(
        c.call("GET", "/transactions", Some(BOB), None).await.1["total"],
        0
    );
    let (status, body) = c
        .call("GET", &format!("/transactions/{id}"), Some(BOB), None)
        .await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (404, Some("Transaction not found"))
    );
    assert_eq!(
        c.call("POST", &format!("/refund/{id}"), Some(BOB), None)
            .await
            .0,
        404
    );
    // A second checkout reuses Alice's Stripe customer.
    c.pay(ALICE, "payment", "price_one_time").await;
    let customers: Vec<_> = c
        .sim
        .journal()
        .into_iter()
        .filter(|e| e.path == "/v1/customers" && e.method == "POST")
        .collect();
    assert_eq!(customers.len(), 1);
    let (_, status_body) = c.call("GET", "/status", None, None).await;
    assert_eq!(status_body["total_transactions"], 2);
    assert_eq!(status_body["total_revenue_cents"], 4000);
    assert_eq!(status_body["is_test_mode"], true);
    // The built-in pages, with what they echo escaped.
    let page = c
        .server
        .client
        .get(c.server.url("/payment/success?session_id=%3Cscript%3E"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"));
}

async fn refunds_follow_the_contract(db: TestDb) {
    let c = start(&db, |_| {}).await;
    c.pay(ALICE, "payment", "price_one_time").await;
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    let id = list["transactions"][0]["id"].as_i64().unwrap();
    let path = format!("/refund/{id}");
    let refund = |amount: Option<i64>| {
        let body = json!({"amount": amount, "reason": "customer changed their mind"});
        c.call("POST", &path, Some(ALICE), Some(body))
    };
    let (status, body) = refund(Some(2001)).await;
    assert_eq!(status, 422, "{body}");
    let (status, partial) = refund(Some(500)).await;
    assert_eq!(status, 200, "{partial}");
    assert_eq!(
        (partial["type"].as_str(), partial["amount"].as_i64()),
        (Some("refund"), Some(500))
    );
    assert_eq!(partial["description"], "customer changed their mind");
    let (_, original) = c
        .call("GET", &format!("/transactions/{id}"), Some(ALICE), None)
        .await;
    assert_eq!(original["status"], "partially_refunded");
    let (status, rest) = refund(None).await;
    assert_eq!((status, rest["amount"].as_i64()), (200, Some(1500)));
    let (_, original) = c
        .call("GET", &format!("/transactions/{id}"), Some(ALICE), None)
        .await;
    assert_eq!(original["status"], "refunded");
    let (status, body) = refund(None).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (409, Some("Transaction already fully refunded"))
    );
    let refund_id = rest["id"].as_i64().unwrap();
    assert_eq!(
        c.call("POST", &format!("/refund/{refund_id}"), Some(ALICE), None)
            .await
            .0,
        400
    );
    // A free-text reason is not sent to Stripe.
    let sent: Vec<_> = c
        .sim
        .journal()
        .into_iter()
        .filter(|e| e.path == "/v1/refunds")
        .collect();
    assert!(sent.iter().all(|e| !e.body.contains("reason=")), "{sent:?}");
}

async fn a_subscription_is_created_paid_and_cancelled(db: TestDb) {
    let c = start(&db, |_| {}).await;
    c.pay(ALICE, "subscription", "price_monthly").await;
    let (_, subs) = c.call("GET", "/subscriptions", Some(ALICE), None).await;
    assert_eq!(subs["total"], 1, "{subs}");
    let sub = &subs["subscriptions"][0];
    assert_eq!(
        (
            sub["status"].as_str(),
            sub["cancel_at_period_end"].as_bool()
        ),
        (Some("active"), Some(false))
    );
    assert_eq!(
        c.call("GET", "/subscriptions", Some(BOB), None).await.1["total"],
        0
    );
    let id = sub["id"].as_i64().unwrap();
    assert_eq!(
        c.call(
            "POST",
            &format!("/subscriptions/{id}/cancel"),
            Some(BOB),
            None
        )
        .await
        .0,
        404
    );
    let (status, cancelled) = c
        .call(
            "POST",
            &format!("/subscriptions/{id}/cancel"),
            Some(ALICE),
            None,
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(
        (
            cancelled["status"].as_str(),
            cancelled["cancel_at_period_end"].as_bool()
        ),
        (Some("active"), Some(true))
    );
    let (_, status_body) = c.call("GET", "/status", None, None).await;
    assert_eq!(status_body["active_subscriptions"], 1);
}

async fn webhook_deliveries_are_verified_and_processed_once(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let post = |body: &'static str, signature: Option<String>| {
        let mut req = c
            .server
            .client
            .post(c.server.url("/api/v1/payment/webhook"))
            .body(body);
        if let Some(signature) = signature {
            req = req.header("stripe-signature", signature);
        }
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let secret = c.sim.config().stripe_webhook_secret.clone();
    let now = chrono::Utc::now().timestamp();
    let body =
        r#"{"id": "evt_1", "type": "customer.created", "created": 1, "data": {"object": {}}}"#;
    let invalid = json!({"detail": "Invalid payload"});
    assert_eq!(post(body, None).await, (400, invalid.clone()));
    let wrong = provider_sim::signing::stripe_header("whsec_other", now, body.as_bytes());
    assert_eq!(post(body, Some(wrong)).await, (400, invalid.clone()));
    let stale = provider_sim::signing::stripe_header(&secret, now - 301, body.as_bytes());
    assert_eq!(post(body, Some(stale)).await, (400, invalid.clone()));
    let signed_other = provider_sim::signing::stripe_header(&secret, now, b"{}");
    assert_eq!(post(body, Some(signed_other)).await, (400, invalid.clone()));
    let not_json = "not json";
    let signature = provider_sim::signing::stripe_header(&secret, now, not_json.as_bytes());
    assert_eq!(post(not_json, Some(signature)).await, (400, invalid));
    let good = provider_sim::signing::stripe_header(&secret, now, body.as_bytes());
    let (status, answer) = post(body, Some(good.clone())).await;
    assert_eq!(
        (status, answer),
        (
            200,
            json!({"status": "processed", "event_type": "customer.created"})
        )
    );
    let (_, again) = post(body, Some(good)).await;
    assert_eq!(again["duplicate"], true);
}

/// The final rows of a run of events, as the admin-free (open) view sees them.
async fn rows(c: &Ctx) -> Value {
    let (_, t) = c
        .call("GET", "/transactions?page_size=100", Some(ALICE), None)
        .await;
    let mut tx: Vec<Value> = t["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            json!([
                t["provider_transaction_id"],
                t["type"],
                t["status"],
                t["amount"]
            ])
        })
        .collect();
    tx.sort_by_key(|v| v.to_string());
    json!(tx)
}

async fn out_of_order_and_repeated_events_end_in_the_same_rows(db: TestDb) {
    // In order: pay, refund part through the API, then Stripe's charge.refunded.
    let c = start(&db, |_| {}).await;
    c.pay(ALICE, "payment", "price_one_time").await;
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    let id = list["transactions"][0]["id"].as_i64().unwrap();
    let (status, _) = c
        .call(
            "POST",
            &format!("/refund/{id}"),
            Some(ALICE),
            Some(json!({"amount": 700})),
        )
        .await;
    assert_eq!(status, 200);
    let pi = list["transactions"][0]["provider_transaction_id"]
        .as_str()
        .unwrap();
    let charge_id = c.sim.stripe_object(pi).unwrap()["latest_charge"].clone();
    let charge = c.sim.stripe_object(charge_id.as_str().unwrap()).unwrap();
    let refunded = json!({
        "id": "evt_refunded_1", "object": "event", "type": "charge.refunded",
        "created": chrono::Utc::now().timestamp(), "data": {"object": charge},
    });
    let delivered = c
        .sim
        .deliver_built_stripe_events(vec![refunded], &DeliveryOptions::default())
        .await;
    assert_eq!(delivered[0].status, Some(200), "{delivered:?}");
    let in_order = rows(&c).await;
    assert_eq!(in_order.as_array().unwrap().len(), 2, "{in_order}");
    // The same events told to a second server last first, each twice: the same charge, and the
    // refund (made through the first server's API) known from Stripe's event.
    let events: Vec<Value> = c
        .sim
        .deliveries()
        .into_iter()
        .filter(|d| d.url.ends_with("/payment/webhook"))
        .map(|d| serde_json::from_str(&d.body).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"charge.refunded"), "{kinds:?}");
    let other_db = TestDb::sqlite().await;
    let d = start(&other_db, |_| {}).await;
    let options = DeliveryOptions {
        out_of_order: true,
        duplicate: true,
        url: Some(d.server.url("/api/v1/payment/webhook")),
        ..DeliveryOptions::default()
    };
    let deliveries = c.sim.deliver_built_stripe_events(events, &options).await;
    assert!(
        deliveries.iter().all(|d| d.status == Some(200)),
        "{deliveries:?}"
    );
    let charges = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .filter(|r| r[1] == "charge")
            .cloned()
            .collect::<Vec<_>>()
    };
    let replayed = rows(&d).await;
    assert_eq!(
        charges(&replayed),
        charges(&in_order),
        "{replayed} vs {in_order}"
    );
}
