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

mod access;
mod caching;
mod cancellation;
mod counts;
mod invoices;
mod plans;
mod portal;
mod stored_json;

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const ADMIN: &str = "admin-token";

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
            ADMIN => Ok(Principal {
                role: Role::Admin,
                ..user(3, "admin@example.com")
            }),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

struct Ctx {
    server: TestServer,
    sim: SimHandle,
    /// The plans the module lends the others (taken from its capabilities).
    entitlements: Arc<dyn kernel::plans::Entitlements>,
}

async fn start(db: &TestDb, adjust: impl FnOnce(&mut PaymentConfig)) -> Ctx {
    start_with(db, adjust, true).await
}

/// The module with the stub authenticator (`authenticated`), or open, as without the auth module.
async fn start_with(
    db: &TestDb,
    adjust: impl FnOnce(&mut PaymentConfig),
    authenticated: bool,
) -> Ctx {
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
    let mut deps = Deps::new(pool).unwrap();
    deps.read_cache = db.read_cache;
    if authenticated {
        deps = deps.with_authenticator(Arc::new(StubAuthenticator));
    }
    let module = Arc::new(PaymentModule::build(config, &deps).await.unwrap());
    let mut lent = kernel::capability::Capabilities::default();
    kernel::module::Module::provide(&*module, &mut lent);
    Ctx {
        entitlements: lent
            .get::<dyn kernel::plans::Entitlements>()
            .expect("payment lends entitlements"),
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
    disputes_and_fraud_warnings_follow_the_mapping,
    a_subscription_update_before_its_creation_keeps_the_newer_state,
    a_database_failure_mid_event_is_a_500_and_the_retry_succeeds,
    a_thousand_events_shuffled_and_repeated_end_as_in_order,
    concurrent_events_about_one_new_customer_all_succeed,
    return_urls_come_from_the_request_then_the_settings_then_the_pages,
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
    // Filters must name a known status (a NUL byte included), before any query runs.
    for path in [
        "/transactions?status=%00",
        "/subscriptions?status=bogus",
        "/disputes?status=%00",
    ] {
        let (status, body) = c.call("GET", path, Some(ALICE), None).await;
        assert_eq!(status, 422, "{path}: {body}");
    }
    let bad_reason = json!({"amount": 1, "reason": "a\u{0}b"});
    let path = format!("/refund/{id}");
    let (status, body) = c.call("POST", &path, Some(ALICE), Some(bad_reason)).await;
    assert_eq!(status, 422, "{body}");
    // A second checkout reuses Alice's Stripe customer.
    c.pay(ALICE, "payment", "price_one_time").await;
    let customers: Vec<_> = c
        .sim
        .journal()
        .into_iter()
        .filter(|e| e.path == "/v1/customers" && e.method == "POST")
        .collect();
    assert_eq!(customers.len(), 1);
    let (_, status_body) = c.call("GET", "/status", Some(ALICE), None).await;
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
    // A body that cannot be read is refused, never taken for "refund everything".
    for unreadable in [json!({"amount": "500"}), json!([500, "reason"])] {
        let (status, body) = c.call("POST", &path, Some(ALICE), Some(unreadable)).await;
        assert_eq!(status, 422, "{body}");
    }
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
    assert_counts_agree(&db).await;
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
    let (_, status_body) = c.call("GET", "/status", Some(ALICE), None).await;
    assert_eq!(status_body["active_subscriptions"], 1);
    // The first invoice's payment is a charge like any other: refundable against Stripe.
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    assert_eq!(list["total"], 1, "{list}");
    let charge = &list["transactions"][0];
    assert_eq!(
        (charge["status"].as_str(), charge["amount"].as_i64()),
        (Some("succeeded"), Some(1500))
    );
    assert!(
        charge["provider_transaction_id"]
            .as_str()
            .unwrap()
            .starts_with("pi_")
    );
    let id = charge["id"].as_i64().unwrap();
    let (status, refund) = c
        .call(
            "POST",
            &format!("/refund/{id}"),
            Some(ALICE),
            Some(json!({"amount": 500})),
        )
        .await;
    assert_eq!(status, 200, "{refund}");
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
    assert_eq!(
        post(not_json, Some(signature)).await,
        (400, invalid.clone())
    );
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
    // Signed, but holding a NUL no database text keeps: refused whole, nothing stored.
    for body in [
        r#"{"id": "evt_2", "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_2", "description": "a\u0000b", "metadata": {"user_id": "1"}}}}"#,
        r#"{"id": "evt_\u0000", "type": "customer.created", "data": {"object": {}}}"#,
        r#"{"id": "evt_3", "type": "customer.created", "data": {"object": {"a\u0000": 1}}}"#,
    ] {
        let signature = provider_sim::signing::stripe_header(&secret, now, body.as_bytes());
        assert_eq!(
            post(body, Some(signature)).await,
            (400, invalid.clone()),
            "{body}"
        );
    }
    assert_eq!(rows(&c).await, json!([]));
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

/// Posts `event` signed as Stripe signs it.
async fn send_event(c: &Ctx, event: Value) -> (u16, Value) {
    let body = event.to_string();
    let secret = c.sim.config().stripe_webhook_secret.clone();
    let signature = provider_sim::signing::stripe_header(
        &secret,
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    let res = c
        .server
        .client
        .post(c.server.url("/api/v1/payment/webhook"))
        .header("stripe-signature", signature)
        .body(body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

fn event(id: &str, kind: &str, created: i64, object: Value) -> Value {
    json!({"id": id, "object": "event", "type": kind, "created": created, "data": {"object": object}})
}

async fn disputes_and_fraud_warnings_follow_the_mapping(db: TestDb) {
    let c = start(&db, |_| {}).await;
    c.pay(ALICE, "payment", "price_one_time").await;
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    let tx = list["transactions"][0]["id"].as_i64().unwrap();
    let pi = list["transactions"][0]["provider_transaction_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let charge = c.sim.stripe_object(&pi).unwrap()["latest_charge"]
        .as_str()
        .unwrap()
        .to_owned();
    let warning = json!({"id": "issfr_1", "charge": charge, "payment_intent": pi,
                         "fraud_type": "made_with_stolen_card", "actionable": true});
    assert_eq!(
        send_event(
            &c,
            event("evt_w1", "radar.early_fraud_warning.created", 100, warning)
        )
        .await
        .0,
        200
    );
    let dispute = |status: &str| {
        json!({"id": "dp_1", "charge": charge, "amount": 2000, "currency": "usd",
               "reason": "fraudulent", "status": status, "evidence_details": {"due_by": 1_900_000_000}})
    };
    for (id, kind, created, status) in [
        (
            "evt_d1",
            "charge.dispute.created",
            200,
            "warning_needs_response",
        ),
        ("evt_d2", "charge.dispute.updated", 300, "needs_response"),
        // An older state delivered late changes nothing.
        ("evt_d3", "charge.dispute.updated", 250, "under_review"),
    ] {
        assert_eq!(
            send_event(&c, event(id, kind, created, dispute(status)))
                .await
                .0,
            200
        );
    }
    let (_, open) = c
        .call("GET", "/disputes?status=open", Some(ALICE), None)
        .await;
    let statuses: Vec<&str> = open["disputes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["needs_response", "warning_issued"], "{open}");
    let fraud = &open["disputes"][1];
    assert_eq!(
        (
            fraud["reason"].as_str(),
            fraud["transaction_id"].as_i64(),
            fraud["amount"].as_i64()
        ),
        (Some("made_with_stolen_card"), Some(tx), Some(2000))
    );
    send_event(
        &c,
        event("evt_d4", "charge.dispute.closed", 400, dispute("lost")),
    )
    .await;
    let warning_closed = json!({"id": "dp_2", "charge": charge, "amount": 500, "currency": "usd",
                                "reason": "general", "status": "warning_closed"});
    send_event(
        &c,
        event("evt_d5", "charge.dispute.closed", 500, warning_closed),
    )
    .await;
    let (_, all) = c.call("GET", "/disputes", Some(ALICE), None).await;
    let mut statuses: Vec<&str> = all["disputes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["lost", "warning_closed", "warning_issued"]);
    let lost = all["disputes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["status"] == "lost")
        .unwrap();
    assert_eq!(lost["event_type"], "charge.dispute.closed");
    let id = lost["id"].as_i64().unwrap();
    assert_eq!(
        c.call("GET", &format!("/disputes/{id}"), Some(ALICE), None)
            .await
            .0,
        200
    );
    assert_eq!(
        c.call("GET", &format!("/disputes/{id}"), Some(BOB), None)
            .await
            .0,
        404
    );
    assert_eq!(
        c.call("GET", "/disputes", Some(BOB), None).await.1["total"],
        0
    );
    // A dispute of an unknown charge is stored, linked to nothing.
    let orphan = json!({"id": "dp_3", "charge": "ch_unknown", "amount": 100, "currency": "usd",
                        "reason": "general", "status": "needs_response"});
    assert_eq!(
        send_event(&c, event("evt_d6", "charge.dispute.created", 600, orphan))
            .await
            .0,
        200
    );
}

async fn a_subscription_update_before_its_creation_keeps_the_newer_state(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let sub = |status: &str| {
        json!({"id": "sub_1", "customer": "cus_1", "status": status, "cancel_at_period_end": false,
               "metadata": {"user_id": "1"},
               "items": {"data": [{"current_period_start": 1_800_000_000, "current_period_end": 1_802_592_000,
                                   "price": {"id": "price_monthly", "nickname": "Monthly"}}]}})
    };
    assert_eq!(
        send_event(
            &c,
            event(
                "evt_s2",
                "customer.subscription.updated",
                200,
                sub("past_due")
            )
        )
        .await
        .0,
        200
    );
    assert_eq!(
        send_event(
            &c,
            event(
                "evt_s1",
                "customer.subscription.created",
                100,
                sub("active")
            )
        )
        .await
        .0,
        200
    );
    let (_, subs) = c.call("GET", "/subscriptions", Some(ALICE), None).await;
    assert_eq!(subs["total"], 1, "{subs}");
    assert_eq!(
        (
            subs["subscriptions"][0]["status"].as_str(),
            subs["subscriptions"][0]["plan_name"].as_str()
        ),
        (Some("past_due"), Some("Monthly"))
    );
    // Stripe statuses outside the six are mapped.
    send_event(
        &c,
        event(
            "evt_s3",
            "customer.subscription.updated",
            300,
            sub("paused"),
        ),
    )
    .await;
    assert_eq!(
        c.call("GET", "/subscriptions", Some(ALICE), None).await.1["subscriptions"][0]["status"],
        "unpaid"
    );
    send_event(
        &c,
        event(
            "evt_s4",
            "customer.subscription.deleted",
            400,
            sub("active"),
        ),
    )
    .await;
    assert_eq!(
        c.call("GET", "/subscriptions?status=canceled", Some(ALICE), None)
            .await
            .1["total"],
        1
    );
}

/// Runs `sql` on the test database.
async fn execute(db: &TestDb, sql: &str) {
    use kernel::diesel_async::SimpleAsyncConnection;
    let pool = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    kernel::with_conn!(&mut pooled.conn(), |c| c.batch_execute(sql).await).unwrap();
}

async fn a_database_failure_mid_event_is_a_500_and_the_retry_succeeds(db: TestDb) {
    let c = start(&db, |_| {}).await;
    // Inserting a transaction fails while `fail_next` holds a row.
    let trigger = match db.backend {
        kernel::db::Backend::Postgres => {
            "CREATE TABLE fail_next (x INT);
             CREATE FUNCTION fail_if_flagged() RETURNS trigger AS $$ BEGIN
               IF EXISTS (SELECT 1 FROM fail_next) THEN RAISE EXCEPTION 'injected failure'; END IF;
               RETURN NEW; END $$ LANGUAGE plpgsql;
             CREATE TRIGGER fail_insert BEFORE INSERT ON payment_transactions
               FOR EACH ROW EXECUTE FUNCTION fail_if_flagged();
             INSERT INTO fail_next VALUES (1);"
        }
        kernel::db::Backend::Sqlite => {
            "CREATE TABLE fail_next (x INT);
             CREATE TRIGGER fail_insert BEFORE INSERT ON payment_transactions
               WHEN EXISTS (SELECT 1 FROM fail_next) BEGIN SELECT RAISE(ABORT, 'injected failure'); END;
             INSERT INTO fail_next VALUES (1);"
        }
    };
    execute(&db, trigger).await;
    let paid = json!({"id": "pi_1", "amount": 1200, "currency": "usd", "customer": "cus_9",
                      "latest_charge": "ch_1", "metadata": {"user_id": "1"}});
    let delivery = event("evt_fail_1", "payment_intent.succeeded", 100, paid);
    let (status, body) = send_event(&c, delivery.clone()).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (500, Some("Internal server error"))
    );
    execute(&db, "DELETE FROM fail_next").await;
    // Stripe's retry: processed (not a duplicate), and the rows exist once.
    let (status, body) = send_event(&c, delivery.clone()).await;
    assert_eq!((status, body.get("duplicate")), (200, None), "{body}");
    assert_eq!(send_event(&c, delivery).await.1["duplicate"], true);
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["transactions"][0]["status"], "succeeded");
}

/// Checks that the counts the triggers keep (`payment_transaction_counts`, read by the lists'
/// totals) agree with the rows: every kept count is the rows' own, and no row is uncounted.
async fn assert_counts_agree(db: &TestDb) {
    #[derive(diesel::QueryableByName)]
    struct Mismatches {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        mismatches: i64,
    }
    const SQL: &str = "SELECT \
        (SELECT COUNT(*) FROM \
            (SELECT user_id, status, SUM(transactions) AS transactions \
             FROM payment_transaction_counts GROUP BY user_id, status) c \
         WHERE c.transactions <> (SELECT COUNT(*) FROM payment_transactions t \
             WHERE COALESCE(t.user_id, 0) = c.user_id AND t.status = c.status)) \
      + (SELECT COUNT(*) FROM payment_transactions t WHERE NOT EXISTS \
            (SELECT 1 FROM payment_transaction_counts c \
             WHERE c.user_id = COALESCE(t.user_id, 0) AND c.status = t.status)) \
        AS mismatches";
    let pool = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    let found = kernel::with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query(SQL).get_result::<Mismatches>(c).await
    })
    .unwrap();
    assert_eq!(
        found.mismatches, 0,
        "the kept counts disagree with the rows"
    );
}

/// Every row the caller can see, as sortable lines.
async fn snapshot(c: &Ctx) -> Vec<String> {
    let (_, t) = c
        .call(
            "GET",
            "/transactions?page_size=100&page=1",
            Some(ALICE),
            None,
        )
        .await;
    let (_, t2) = c
        .call(
            "GET",
            "/transactions?page_size=100&page=2",
            Some(ALICE),
            None,
        )
        .await;
    let (_, t3) = c
        .call(
            "GET",
            "/transactions?page_size=100&page=3",
            Some(ALICE),
            None,
        )
        .await;
    let mut rows: Vec<String> = [t, t2, t3]
        .iter()
        .flat_map(|p| p["transactions"].as_array().unwrap().clone())
        .map(|r| {
            format!(
                "{} {} {} {}",
                r["provider_transaction_id"], r["type"], r["status"], r["amount"]
            )
        })
        .collect();
    let (_, d) = c.call("GET", "/disputes", Some(ALICE), None).await;
    rows.extend(
        d["disputes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r["provider_dispute_id"], r["status"])),
    );
    let (_, s) = c.call("GET", "/subscriptions", Some(ALICE), None).await;
    rows.extend(
        s["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r["provider_subscription_id"], r["status"])),
    );
    rows.sort();
    rows
}

/// 1,000 events for 100 payments (intent succeeded, session completed, partial refunds, a dispute
/// opened and closed, subscription updates), delivered in order to one server and shuffled with
/// every event twice to another: the two end with the same rows.
async fn a_thousand_events_shuffled_and_repeated_end_as_in_order(db: TestDb) {
    let mut events = Vec::new();
    for n in 0..100 {
        let (pi, ch, cus) = (format!("pi_{n}"), format!("ch_{n}"), format!("cus_{n}"));
        let t = 1000 * n;
        events.push(event(&format!("evt_{n}_1"), "payment_intent.succeeded", t,
            json!({"id": pi, "amount": 1000, "currency": "usd", "customer": cus, "latest_charge": ch})));
        events.push(event(&format!("evt_{n}_2"), "checkout.session.completed", t + 1,
            json!({"id": format!("cs_{n}"), "mode": "payment", "payment_status": "paid", "payment_intent": pi,
                   "customer": cus, "client_reference_id": "1", "amount_total": 1000, "currency": "usd"})));
        for (i, refunded) in [(3, 300), (4, 1000)] {
            let refunds: Vec<Value> = (0..(i - 2))
                .map(|r| {
                    json!({"id": format!("re_{n}_{r}"),
                "amount": if r == 0 { 300 } else { 700 }, "currency": "usd", "status": "succeeded"})
                })
                .collect();
            events.push(event(
                &format!("evt_{n}_{i}"),
                "charge.refunded",
                t + i,
                json!({"id": ch, "payment_intent": pi, "amount": 1000, "amount_refunded": refunded,
                       "refunded": refunded == 1000, "currency": "usd", "customer": cus,
                       "refunds": {"data": refunds}}),
            ));
        }
        for (i, status) in [
            (5, "warning_needs_response"),
            (6, "needs_response"),
            (7, "won"),
        ] {
            events.push(event(
                &format!("evt_{n}_{i}"),
                "charge.dispute.updated",
                t + i,
                json!({"id": format!("dp_{n}"), "charge": ch, "amount": 1000, "currency": "usd",
                       "reason": "general", "status": status}),
            ));
        }
        for (i, status) in [(8, "trialing"), (9, "active"), (10, "past_due")] {
            events.push(event(&format!("evt_{n}_{i}"), "customer.subscription.updated", t + i,
                json!({"id": format!("sub_{n}"), "customer": cus, "status": status,
                       "metadata": {"user_id": "1"}, "items": {"data": [{"price": {"id": "price_monthly"}}]}})));
        }
    }
    assert_eq!(events.len(), 1000);
    let in_order = start(&db, |_| {}).await;
    for e in &events {
        assert_eq!(send_event(&in_order, e.clone()).await.0, 200);
    }
    let expected = snapshot(&in_order).await;
    assert_eq!(
        expected.len(),
        100 * 3 + 100 + 100,
        "charges, refunds, disputes, subscriptions"
    );
    let other_db = TestDb::sqlite().await;
    let shuffled = start(&other_db, |_| {}).await;
    // A fixed shuffle (a multiplicative step through the list), every event twice.
    let mut order: Vec<&Value> = (0..events.len())
        .map(|i| &events[(i * 617) % events.len()])
        .collect();
    order.extend(events.iter().rev());
    for e in order {
        assert_eq!(send_event(&shuffled, e.clone()).await.0, 200);
    }
    let got = snapshot(&shuffled).await;
    let missing: Vec<&String> = expected.iter().filter(|r| !got.contains(r)).collect();
    let extra: Vec<&String> = got.iter().filter(|r| !expected.contains(r)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    // The counts kept through every status change and late assignment agree with the rows.
    assert_counts_agree(&db).await;
    assert_counts_agree(&other_db).await;
}

/// `keel payment replay-webhooks` (through the module's command, in process): saved deliveries
/// with their signatures, hours old, are verified at the time they were signed and applied once;
/// a tampered one is refused; `--trust` takes bare events. Then `transactions --user` and `status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_events_are_replayed_from_a_file() {
    use kernel::Module as _;
    let db = TestDb::sqlite().await;
    let pool = db.migrated_pool(&[payment_core::MIGRATIONS]).await;
    let config = PaymentConfig {
        webhook_secret: Some("whsec_replay".into()),
        ..PaymentConfig::default()
    };
    let module = PaymentModule::build(config, &Deps::new(pool).unwrap())
        .await
        .unwrap();
    let old = chrono::Utc::now().timestamp() - 6 * 3600;
    let signed =
        |n: i64| {
            let body = event(&format!("evt_r{n}"), "payment_intent.succeeded", n,
            json!({"id": format!("pi_r{n}"), "amount": 500, "currency": "usd", "customer": "cus_r",
                   "metadata": {"user_id": "5"}}))
        .to_string();
            let signature =
                provider_sim::signing::stripe_header("whsec_replay", old, body.as_bytes());
            json!({"body": body, "signature": signature})
        };
    let dir = tempfile_dir();
    let file = dir.join("saved.json");
    let mut tampered = signed(3);
    tampered["body"] = json!(tampered["body"].as_str().unwrap().replace("500", "5"));
    std::fs::write(
        &file,
        json!([signed(1), signed(2), signed(1), tampered]).to_string(),
    )
    .unwrap();
    let replay = payment_core::cli::command().get_matches_from([
        "payment",
        "replay-webhooks",
        file.to_str().unwrap(),
    ]);
    let result = module.run_command("payment", &replay).await;
    assert_eq!(result, Err("1 entries were refused".to_owned()));
    let bare = dir.join("bare.json");
    let events: Vec<Value> = (10..13)
        .map(|n| event(&format!("evt_r{n}"), "payment_intent.succeeded", n,
            json!({"id": format!("pi_r{n}"), "amount": 700, "currency": "usd", "customer": "cus_r"})))
        .collect();
    std::fs::write(
        &bare,
        events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let trusted = payment_core::cli::command().get_matches_from([
        "payment",
        "replay-webhooks",
        bare.to_str().unwrap(),
        "--trust",
    ]);
    assert_eq!(module.run_command("payment", &trusted).await, Ok(()));
    let list = module
        .service()
        .transactions(
            payment_core::Caller::User(5),
            None,
            kernel::pagination::Page {
                page: 1,
                page_size: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(list.total, 5, "{list:?}");
    assert!(list.rows.iter().all(|r| r.status == "succeeded"));
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("keel-replay-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Sixteen events about one customer nobody has seen yet, delivered at once: each answers 200
/// (two that both insert the customer row conflict on its key; the loser is applied again).
async fn concurrent_events_about_one_new_customer_all_succeed(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let sends = (0..16).map(|n| {
        let paid = json!({"id": format!("pi_c{n}"), "amount": 100, "currency": "usd",
                          "customer": "cus_race", "metadata": {"user_id": "1"}});
        send_event(
            &c,
            event(&format!("evt_c{n}"), "payment_intent.succeeded", n, paid),
        )
    });
    let answers = futures_util::future::join_all(sends).await;
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    assert_eq!(
        c.call("GET", "/transactions", Some(ALICE), None).await.1["total"],
        16
    );
}

/// The form field `name` of the last checkout session created on the simulator.
fn sent_field(c: &Ctx, name: &str) -> Option<String> {
    let entry = c
        .sim
        .journal()
        .into_iter()
        .rev()
        .find(|e| e.path == "/v1/checkout/sessions")?;
    let fields: Vec<(String, String)> = serde_urlencoded::from_str(&entry.body).ok()?;
    fields.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

async fn return_urls_come_from_the_request_then_the_settings_then_the_pages(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let body = json!({"price_id": "price_one_time", "mode": "payment"});
    assert_eq!(
        c.call("POST", "/checkout", Some(ALICE), Some(body.clone()))
            .await
            .0,
        200
    );
    let success = sent_field(&c, "success_url").unwrap();
    assert_eq!(
        success,
        c.server
            .url("/payment/success?session_id={CHECKOUT_SESSION_ID}")
    );
    assert_eq!(
        sent_field(&c, "cancel_url").unwrap(),
        c.server.url("/payment/cancel")
    );
    drop(c);
    // A fresh database: the first server's Stripe customer lives only in the first simulator.
    let other_db = TestDb::sqlite().await;
    let c = start(&other_db, |config| {
        config.success_url = Some("https://shop.example/ok?s={CHECKOUT_SESSION_ID}".into());
        config.cancel_url = Some("https://shop.example/back".into());
    })
    .await;
    assert_eq!(
        c.call("POST", "/checkout", Some(ALICE), Some(body)).await.0,
        200
    );
    assert_eq!(
        sent_field(&c, "success_url").unwrap(),
        "https://shop.example/ok?s={CHECKOUT_SESSION_ID}"
    );
    assert_eq!(
        sent_field(&c, "cancel_url").unwrap(),
        "https://shop.example/back"
    );
    let own = json!({"price_id": "price_one_time", "mode": "payment",
                     "success_url": "https://app.example/done", "cancel_url": "https://app.example/no"});
    assert_eq!(
        c.call("POST", "/checkout", Some(ALICE), Some(own)).await.0,
        200
    );
    assert_eq!(
        sent_field(&c, "success_url").unwrap(),
        "https://app.example/done"
    );
    assert_eq!(
        sent_field(&c, "cancel_url").unwrap(),
        "https://app.example/no"
    );
}
