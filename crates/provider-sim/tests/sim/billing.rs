//! Stripe's billing side: portal sessions and the page their URL opens, hosted invoice pages, and
//! a subscription's period ending (renewed, paid or failed, or ended when set to cancel).

use super::*;

/// A customer with a paid monthly subscription: (customer id, subscription id).
async fn subscribed(sim: &SimHandle) -> (String, String) {
    let (_, customer) = stripe_post(sim, "/v1/customers", "email=bill%40example.com").await;
    let customer = customer["id"].as_str().unwrap().to_owned();
    let form = format!(
        "mode=subscription&customer={customer}&line_items[0][price]=price_monthly\
         &subscription_data[metadata][user_id]=4"
    );
    let (_, session) = stripe_post(sim, "/v1/checkout/sessions", &form).await;
    sim.complete_checkout(session["id"].as_str().unwrap(), Outcome::Pay)
        .await
        .unwrap();
    let sub = session["id"].as_str().unwrap();
    let sub = sim.stripe_object(sub).unwrap()["subscription"]
        .as_str()
        .unwrap()
        .to_owned();
    (customer, sub)
}

#[tokio::test]
async fn stripe_portal_sessions_are_stripe_shaped_and_served() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let (customer, sub) = subscribed(&sim).await;
    let path = "/v1/billing_portal/sessions";
    let (status, missing) = stripe_post(&sim, path, "return_url=https%3A%2F%2Fa.example").await;
    assert_eq!(
        (status, missing["error"]["code"].as_str()),
        (400, Some("parameter_missing"))
    );
    let (status, unknown) = stripe_post(&sim, path, "customer=cus_nobody").await;
    assert_eq!(
        (status, unknown["error"]["code"].as_str()),
        (404, Some("resource_missing"))
    );
    let (status, bad_url) = stripe_post(
        &sim,
        path,
        &format!("customer={customer}&return_url=not%20a%20url"),
    )
    .await;
    assert_eq!(
        (
            status,
            bad_url["error"]["code"].as_str(),
            bad_url["error"]["param"].as_str()
        ),
        (400, Some("url_invalid"), Some("return_url"))
    );
    let (status, bad_config) = stripe_post(
        &sim,
        path,
        &format!("customer={customer}&configuration=bpc_x"),
    )
    .await;
    assert_eq!(
        (status, bad_config["error"]["message"].as_str()),
        (404, Some("No such configuration: 'bpc_x'"))
    );
    let (status, session) = stripe_post(
        &sim,
        path,
        &format!("customer={customer}&return_url=https%3A%2F%2Fapp.example%2Fback"),
    )
    .await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["object"], "billing_portal.session");
    assert_eq!(session["customer"], customer.as_str());
    assert_eq!(session["return_url"], "https://app.example/back");
    assert_eq!(session["livemode"], false);
    assert!(
        session["configuration"]
            .as_str()
            .unwrap()
            .starts_with("bpc_")
    );
    let url = session["url"].as_str().unwrap();
    // The page lists the subscription and the first invoice, and links back.
    let page = client()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&sub) && page.contains("-0001") && page.contains("https://app.example/back"),
        "{page}"
    );
    // Its cancel button cancels at the period's end and tells Keel.
    let before = receiver.hits().len();
    let res = client()
        .post(format!("{url}/cancel/{sub}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(
        sim.stripe_object(&sub).unwrap()["cancel_at_period_end"],
        true
    );
    let hits = receiver.hits();
    assert_eq!(kinds(&hits[before..]), ["customer.subscription.updated"]);
    // Another customer's subscription cannot be cancelled from this portal.
    let (other_customer, other_sub) = subscribed(&sim).await;
    assert_ne!(other_customer, customer);
    let res = client()
        .post(format!("{url}/cancel/{other_sub}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(
        sim.stripe_object(&other_sub).unwrap()["cancel_at_period_end"],
        false
    );
}

#[tokio::test]
async fn stripe_renewals_bill_the_next_period_or_end_the_subscription() {
    let receiver = Receiver::start(stripe_check);
    let sim = start_with(SimConfig {
        webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let (customer, sub) = subscribed(&sim).await;
    let period_end =
        sim.stripe_object(&sub).unwrap()["items"]["data"][0]["current_period_end"].clone();
    let before = receiver.hits().len();
    let deliveries = sim.renew_subscription(&sub, Outcome::Fail).await.unwrap();
    assert!(deliveries.iter().all(|d| d.accepted()));
    let hits = receiver.hits();
    assert_eq!(
        kinds(&hits[before..]),
        [
            "customer.subscription.updated",
            "invoice.finalized",
            "invoice.payment_failed"
        ]
    );
    let updated: Value = serde_json::from_str(&hits[before].body).unwrap();
    assert_eq!(updated["data"]["object"]["status"], "past_due");
    assert_eq!(
        updated["data"]["object"]["items"]["data"][0]["current_period_start"],
        period_end
    );
    let failed: Value = serde_json::from_str(&hits[before + 2].body).unwrap();
    let invoice = &failed["data"]["object"];
    assert_eq!(
        (
            invoice["status"].as_str(),
            invoice["amount_remaining"].as_i64(),
            invoice["attempted"].as_bool()
        ),
        (Some("open"), Some(1500), Some(true))
    );
    assert_eq!(invoice["customer"], customer.as_str());
    assert_eq!(invoice["billing_reason"], "subscription_cycle");
    assert!(invoice["number"].as_str().unwrap().ends_with("-0002"));
    assert_eq!(
        invoice["parent"]["subscription_details"]["subscription"],
        sub.as_str()
    );
    assert_eq!(
        invoice["parent"]["subscription_details"]["metadata"]["user_id"],
        "4"
    );
    // The hosted page and the PDF are served.
    let hosted = invoice["hosted_invoice_url"].as_str().unwrap();
    assert!(hosted.starts_with(sim.base_url()));
    let page = client()
        .get(hosted)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("open"), "{page}");
    let pdf = client()
        .get(invoice["invoice_pdf"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(pdf.headers()["content-type"], "application/pdf");
    assert!(pdf.bytes().await.unwrap().starts_with(b"%PDF-1.4"));
    // Paid next time: active again.
    sim.renew_subscription(&sub, Outcome::Pay).await.unwrap();
    assert_eq!(sim.stripe_object(&sub).unwrap()["status"], "active");
    let paid: Value = serde_json::from_str(&receiver.hits().last().unwrap().body).unwrap();
    assert_eq!(
        (
            paid["type"].as_str(),
            paid["data"]["object"]["amount_paid"].as_i64()
        ),
        (Some("invoice.paid"), Some(1500))
    );
    // Set to cancel at the period's end: the period ends with the subscription, unbilled.
    stripe_post(
        &sim,
        &format!("/v1/subscriptions/{sub}"),
        "cancel_at_period_end=true",
    )
    .await;
    let before = receiver.hits().len();
    sim.renew_subscription(&sub, Outcome::Pay).await.unwrap();
    assert_eq!(
        kinds(&receiver.hits()[before..]),
        ["customer.subscription.deleted"]
    );
    assert!(sim.renew_subscription(&sub, Outcome::Pay).await.is_err());
    // Through the control API too.
    let res = client()
        .post(sim.url("/_sim/stripe/subscriptions/sub_unknown/renew/pay"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
}
