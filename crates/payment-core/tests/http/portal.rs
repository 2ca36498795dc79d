//! `POST /payment/portal`: a Stripe billing portal session for the caller's own Stripe customer,
//! returning only to the deployment's own origins; Stripe's failures mapped like every other
//! Stripe call's.

use provider_sim::{Fault, FaultAction, JournalEntry, Provider};

use super::*;

kernel::backend_tests! {
    the_portal_opens_for_the_callers_customer_only,
    the_return_url_stays_on_the_deployments_origins,
    portal_failures_are_told_like_other_stripe_calls,
}

/// The billing portal sessions Stripe was asked for, oldest first.
fn portal_calls(c: &Ctx) -> Vec<JournalEntry> {
    c.sim
        .journal_for(Provider::Stripe)
        .into_iter()
        .filter(|e| e.method == "POST" && e.path == "/v1/billing_portal/sessions")
        .collect()
}

async fn the_portal_opens_for_the_callers_customer_only(db: TestDb) {
    let c = start(&db, |_| {}).await;
    assert_eq!(c.call("POST", "/portal", None, None).await.0, 401);
    // No checkout yet: no Stripe customer, nothing asked of Stripe.
    let (status, body) = c.call("POST", "/portal", Some(ALICE), None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("No billing account yet"),
        "{body}"
    );
    assert!(portal_calls(&c).is_empty());
    c.pay(ALICE, "subscription", "price_monthly").await;
    let (status, portal) = c.call("POST", "/portal", Some(ALICE), None).await;
    assert_eq!(status, 200, "{portal}");
    let url = portal["url"].as_str().unwrap();
    assert!(
        portal["id"].as_str().unwrap().starts_with("bps_"),
        "{portal}"
    );
    assert!(url.starts_with(&c.sim.url("/billing_portal/bps_")), "{url}");
    assert_eq!(portal["return_url"], c.server.url("/payment/return"));
    // Stripe was asked for Alice's customer, form-encoded, with an idempotency key.
    let calls = portal_calls(&c);
    assert_eq!(calls.len(), 1);
    let customer = calls[0].form_value("customer").unwrap();
    let subs = c.call("GET", "/subscriptions", Some(ALICE), None).await.1;
    let sub_id = subs["subscriptions"][0]["provider_subscription_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        c.sim.stripe_object(&sub_id).unwrap()["customer"],
        customer.as_str()
    );
    assert_eq!(
        calls[0].form_value("return_url").as_deref(),
        Some(c.server.url("/payment/return").as_str())
    );
    assert!(calls[0].header("idempotency-key").is_some());
    // The portal shows Alice's subscription, and its way back is the built-in page.
    let page = c.server.client.get(url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains(&sub_id));
    let back = c
        .server
        .client
        .get(c.server.url("/payment/return"))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    // Bob has no customer of his own: Alice's is never opened for him.
    let (status, _) = c.call("POST", "/portal", Some(BOB), None).await;
    assert_eq!(status, 409);
    assert_eq!(portal_calls(&c).len(), 1);
    // A body that cannot be read is refused, never taken for "use the default".
    for unreadable in [json!({"return_url": 5}), json!(["x"])] {
        let (status, body) = c
            .call("POST", "/portal", Some(ALICE), Some(unreadable))
            .await;
        assert_eq!(status, 422, "{body}");
    }
    // Each call opens a new session (the link is short-lived at Stripe).
    let (status, again) = c.call("POST", "/portal", Some(ALICE), None).await;
    assert_eq!(status, 200);
    assert_ne!(again["id"], portal["id"]);
}

