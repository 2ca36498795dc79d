//! Faults.

use super::*;
use crate::twilio::twilio_post;

#[tokio::test]
async fn faults_answer_with_the_providers_error_and_retry_after() {
    let sim = start();
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    sim.push_fault(Provider::Openai, Fault::status(429).retry_after(7).times(2));
    for _ in 0..2 {
        let res = post_json(&sim, "/openai/v1/chat/completions", &[BEARER], chat.clone()).await;
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers()["retry-after"], "7");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], "rate_limit_exceeded");
    }
    assert_eq!(
        post_json(&sim, "/openai/v1/chat/completions", &[BEARER], chat.clone())
            .await
            .status(),
        200
    );

    sim.push_fault(Provider::Anthropic, Fault::status(529));
    let res = post_json(&sim, "/anthropic/v1/messages", &[], json!({})).await;
    assert_eq!(res.status(), 529);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["type"], "overloaded_error");

    sim.push_fault(Provider::Gemini, Fault::status(503));
    let err: Value = post_json(
        &sim,
        "/gemini/v1beta/models/g:generateContent",
        &[],
        json!({}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(err["error"]["status"], "UNAVAILABLE");

    sim.push_fault(Provider::Cohere, Fault::status(429).message("slow down"));
    let err: Value = post_json(&sim, "/cohere/v2/chat", &[], json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(err, json!({"message": "slow down"}));

    sim.push_fault(Provider::Twilio, Fault::status(429).code("20429"));
    let (status, err) = twilio_post(&sim, "Messages.json", "").await;
    assert_eq!((status, err["code"].as_u64()), (429, Some(20429)));

    sim.push_fault(Provider::Stripe, Fault::status(500));
    let res = client()
        .get(sim.url("/v1/customers/cus_x"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 500);
    assert_eq!(res.headers()["stripe-should-retry"], "true");
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["type"], "api_error");

    // A delay alone still answers normally.
    sim.push_fault(Provider::Ollama, Fault::default().delay_ms(20));
    assert_eq!(
        post_json(&sim, "/ollama/v1/chat/completions", &[], chat)
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn stream_faults_truncate_corrupt_disconnect_and_drop() {
    let sim = start();
    let chat = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "one two three four five six"}]});
    let path = "/openai/v1/chat/completions";

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Truncate));
    let text = post_json(&sim, path, &[BEARER], chat.clone())
        .await
        .text()
        .await
        .unwrap();
    let events = sse(&text);
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|(_, d)| d != "[DONE]" && !d.contains("\"finish_reason\":\"stop\""))
    );
    assert!(
        events
            .iter()
            .all(|(_, d)| serde_json::from_str::<Value>(d).is_ok())
    );

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Malformed));
    let text = post_json(&sim, path, &[BEARER], chat.clone())
        .await
        .text()
        .await
        .unwrap();
    let events = sse(&text);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    assert_eq!(
        events
            .iter()
            .filter(|(_, d)| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
            .count(),
        1
    );

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Disconnect));
    let res = post_json(&sim, path, &[BEARER], chat.clone()).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.is_err());

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Drop));
    assert!(
        client()
            .post(sim.url(path))
            .json(&chat)
            .send()
            .await
            .is_err()
    );

    sim.push_fault(Provider::Openai, Fault::action(FaultAction::Stall));
    let mut res = post_json(&sim, path, &[BEARER], chat.clone()).await;
    let first = res.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));
    drop(res);

    // Non-streamed JSON is cut too.
    sim.push_fault(Provider::Resend, Fault::action(FaultAction::Truncate));
    let res = client()
        .post(sim.url("/emails"))
        .bearer_auth("re_provider_sim")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert!(serde_json::from_str::<Value>(&res.text().await.unwrap()).is_err());

    // With a chunk delay the stream still completes.
    sim.set_chunk_delay(Duration::from_millis(1));
    let events = sse(&post_json(&sim, path, &[BEARER], chat)
        .await
        .text()
        .await
        .unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
}
