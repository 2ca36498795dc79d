//! The Stripe client against `provider-sim`: the exact requests it sends (form fields, bearer key,
//! idempotency keys) and how every kind of failure comes back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use payment_core::stripe::{
    CheckoutParams, CheckoutSession, Refund, RefundParams, Stripe, StripeError,
};
use provider_sim::{
    Fault, FaultAction, JournalEntry, Outcome, Provider, ProviderSim, SimConfig, SimHandle,
};

const SUCCESS_URL: &str = "http://app.test/payment/success?session_id={CHECKOUT_SESSION_ID}";
const CANCEL_URL: &str = "http://app.test/payment/cancel";

fn start() -> SimHandle {
    ProviderSim::start(SimConfig::default()).unwrap()
}

fn http() -> kernel::http_client::HttpClient {
    kernel::http_client::HttpClientSettings::default()
        .build()
        .unwrap()
}

fn stripe_with(sim: &SimHandle, key: &str, timeout: Duration) -> Stripe {
    Stripe::new(http(), sim.base_url(), key, timeout)
}

fn stripe(sim: &SimHandle) -> Stripe {
    stripe_with(
        sim,
        &sim.config().stripe_secret_key,
        Duration::from_secs(10),
    )
}

fn checkout(mode: &str, price_id: &str, quantity: i64, user_id: Option<i64>) -> CheckoutParams {
    CheckoutParams {
        mode: mode.to_owned(),
        price_id: price_id.to_owned(),
        quantity,
        success_url: SUCCESS_URL.to_owned(),
        cancel_url: CANCEL_URL.to_owned(),
        customer: None,
        client_reference_id: user_id.map(|u| u.to_string()),
        user_id,
    }
}

