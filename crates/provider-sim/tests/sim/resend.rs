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