async fn the_return_url_stays_on_the_deployments_origins(db: TestDb) {
    let c = start(&db, |config| {
        config.portal_return_url = Some("https://app.example.com/account/billing".into());
    })
    .await;
    c.pay(ALICE, "payment", "price_one_time").await;
    let (status, portal) = c.call("POST", "/portal", Some(ALICE), None).await;
    assert_eq!(status, 200, "{portal}");
    assert_eq!(
        portal["return_url"],
        "https://app.example.com/account/billing"
    );
    for allowed in [
        c.server.url("/settings?tab=billing"),
        "https://app.example.com/elsewhere#plans".to_owned(),
    ] {
        let (status, portal) = c
            .call(
                "POST",
                "/portal",
                Some(ALICE),
                Some(json!({"return_url": allowed})),
            )
            .await;
        assert_eq!(
            (status, portal["return_url"].as_str()),
            (200, Some(allowed.as_str()))
        );
        let sent = portal_calls(&c).last().unwrap().form_value("return_url");
        assert_eq!(sent.as_deref(), Some(allowed.as_str()));
    }
    let asked = portal_calls(&c).len();
    let host = c.server.url("").replace("http://", "");
    for refused in [
        "https://evil.example/".to_owned(),
        format!("https://{host}/"),
        format!("http://{host}.evil.example/"),
        format!("http://user@{host}/"),
        "//evil.example/x".to_owned(),
        "/relative".to_owned(),
        "javascript:alert(1)".to_owned(),
        "https://app.example.com:444/".to_owned(),
        c.server.url("/a\u{0}b"),
        c.server.url(&format!("/{}", "a".repeat(2100))),
        String::new(),
    ] {
        let (status, body) = c
            .call(
                "POST",
                "/portal",
                Some(ALICE),
                Some(json!({"return_url": refused})),
            )
            .await;
        assert_eq!(status, 422, "{refused}: {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("(PUBLIC_BASE_URL)")
                && detail.contains("https://app.example.com (PAYMENT_PORTAL_RETURN_URL)"),
            "{detail}"
        );
    }
    assert_eq!(
        portal_calls(&c).len(),
        asked,
        "a refused URL reached Stripe"
    );
}

async fn portal_failures_are_told_like_other_stripe_calls(db: TestDb) {
    let c = start(&db, |_| {}).await;
    c.pay(ALICE, "payment", "price_one_time").await;
    for (fault, status) in [
        (
            Fault {
                status: Some(500),
                ..Fault::default()
            },
            502,
        ),
        (
            Fault {
                action: FaultAction::Drop,
                ..Fault::default()
            },
            502,
        ),
        (
            Fault {
                status: Some(401),
                ..Fault::default()
            },
            401,
        ),
        (
            Fault {
                status: Some(400),
                code: Some("parameter_invalid".into()),
                message: Some("You can't create a portal session in test mode until you save your customer portal settings.".into()),
                ..Fault::default()
            },
            400,
        ),
    ] {
        c.sim.push_fault(Provider::Stripe, fault.clone());
        let (got, body) = c.call("POST", "/portal", Some(ALICE), None).await;
        assert_eq!(got, status, "{fault:?}: {body}");
        assert!(body["detail"].is_string(), "{body}");
    }
    let (_, body) = {
        c.sim.push_fault(
            Provider::Stripe,
            Fault {
                status: Some(400),
                message: Some("Save your customer portal settings first.".into()),
                ..Fault::default()
            },
        );
        c.call("POST", "/portal", Some(ALICE), None).await
    };
    assert_eq!(body["detail"], "Save your customer portal settings first.");
    drop(c);
    // A portal configuration Stripe does not know: Stripe's own message, as a 400.
    let other_db = TestDb::sqlite().await;
    let c = start(&other_db, |config| {
        config.portal_configuration = Some("bpc_unknown".into());
    })
    .await;
    c.pay(ALICE, "payment", "price_one_time").await;
    let (status, body) = c.call("POST", "/portal", Some(ALICE), None).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (400, Some("No such configuration: 'bpc_unknown'"))
    );
    assert_eq!(
        portal_calls(&c)[0].form_value("configuration").as_deref(),
        Some("bpc_unknown")
    );
    drop(c);
    // Without a secret key: 503, before any customer is looked up.
    let third_db = TestDb::sqlite().await;
    let c = start(&third_db, |config| config.secret_key = None).await;
    let (status, body) = c.call("POST", "/portal", Some(ALICE), None).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            503,
            Some("Payment provider not configured: STRIPE_SECRET_KEY is not set")
        )
    );
}