/// The one Stripe request journaled since the last clear.
fn only_request(sim: &SimHandle) -> JournalEntry {
    let mut journal = sim.journal_for(Provider::Stripe);
    assert_eq!(journal.len(), 1, "{journal:?}");
    journal.remove(0)
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn assert_post(entry: &JournalEntry, sim: &SimHandle, path: &str, idempotency_key: &str) {
    assert_eq!(entry.method, "POST");
    assert_eq!(entry.path, path);
    assert_eq!(
        entry.header("authorization"),
        Some(format!("Bearer {}", sim.config().stripe_secret_key).as_str())
    );
    assert_eq!(entry.header("idempotency-key"), Some(idempotency_key));
    assert_eq!(
        entry.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
}

/// A paid one-time checkout of `quantity` x 20.00 USD: (payment intent, charge).
async fn paid_checkout(sim: &SimHandle, stripe: &Stripe, quantity: i64) -> (String, String) {
    let session = stripe
        .create_checkout_session(
            &checkout("payment", "price_one_time", quantity, Some(42)),
            "checkout-paid",
        )
        .await
        .unwrap();
    sim.complete_checkout(&session.id, Outcome::Pay)
        .await
        .unwrap();
    let session = sim.stripe_object(&session.id).unwrap();
    let payment_intent = session["payment_intent"].as_str().unwrap().to_owned();
    let charge = sim.stripe_object(&payment_intent).unwrap()["latest_charge"]
        .as_str()
        .unwrap()
        .to_owned();
    (payment_intent, charge)
}

#[tokio::test]
async fn a_customer_is_created_with_its_user_in_the_metadata() {
    let sim = start();
    let stripe = stripe(&sim);
    let id = stripe
        .create_customer(Some("ann+pay@example.com"), Some(7), "customer-7")
        .await
        .unwrap();
    assert!(id.starts_with("cus_"), "{id}");

    let request = only_request(&sim);
    assert_post(&request, &sim, "/v1/customers", "customer-7");
    assert_eq!(
        request.form(),
        pairs(&[("email", "ann+pay@example.com"), ("metadata[user_id]", "7")])
    );
    // A `+` travels percent-encoded, never as a space.
    assert!(
        request.body.contains("ann%2Bpay%40example.com"),
        "{}",
        request.body
    );
    let customer = sim.stripe_object(&id).unwrap();
    assert_eq!(customer["email"], "ann+pay@example.com");
    assert_eq!(customer["metadata"]["user_id"], "7");

    // The same key and parameters replay the first answer.
    let again = stripe
        .create_customer(Some("ann+pay@example.com"), Some(7), "customer-7")
        .await
        .unwrap();
    assert_eq!(again, id);

    // Nothing to say: an empty form.
    sim.clear_journal();
    let bare = stripe
        .create_customer(None, None, "customer-bare")
        .await
        .unwrap();
    assert!(bare.starts_with("cus_") && bare != id);
    assert_eq!(only_request(&sim).body, "");
}

#[tokio::test]
async fn a_payment_checkout_sends_exactly_stripes_fields() {
    let sim = start();
    let stripe = stripe(&sim);
    let session = stripe
        .create_checkout_session(
            &checkout("payment", "price_one_time", 2, Some(42)),
            "checkout-1",
        )
        .await
        .unwrap();
    assert!(session.id.starts_with("cs_test_"), "{session:?}");
    assert_eq!(
        session,
        CheckoutSession {
            url: format!("{}/checkout/{}", sim.base_url(), session.id),
            id: session.id.clone(),
        }
    );

    let request = only_request(&sim);
    assert_post(&request, &sim, "/v1/checkout/sessions", "checkout-1");
    assert_eq!(
        request.form(),
        pairs(&[
            ("mode", "payment"),
            ("line_items[0][price]", "price_one_time"),
            ("line_items[0][quantity]", "2"),
            ("success_url", SUCCESS_URL),
            ("cancel_url", CANCEL_URL),
            ("client_reference_id", "42"),
            ("metadata[user_id]", "42"),
        ])
    );
    let stored = sim.stripe_object(&session.id).unwrap();
    assert_eq!(stored["mode"], "payment");
    assert_eq!(stored["status"], "open");
    assert_eq!(stored["amount_total"], 4000);
    assert_eq!(stored["client_reference_id"], "42");
    assert_eq!(stored["metadata"]["user_id"], "42");
    // Stripe fills the placeholder in itself: it arrives untouched.
    assert_eq!(stored["success_url"], SUCCESS_URL);
    assert_eq!(stored["cancel_url"], CANCEL_URL);

    // Without a user: no reference, no metadata.
    sim.clear_journal();
    stripe
        .create_checkout_session(
            &checkout("payment", "price_one_time", 1, None),
            "checkout-2",
        )
        .await
        .unwrap();
    assert_eq!(
        only_request(&sim).form(),
        pairs(&[
            ("mode", "payment"),
            ("line_items[0][price]", "price_one_time"),
            ("line_items[0][quantity]", "1"),
            ("success_url", SUCCESS_URL),
            ("cancel_url", CANCEL_URL),
        ])
    );
}

#[tokio::test]
async fn a_subscription_checkout_tags_the_subscription_with_the_user() {
    let sim = start();
    let stripe = stripe(&sim);
    let customer = stripe
        .create_customer(Some("sub@example.com"), Some(9), "customer-9")
        .await
        .unwrap();
    sim.clear_journal();
    let params = CheckoutParams {
        customer: Some(customer.clone()),
        ..checkout("subscription", "price_monthly", 1, Some(9))
    };
    let session = stripe
        .create_checkout_session(&params, "checkout-sub")
        .await
        .unwrap();

    let request = only_request(&sim);
    assert_post(&request, &sim, "/v1/checkout/sessions", "checkout-sub");
    assert_eq!(
        request.form(),
        pairs(&[
            ("mode", "subscription"),
            ("line_items[0][price]", "price_monthly"),
            ("line_items[0][quantity]", "1"),
            ("success_url", SUCCESS_URL),
            ("cancel_url", CANCEL_URL),
            ("customer", &customer),
            ("client_reference_id", "9"),
            ("metadata[user_id]", "9"),
            ("subscription_data[metadata][user_id]", "9"),
        ])
    );
    let stored = sim.stripe_object(&session.id).unwrap();
    assert_eq!(stored["mode"], "subscription");
    assert_eq!(stored["customer"], customer.as_str());

    sim.complete_checkout(&session.id, Outcome::Pay)
        .await
        .unwrap();
    let sub_id = sim.stripe_object(&session.id).unwrap()["subscription"]
        .as_str()
        .unwrap()
        .to_owned();
    let sub = sim.stripe_object(&sub_id).unwrap();
    assert_eq!(sub["status"], "active");
    assert_eq!(sub["customer"], customer.as_str());
    assert_eq!(sub["metadata"]["user_id"], "9");
}

#[tokio::test]
async fn cancel_at_period_end_keeps_the_subscription_active_until_then() {
    let sim = start();
    let stripe = stripe(&sim);
    let session = stripe
        .create_checkout_session(
            &checkout("subscription", "price_yearly", 1, Some(5)),
            "checkout-yearly",
        )
        .await
        .unwrap();
    sim.complete_checkout(&session.id, Outcome::Pay)
        .await
        .unwrap();
    let sub_id = sim.stripe_object(&session.id).unwrap()["subscription"]
        .as_str()
        .unwrap()
        .to_owned();
    sim.clear_journal();

    let sub = stripe
        .cancel_at_period_end(&sub_id, "cancel-1")
        .await
        .unwrap();
    assert_eq!(sub["id"], sub_id.as_str());
    assert_eq!(sub["object"], "subscription");
    assert_eq!(sub["status"], "active");
    assert_eq!(sub["cancel_at_period_end"], true);
    assert_eq!(
        sub["cancel_at"],
        sub["items"]["data"][0]["current_period_end"]
    );
    let request = only_request(&sim);
    assert_post(
        &request,
        &sim,
        &format!("/v1/subscriptions/{sub_id}"),
        "cancel-1",
    );
    assert_eq!(request.form(), pairs(&[("cancel_at_period_end", "true")]));
    assert_eq!(
        sim.stripe_object(&sub_id).unwrap()["cancel_at_period_end"],
        true
    );

    assert_eq!(
        stripe.cancel_at_period_end("sub_nope", "cancel-2").await,
        Err(StripeError::InvalidRequest(
            "No such subscription: 'sub_nope'".to_owned()
        ))
    );
}

#[tokio::test]
async fn refunds_go_partial_then_the_rest_and_never_past_the_amount() {
    let sim = start();
    let stripe = stripe(&sim);
    let (payment_intent, charge) = paid_checkout(&sim, &stripe, 2).await;
    sim.clear_journal();

    let refund = stripe
        .create_refund(
            &RefundParams {
                payment_intent: Some(payment_intent.clone()),
                charge: Some(charge.clone()),
                amount: Some(1500),
                reason: Some("requested_by_customer".to_owned()),
                metadata: vec![
                    ("transaction_id".to_owned(), "12".to_owned()),
                    ("note".to_owned(), "late delivery".to_owned()),
                ],
            },
            "refund-1",
        )
        .await
        .unwrap();
    assert!(refund.id.starts_with("re_"), "{refund:?}");
    assert_eq!(
        refund,
        Refund {
            id: refund.id.clone(),
            amount: 1500,
            currency: "usd".to_owned(),
            status: "succeeded".to_owned(),
            charge: Some(charge.clone()),
            payment_intent: Some(payment_intent.clone()),
        }
    );
    let request = only_request(&sim);
    assert_post(&request, &sim, "/v1/refunds", "refund-1");
    assert_eq!(
        request.form(),
        pairs(&[
            ("payment_intent", &payment_intent),
            ("amount", "1500"),
            ("reason", "requested_by_customer"),
            ("metadata[transaction_id]", "12"),
            ("metadata[note]", "late delivery"),
        ])
    );
    let stored = sim.stripe_object(&refund.id).unwrap();
    assert_eq!(stored["reason"], "requested_by_customer");
    assert_eq!(stored["metadata"]["transaction_id"], "12");

    // More than what is left: Stripe's own words.
    assert_eq!(
        stripe
            .create_refund(
                &RefundParams {
                    charge: Some(charge.clone()),
                    amount: Some(2501),
                    ..RefundParams::default()
                },
                "refund-2",
            )
            .await,
        Err(StripeError::InvalidRequest(
            "Refund amount ($25.01) is greater than unrefunded amount on charge ($25.00)"
                .to_owned()
        ))
    );

    // The rest, by charge, with nothing else said.
    sim.clear_journal();
    let rest = stripe
        .create_refund(
            &RefundParams {
                charge: Some(charge.clone()),
                ..RefundParams::default()
            },
            "refund-3",
        )
        .await
        .unwrap();
    assert_eq!(
        (rest.amount, rest.status.as_str(), rest.charge.as_deref()),
        (2500, "succeeded", Some(charge.as_str()))
    );
    assert_eq!(
        rest.payment_intent.as_deref(),
        Some(payment_intent.as_str())
    );
    assert_ne!(rest.id, refund.id);
    assert_eq!(only_request(&sim).form(), pairs(&[("charge", &charge)]));
    let charged = sim.stripe_object(&charge).unwrap();
    assert_eq!(charged["amount_refunded"], 4000);
    assert_eq!(charged["refunded"], true);

    assert_eq!(
        stripe
            .create_refund(
                &RefundParams {
                    payment_intent: Some(payment_intent.clone()),
                    amount: Some(1),
                    ..RefundParams::default()
                },
                "refund-4",
            )
            .await,
        Err(StripeError::InvalidRequest(format!(
            "Charge {charge} has already been refunded."
        )))
    );
    assert_eq!(
        stripe
            .create_refund(
                &RefundParams {
                    payment_intent: Some("pi_missing".to_owned()),
                    ..RefundParams::default()
                },
                "refund-5",
            )
            .await,
        Err(StripeError::InvalidRequest(
            "No such payment_intent: 'pi_missing'".to_owned()
        ))
    );
}

#[tokio::test]
async fn stripes_refusals_are_invalid_requests_with_its_message() {
    let sim = start();
    let stripe = stripe(&sim);
    assert_eq!(
        stripe
            .create_checkout_session(&checkout("payment", "price_nope", 1, Some(1)), "bad-price")
            .await,
        Err(StripeError::InvalidRequest(
            "No such price: 'price_nope'".to_owned()
        ))
    );
    let recurring = stripe
        .create_checkout_session(&checkout("payment", "price_monthly", 1, None), "recurring")
        .await;
    assert!(
        matches!(&recurring, Err(StripeError::InvalidRequest(m)) if m.contains("recurring price")),
        "{recurring:?}"
    );
    // An idempotency key reused with other parameters.
    stripe
        .create_customer(Some("a@example.com"), None, "reused")
        .await
        .unwrap();
    let reused = stripe
        .create_customer(Some("b@example.com"), None, "reused")
        .await;
    assert!(
        matches!(&reused, Err(StripeError::InvalidRequest(m))
            if m.starts_with("Keys for idempotent requests can only be used with the same parameters")),
        "{reused:?}"
    );
    // A declined card and an idempotency conflict, as Stripe words them.
    sim.push_fault(Provider::Stripe, Fault::status(402));
    assert_eq!(
        stripe.create_customer(None, None, "declined").await,
        Err(StripeError::InvalidRequest(
            "Your card was declined.".to_owned()
        ))
    );
    sim.push_fault(Provider::Stripe, Fault::status(409));
    let conflict = stripe.create_customer(None, None, "conflict").await;
    assert!(
        matches!(&conflict, Err(StripeError::InvalidRequest(m))
            if m.starts_with("There is currently another in-progress request")),
        "{conflict:?}"
    );
}

#[tokio::test]
async fn a_wrong_key_is_an_authentication_error() {
    let sim = start();
    let stripe = stripe_with(&sim, "sk_test_revoked9876", Duration::from_secs(10));
    let err = stripe
        .create_checkout_session(&checkout("payment", "price_one_time", 1, None), "k-1")
        .await
        .unwrap_err();
    let StripeError::Authentication(message) = &err else {
        panic!("{err:?}");
    };
    assert!(
        message.starts_with("Invalid API Key provided: sk_test_") && message.ends_with("9876"),
        "{message}"
    );
    assert!(!message.contains("revoked"), "the key is masked: {message}");
    assert_eq!(
        only_request(&sim).header("authorization"),
        Some("Bearer sk_test_revoked9876")
    );
    assert!(matches!(
        stripe.cancel_at_period_end("sub_1", "k-2").await,
        Err(StripeError::Authentication(_))
    ));
}

#[tokio::test]
async fn stripes_failures_and_limits_are_upstream_errors() {
    let sim = start();
    let stripe = stripe(&sim);
    sim.push_fault(Provider::Stripe, Fault::status(500));
    assert_eq!(
        stripe.create_customer(None, Some(1), "f-500").await,
        Err(StripeError::Upstream(
            "An unknown error occurred while processing your request.".to_owned()
        ))
    );
    sim.push_fault(
        Provider::Stripe,
        Fault::status(503).message("Stripe is down for maintenance."),
    );
    assert_eq!(
        stripe
            .create_refund(
                &RefundParams {
                    charge: Some("ch_1".to_owned()),
                    ..RefundParams::default()
                },
                "f-503"
            )
            .await,
        Err(StripeError::Upstream(
            "Stripe is down for maintenance.".to_owned()
        ))
    );
    sim.push_fault(Provider::Stripe, Fault::status(429));
    let limited = stripe.create_customer(None, None, "f-429").await;
    assert!(
        matches!(&limited, Err(StripeError::Upstream(m)) if m.starts_with("Request rate limit exceeded.")),
        "{limited:?}"
    );

    // A success that is not JSON.
    sim.push_fault(Provider::Stripe, Fault::action(FaultAction::Malformed));
    let malformed = stripe
        .create_checkout_session(&checkout("payment", "price_one_time", 1, None), "f-bad")
        .await;
    assert!(
        matches!(&malformed, Err(StripeError::Upstream(m))
            if m.starts_with("unexpected answer from Stripe (HTTP 200 OK): ")),
        "{malformed:?}"
    );
    sim.push_fault(Provider::Stripe, Fault::action(FaultAction::Truncate));
    let truncated = stripe.create_customer(None, None, "f-cut").await;
    assert!(
        matches!(&truncated, Err(StripeError::Upstream(m))
            if m.starts_with("unexpected answer from Stripe (HTTP 200 OK): ")),
        "{truncated:?}"
    );
    // An error answer cut short says only its status.
    sim.push_fault(Provider::Stripe, Fault::action(FaultAction::Truncate));
    assert_eq!(
        stripe.cancel_at_period_end("sub_x", "f-cut-404").await,
        Err(StripeError::Upstream(
            "Stripe answered HTTP 404 Not Found".to_owned()
        ))
    );
    // A connection closed without an answer.
    sim.push_fault(Provider::Stripe, Fault::action(FaultAction::Drop));
    let dropped = stripe.create_customer(None, None, "f-drop").await;
    assert!(
        matches!(&dropped, Err(StripeError::Upstream(m)) if m.starts_with("request failed: ")),
        "{dropped:?}"
    );

    // The simulator still answers normally afterwards.
    assert!(stripe.create_customer(None, None, "f-after").await.is_ok());
}

#[tokio::test]
async fn a_stalled_or_slow_answer_times_out_naming_the_setting() {
    let sim = start();
    let stripe = stripe_with(
        &sim,
        &sim.config().stripe_secret_key,
        Duration::from_millis(300),
    );
    let expected =
        StripeError::Upstream("no answer within 0.3 s (PAYMENT_TIMEOUT_SECONDS)".to_owned());
    // Half the body, then silence.
    sim.push_fault(Provider::Stripe, Fault::action(FaultAction::Stall));
    assert_eq!(
        stripe
            .create_checkout_session(&checkout("payment", "price_one_time", 1, None), "slow-1")
            .await,
        Err(expected.clone())
    );
    // No headers at all until long after the limit.
    sim.push_fault(Provider::Stripe, Fault::default().delay_ms(5_000));
    assert_eq!(
        stripe.create_customer(None, None, "slow-2").await,
        Err(expected)
    );
}

#[tokio::test]
async fn an_unreachable_host_is_an_upstream_error() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let stripe = Stripe::new(
        http(),
        &format!("http://127.0.0.1:{port}"),
        "sk_test_x",
        Duration::from_secs(5),
    );
    assert_eq!(
        stripe
            .create_customer(Some("a@example.com"), None, "k")
            .await,
        Err(StripeError::Upstream(
            "cannot connect to 127.0.0.1".to_owned()
        ))
    );
}

#[tokio::test]
async fn a_trailing_slash_on_the_base_is_ignored() {
    let sim = start();
    let stripe = Stripe::new(
        http(),
        &format!("{}/", sim.base_url()),
        &sim.config().stripe_secret_key,
        Duration::from_secs(10),
    );
    stripe.create_customer(None, None, "slash").await.unwrap();
    assert_eq!(only_request(&sim).path, "/v1/customers");
}
