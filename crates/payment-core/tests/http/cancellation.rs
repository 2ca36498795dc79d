//! A client that resets its connection while its first checkout creates its Stripe customer: the
//! customer is still stored and the session created (the module's service is wrapped in `Detached`
//! when it is built, so each call is a unit of work that a dropped request does not cut off between
//! a Stripe call and its record), so the next checkout finds it: one customer, never two. And a
//! webhook delivery whose client left while its event waited in a batch: the event is applied
//! all the same, once.

use kernel::testing::{WriteLock, eventually, reset_mid_request};
use provider_sim::{Fault, Provider};

use super::*;

kernel::backend_tests! {
    a_checkout_whose_client_left_stores_its_customer_once,
    a_webhook_whose_client_left_is_applied_once,
}

/// Stripe requests so far to `path` (`/v1/customers`, `/v1/checkout/sessions`).
fn stripe_posts(c: &Ctx, path: &str) -> usize {
    c.sim
        .journal_for(Provider::Stripe)
        .iter()
        .filter(|e| e.method == "POST" && e.path.ends_with(path))
        .count()
}

async fn a_checkout_whose_client_left_stores_its_customer_once(db: TestDb) {
    let c = start(&db, |_| {}).await;
    // The first Stripe call of a user's first checkout creates the customer: slowly.
    c.sim.push_fault(
        Provider::Stripe,
        Fault {
            delay_ms: Some(1_000),
            ..Fault::default()
        },
    );
    let request = c
        .server
        .client
        .post(c.server.url("/api/v1/payment/checkout"))
        .bearer_auth(ALICE)
        .json(&json!({"price_id": "price_one_time", "mode": "payment"}));
    reset_mid_request(request, Duration::from_millis(300)).await;
    let finished = eventually(Duration::from_secs(10), || async {
        stripe_posts(&c, "/v1/checkout/sessions") == 1
    })
    .await;
    assert!(finished, "the checkout was dropped with its request");
    let (status, body) = c
        .call(
            "POST",
            "/checkout",
            Some(ALICE),
            Some(json!({"price_id": "price_one_time", "mode": "payment"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(stripe_posts(&c, "/v1/customers"), 1);
    assert_eq!(stripe_posts(&c, "/v1/checkout/sessions"), 2);
}

async fn a_webhook_whose_client_left_is_applied_once(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let paid = json!({"id": "pi_left", "amount": 700, "currency": "usd", "customer": "cus_left",
                      "metadata": {"user_id": "1"}});
    let delivery = event("evt_left", "payment_intent.succeeded", 1, paid);
    let body = delivery.to_string();
    let signature = provider_sim::signing::stripe_header(
        &c.sim.config().stripe_webhook_secret,
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    // The event's batch waits for the lock while its client resets the connection.
    let lock = WriteLock::take(&db.url, "payment_events").await;
    let request = c
        .server
        .client
        .post(c.server.url("/api/v1/payment/webhook"))
        .header("stripe-signature", signature)
        .body(body);
    reset_mid_request(request, Duration::from_millis(300)).await;
    lock.release().await;
    let applied = eventually(Duration::from_secs(10), || async {
        c.call("GET", "/transactions", Some(ALICE), None).await.1["total"] == 1
    })
    .await;
    assert!(applied, "the event was dropped with its request");
    // Stripe's retry of the delivery that got no answer: a duplicate, nothing applied twice.
    assert_eq!(send_event(&c, delivery).await.1["duplicate"], true);
    assert_eq!(
        c.call("GET", "/transactions", Some(ALICE), None).await.1["total"],
        1
    );
}
