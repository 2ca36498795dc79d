//! Stripe.

use super::*;

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
            "invoice.finalized",
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
    let finalized: Value = serde_json::from_str(&hits[1].body).unwrap();
    assert_eq!(finalized["data"]["object"]["status"], "open");
    let invoice: Value = serde_json::from_str(&hits[2].body).unwrap();
    assert_eq!(
        invoice["data"]["object"]["parent"]["subscription_details"]["subscription"],
        sub_id.as_str()
    );
    assert_eq!(invoice["data"]["object"]["status"], "paid");
    assert_eq!(invoice["data"]["object"]["amount_paid"], 1500);
    assert_eq!(
        invoice["data"]["object"]["id"],
        finalized["data"]["object"]["id"]
    );
    let completed: Value = serde_json::from_str(&hits[3].body).unwrap();
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
    assert_eq!(deliveries.len(), EVENT_TYPES.len() + 1);
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
