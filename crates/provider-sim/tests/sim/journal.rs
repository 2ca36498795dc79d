//! Journal and control API.

use super::*;

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
    assert_eq!(
        outbox,
        json!({"emails": [], "sms": [], "calls": [], "opted_out": []})
    );
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
