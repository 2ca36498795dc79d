//! A client that resets its connection while its first checkout creates its Stripe customer: the
//! customer is still stored and the session created (the module's service is wrapped in `Detached`
//! when it is built, so each call is a unit of work that a dropped request does not cut off between
//! a Stripe call and its record), so the next checkout finds it: one customer, never two.

use kernel::testing::{eventually, reset_mid_request};
use provider_sim::{Fault, Provider};

use super::*;

kernel::backend_tests! {
    a_checkout_whose_client_left_stores_its_customer_once,
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
