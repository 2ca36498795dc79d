//! Resend.

use super::*;

async fn resend(sim: &SimHandle, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = client().post(sim.url("/emails")).json(&body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test]
async fn resend_sends_to_the_outbox_and_validates_like_resend() {
    let sim = start();
    let key = sim.config().resend_api_key.clone();
    let email = json!({
        "from": "Keel <noreply@example.com>",
        "to": ["a@example.com", "B <b@example.com>"],
        "subject": "Hello <there>",
        "html": "<p>Hi</p>",
        "reply_to": "support@example.com",
        "tags": [{"name": "kind", "value": "welcome"}],
    });
    let (status, body) = resend(&sim, Some(&key), email.clone()).await;
    assert_eq!(status, 200);
    let id = body["id"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    assert_eq!(body.as_object().unwrap().len(), 1);
    let outbox = sim.outbox();
    assert_eq!(outbox.emails.len(), 1);
    assert_eq!(outbox.emails[0].to, ["a@example.com", "B <b@example.com>"]);
    assert_eq!(outbox.emails[0].reply_to, ["support@example.com"]);
    let fetched: Value = client()
        .get(sim.url(&format!("/emails/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["subject"], "Hello <there>");
    let page = client()
        .get(sim.url("/outbox"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Hello &lt;there&gt;"));

    let shape = |body: &Value, status: u16, name: &str| {
        assert_eq!(body["statusCode"], status, "{body}");
        assert_eq!(body["name"], name, "{body}");
        assert!(body["message"].is_string());
        assert_eq!(body.as_object().unwrap().len(), 3);
    };
    let (status, body) = resend(&sim, None, email.clone()).await;
    assert_eq!(status, 401);
    shape(&body, 401, "missing_api_key");
    let (status, body) = resend(&sim, Some("re_wrong"), email.clone()).await;
    assert_eq!(status, 403);
    shape(&body, 403, "invalid_api_key");
    let mut bad = email.clone();
    bad["to"] = json!("not-an-address");
    let (status, body) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    shape(&body, 422, "validation_error");
    assert!(body["message"].as_str().unwrap().contains("`to`"));
    let mut bad = email.clone();
    bad.as_object_mut().unwrap().remove("subject");
    let (status, body) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    shape(&body, 422, "missing_required_field");
    let mut bad = email.clone();
    bad.as_object_mut().unwrap().remove("html");
    let (status, _) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    let mut bad = email.clone();
    bad["to"] = json!(
        (0..51)
            .map(|i| format!("u{i}@example.com"))
            .collect::<Vec<_>>()
    );
    let (status, _) = resend(&sim, Some(&key), bad).await;
    assert_eq!(status, 422);
    assert_eq!(sim.outbox().emails.len(), 1);

    // Batch.
    let res = client()
        .post(sim.url("/emails/batch"))
        .bearer_auth(&key)
        .json(&json!([email, email]))
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn resend_idempotency_and_rate_limit_fault() {
    let sim = start();
    let key = sim.config().resend_api_key.clone();
    let email =
        json!({"from": "a@example.com", "to": "b@example.com", "subject": "s", "text": "t"});
    let send = |body: Value| {
        client()
            .post(sim.url("/emails"))
            .bearer_auth(&key)
            .header("idempotency-key", "welcome-1")
            .json(&body)
            .send()
    };
    let a: Value = send(email.clone()).await.unwrap().json().await.unwrap();
    let b: Value = send(email.clone()).await.unwrap().json().await.unwrap();
    assert_eq!(a["id"], b["id"]);
    assert_eq!(sim.outbox().emails.len(), 1);
    let mut other = email.clone();
    other["subject"] = json!("changed");
    let res = send(other).await.unwrap();
    assert_eq!(res.status(), 409);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["name"], "invalid_idempotent_request");

    sim.push_fault(Provider::Resend, Fault::status(429).retry_after(2));
    let res = client()
        .post(sim.url("/emails"))
        .bearer_auth(&key)
        .json(&email)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "2");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["name"], "rate_limit_exceeded");
    assert_eq!(body["statusCode"], 429);
}

fn resend_sim(receiver: &Receiver) -> SimHandle {
    start_with(SimConfig {
        resend_webhook_url: Some(receiver.url.clone()),
        callback_delay: Duration::from_millis(1),
        ..SimConfig::default()
    })
}

fn email_to(to: Value) -> Value {
    json!({"from": "Keel <noreply@example.com>", "to": to, "subject": "Welcome", "text": "Hi"})
}

fn event_of(hit: &Hit) -> Value {
    serde_json::from_str(&hit.body).unwrap()
}

/// The event types received about one email, in arrival order.
fn types_for(hits: &[Hit], email_id: &str) -> Vec<String> {
    hits.iter()
        .map(event_of)
        .filter(|e| e["data"]["email_id"] == email_id)
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn resend_events_follow_a_send_signed_the_svix_way() {
    let receiver = Receiver::start(svix_check);
    let sim = resend_sim(&receiver);
    let key = sim.config().resend_api_key.clone();
    let mut email = email_to(json!(["a@example.com", "B <b@example.com>"]));
    email["tags"] = json!([{"name": "kind", "value": "welcome"}]);
    let (status, body) = resend(&sim, Some(&key), email).await;
    assert_eq!(status, 200, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();

    let hits = receiver.wait_for(2).await;
    assert_eq!(types_for(&hits, &id), ["email.sent", "email.delivered"]);
    assert!(
        hits.iter().all(|h| h.status == 200),
        "signatures verify: {hits:?}"
    );
    let event = event_of(&hits[1]);
    assert_eq!(event["data"]["email_id"], id.as_str());
    assert_eq!(event["data"]["from"], "Keel <noreply@example.com>");
    assert_eq!(
        event["data"]["to"],
        json!(["a@example.com", "B <b@example.com>"])
    );
    assert_eq!(event["data"]["subject"], "Welcome");
    // As Resend's events carry them: one object of names and values.
    assert_eq!(event["data"]["tags"], json!({"kind": "welcome"}));
    assert!(event["data"]["created_at"].is_string());
    assert!(chrono::DateTime::parse_from_rfc3339(event["created_at"].as_str().unwrap()).is_ok());
    let h = &hits[0].headers;
    assert!(h["svix-id"].starts_with("msg_"));
    assert_ne!(hits[0].headers["svix-id"], hits[1].headers["svix-id"]);
    assert!(h["svix-signature"].starts_with("v1,"));
    assert_eq!(h["content-type"], "application/json");
    assert!(hits[0].url.ends_with("/hook?source=sim"));

    // The signature is the documented function of id, timestamp and body.
    let t: i64 = h["svix-timestamp"].parse().unwrap();
    assert_eq!(
        signing::svix(
            &sim.config().resend_webhook_secret,
            &h["svix-id"],
            t,
            hits[0].body.as_bytes()
        ),
        h["svix-signature"]
    );

    // The simulator logs a delivery once the receiver has answered.
    for _ in 0..400 {
        if sim.deliveries().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let deliveries = sim.deliveries();
    assert_eq!(deliveries.len(), 2);
    assert!(deliveries.iter().all(|d| d.provider == Provider::Resend
        && d.accepted()
        && d.id.as_deref() == Some(id.as_str())));
    assert_eq!(deliveries[1].kind.as_deref(), Some("email.delivered"));
    let fetched: Value = client()
        .get(sim.url(&format!("/emails/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["last_event"], "delivered");
}

#[tokio::test]
async fn resend_test_addresses_bounce_and_complain() {
    let receiver = Receiver::start(svix_check);
    let sim = resend_sim(&receiver);
    let res = client()
        .post(sim.url("/emails/batch"))
        .bearer_auth(&sim.config().resend_api_key)
        .json(&json!([
            email_to(json!("bounced@resend.dev")),
            email_to(json!(["Someone <complained+label@resend.dev>"])),
            email_to(json!("delivered@resend.dev")),
        ]))
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    let ids: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    let hits = receiver.wait_for(7).await;
    assert!(hits.iter().all(|h| h.status == 200), "{hits:?}");
    assert_eq!(types_for(&hits, &ids[0]), ["email.sent", "email.bounced"]);
    assert_eq!(
        types_for(&hits, &ids[1]),
        ["email.sent", "email.delivered", "email.complained"]
    );
    assert_eq!(types_for(&hits, &ids[2]), ["email.sent", "email.delivered"]);
    let bounce = hits
        .iter()
        .map(event_of)
        .find(|e| e["type"] == "email.bounced")
        .unwrap();
    assert_eq!(bounce["data"]["bounce"]["type"], "Permanent");
    assert_eq!(bounce["data"]["bounce"]["subType"], "General");
    assert!(bounce["data"]["bounce"]["message"].is_string());
    assert_eq!(bounce["data"]["to"], json!(["bounced@resend.dev"]));
}

#[tokio::test]
async fn resend_events_on_demand_with_knobs() {
    let receiver = Receiver::start(svix_check);
    let other = Receiver::start(svix_check);
    let sim = resend_sim(&receiver);
    let (_, body) = resend(
        &sim,
        Some(&sim.config().resend_api_key.clone()),
        email_to(json!("a@example.com")),
    )
    .await;
    let id = body["id"].as_str().unwrap().to_owned();
    receiver.wait_for(2).await;
    let event = |kind: &'static str, options: CallbackOptions| {
        let sim = &sim;
        let id = id.clone();
        async move { sim.resend_event(&id, kind, &options).await.unwrap() }
    };

    let normal = event("email.delivery_delayed", CallbackOptions::default()).await;
    assert_eq!(normal.len(), 1);
    assert_eq!(normal[0].status, Some(200), "{normal:?}");
    assert_eq!(
        event_of_delivery(&normal[0])["type"],
        "email.delivery_delayed"
    );

    let twice = event(
        "email.delivered",
        CallbackOptions {
            duplicate: true,
            ..CallbackOptions::default()
        },
    )
    .await;
    assert_eq!(twice.len(), 2);
    assert_eq!(twice[0].body, twice[1].body);
    assert_eq!(twice[0].headers, twice[1].headers);
    assert!(twice.iter().all(|d| d.status == Some(200)));
    let hits = receiver.hits();
    let last_two = &hits[hits.len() - 2..];
    assert_eq!(last_two[0].body, last_two[1].body);
    assert_eq!(
        last_two[0].headers["svix-id"],
        last_two[1].headers["svix-id"]
    );
    assert_eq!(
        last_two[0].headers["svix-signature"],
        last_two[1].headers["svix-signature"]
    );

    let rotated = event(
        "email.delivered",
        CallbackOptions {
            two_signatures: true,
            ..CallbackOptions::default()
        },
    )
    .await;
    assert_eq!(rotated[0].status, Some(200));
    assert_eq!(
        rotated[0]
            .header("svix-signature")
            .unwrap()
            .split(' ')
            .count(),
        2
    );

    // Each way of failing verification reaches the receiver and is rejected there.
    let failing = [
        CallbackOptions {
            wrong_secret: true,
            ..CallbackOptions::default()
        },
        CallbackOptions {
            stale: true,
            ..CallbackOptions::default()
        },
        CallbackOptions {
            no_signature: true,
            ..CallbackOptions::default()
        },
        CallbackOptions {
            tamper: true,
            ..CallbackOptions::default()
        },
    ];
    for options in failing {
        let d = event("email.delivered", options.clone()).await;
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].status, Some(400), "{options:?}: {d:?}");
        assert!(d[0].header("svix-id").is_some());
    }
    let stale = event(
        "email.delivered",
        CallbackOptions {
            stale: true,
            ..CallbackOptions::default()
        },
    )
    .await;
    let t: i64 = stale[0].header("svix-timestamp").unwrap().parse().unwrap();
    assert!(unix_now() - t >= 500);
    let tampered = event(
        "email.delivered",
        CallbackOptions {
            tamper: true,
            ..CallbackOptions::default()
        },
    )
    .await;
    assert!(tampered[0].body.contains("Welcome (changed)"));

    // Another target, and a delay: the event still arrives.
    let elsewhere = event(
        "email.complained",
        CallbackOptions {
            url: Some(other.url.clone()),
            delay: Some(Duration::from_millis(20)),
            ..CallbackOptions::default()
        },
    )
    .await;
    assert_eq!(elsewhere[0].status, Some(200));
    let other_hits = other.wait_for(1).await;
    assert_eq!(other_hits.len(), 1);
    assert_eq!(event_of(&other_hits[0])["type"], "email.complained");

    // Unknown email, or nowhere to deliver.
    assert!(
        sim.resend_event("nope", "email.sent", &CallbackOptions::default())
            .await
            .is_err()
    );
    let quiet = start();
    let (_, body) = resend(
        &quiet,
        Some(&quiet.config().resend_api_key.clone()),
        email_to(json!("a@example.com")),
    )
    .await;
    let err = quiet
        .resend_event(
            body["id"].as_str().unwrap(),
            "email.sent",
            &CallbackOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(err.contains("webhook URL"), "{err}");
    assert!(quiet.deliveries().is_empty());
}

fn event_of_delivery(delivery: &provider_sim::Delivery) -> Value {
    serde_json::from_str(&delivery.body).unwrap()
}

#[tokio::test]
async fn resend_lifecycles_use_the_runtime_callback_options() {
    let receiver = Receiver::start(svix_check);
    let sim = resend_sim(&receiver);
    let key = sim.config().resend_api_key.clone();

    sim.set_callback_options(CallbackOptions {
        duplicate: true,
        ..CallbackOptions::default()
    });
    let (_, body) = resend(&sim, Some(&key), email_to(json!("a@example.com"))).await;
    let id = body["id"].as_str().unwrap().to_owned();
    let hits = receiver.wait_for(4).await;
    assert_eq!(
        types_for(&hits, &id),
        [
            "email.sent",
            "email.sent",
            "email.delivered",
            "email.delivered"
        ]
    );
    assert_eq!(hits[0].headers["svix-id"], hits[1].headers["svix-id"]);
    assert_eq!(hits[2].body, hits[3].body);
    assert!(hits.iter().all(|h| h.status == 200));

    // Through the control API: unsigned and delayed, last event first.
    let res = client()
        .post(sim.url("/_sim/callbacks"))
        .json(&json!({"no_signature": true, "out_of_order": true, "delay_ms": 10}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let options: Value = client()
        .get(sim.url("/_sim/callbacks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(options["delay_ms"], 10);
    assert_eq!(
        sim.callback_options(),
        CallbackOptions {
            no_signature: true,
            out_of_order: true,
            delay: Some(Duration::from_millis(10)),
            ..CallbackOptions::default()
        }
    );
    let (_, body) = resend(&sim, Some(&key), email_to(json!("a@example.com"))).await;
    let second = body["id"].as_str().unwrap().to_owned();
    let hits = receiver.wait_for(6).await;
    assert_eq!(types_for(&hits, &second), ["email.delivered", "email.sent"]);
    assert!(
        hits[4..]
            .iter()
            .all(|h| h.status == 400 && !h.headers.contains_key("svix-signature"))
    );

    // On demand through the control API, then a reset restores normal deliveries.
    let res: Value = client()
        .post(sim.url(&format!("/_sim/resend/{id}/events")))
        .json(&json!({"type": "email.bounced", "wrong_secret": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(res["deliveries"][0]["status"], 400);
    assert_eq!(res["deliveries"][0]["kind"], "email.bounced");
    sim.reset();
    assert_eq!(sim.callback_options(), CallbackOptions::default());
}
