//! `AI_FALLBACK_PROVIDERS` and the circuit breaker: `openai` first, `anthropic` after it, both on
//! the simulator; `openai` made to fail with scripted faults (an error status, a hang past the
//! timeout, a closed port), in the plain chat and in streams, on both stores.

use super::*;

/// `openai` then `anthropic`; the circuit breaker off unless `adjust` sets it.
async fn chain(db: &TestDb, adjust: impl FnOnce(&mut AiConfig)) -> Ctx {
    start(db, |config| {
        config.timeout = Duration::from_secs(1);
        config.circuit_failures = 0;
        with_anthropic(config);
        adjust(config);
    })
    .await
}

fn with_anthropic(config: &mut AiConfig) {
    let openai_base = config.base_urls["openai"].clone();
    let sim = openai_base.trim_end_matches("/openai/v1");
    config
        .base_urls
        .insert("anthropic", format!("{sim}/anthropic/v1"));
    config.api_keys.insert("anthropic", "sk-ant-test".into());
    config.fallbacks = vec![ai_core::Fallback {
        provider: ai_core::config::provider("anthropic").unwrap(),
        model: None,
    }];
}

/// A base URL on which nothing listens.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/v1")
}

const ANTHROPIC_MODEL: &str = "claude-3-5-haiku-latest";

fn answered_by(body: &Value) -> (&str, &str) {
    (
        body["provider"].as_str().unwrap_or("?"),
        body["model"].as_str().unwrap_or("?"),
    )
}

kernel::backend_tests! {
    a_failing_provider_hands_the_question_to_the_next,
    a_provider_that_cannot_be_reached_hands_it_on_too,
    a_refused_request_is_not_handed_on,
    streams_fall_back_only_before_their_first_chunk,
    the_circuit_opens_after_repeated_failures_and_closes_after_a_trial,
    a_chain_whose_circuits_are_all_open_answers_503,
}

async fn a_failing_provider_hands_the_question_to_the_next(db: TestDb) {
    for store in [StoreChoice::Memory, StoreChoice::Database] {
        let c = chain(&db, |config| config.store = store).await;
        // The first provider answers while it can.
        let (status, body) = c.post("/chat", json!({"message": "first"})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(answered_by(&body), ("openai", "gpt-4o-mini"));
        let id = body["conversation_id"].as_str().unwrap().to_owned();
        let faults = [
            Fault::status(500),
            Fault::status(503),
            Fault::status(429).retry_after(3),
            // A key the provider refuses: the next provider has its own.
            Fault::status(401),
            Fault::status(404).message("The model does not exist"),
            // No answer within AI_TIMEOUT_SECONDS (1 s here).
            Fault::default().delay_ms(2_500),
            Fault::action(provider_sim::FaultAction::Drop),
            Fault::action(provider_sim::FaultAction::Malformed),
        ];
        let count = faults.len();
        for fault in faults {
            c.sim.push_fault(Provider::Openai, fault.clone());
            let (status, body) = c
                .post("/chat", json!({"message": "again", "conversation_id": id}))
                .await;
            assert_eq!(status, 200, "{fault:?}: {body}");
            assert_eq!(
                answered_by(&body),
                ("anthropic", ANTHROPIC_MODEL),
                "{fault:?}"
            );
            assert_eq!(body["content"], "again");
            assert_eq!(body["conversation_id"], id.as_str());
        }
        assert_eq!(c.sim.journal_for(Provider::Openai).len(), 1 + count);
        let asked = c.sim.journal_for(Provider::Anthropic);
        assert_eq!(asked.len(), count);
        // Anthropic got the conversation's context, with its own model and key.
        let sent: Value = serde_json::from_str(&asked[0].body).unwrap();
        assert_eq!(sent["model"], ANTHROPIC_MODEL);
        assert_eq!(sent["messages"].as_array().unwrap().len(), 3);
        assert_eq!(asked[0].header("x-api-key"), Some("sk-ant-test"));
        // The stored conversation says who wrote each reply; its head, who wrote the last.
        let (status, detail) = c.get(&format!("/conversations/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(answered_by(&detail), ("anthropic", ANTHROPIC_MODEL));
        let messages = detail["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2 * (1 + count));
        assert_eq!(messages[0]["provider"], Value::Null);
        assert_eq!(answered_by(&messages[1]), ("openai", "gpt-4o-mini"));
        assert_eq!(messages[2]["model"], Value::Null);
        assert_eq!(answered_by(&messages[3]), ("anthropic", ANTHROPIC_MODEL));
        let (_, list) = c.get("/conversations").await;
        assert_eq!(answered_by(&list[0]), ("anthropic", ANTHROPIC_MODEL));
        // Each failure counted against openai (its circuit breaker is off here).
        let (_, health) = c.get("/health").await;
        assert_eq!(health["providers"][0]["consecutive_failures"], count);
        assert_eq!(health["providers"][0]["circuit"], "closed");
        assert!(
            health["providers"][0]["last_error"].as_str().is_some(),
            "{health}"
        );
        assert_eq!(health["providers"][1]["consecutive_failures"], 0);
    }
}

async fn a_provider_that_cannot_be_reached_hands_it_on_too(db: TestDb) {
    let c = chain(&db, |config| {
        config.base_urls.insert("openai", closed_port());
    })
    .await;
    let (status, body) = c.post("/chat", json!({"message": "anyone?"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answered_by(&body), ("anthropic", ANTHROPIC_MODEL));
    let (status, events) = c.stream(json!({"message": "anyone there?"})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&events), ["connect", "chunk", "final", "complete"]);
    assert_eq!(
        answered_by(&events[events.len() - 2].1),
        ("anthropic", ANTHROPIC_MODEL)
    );
    // Without a fallback it is the 502 it always was, with the transport error.
    let alone = start(&db, |config| {
        config.base_urls.insert("openai", closed_port());
    })
    .await;
    let (status, body) = alone.post("/chat", json!({"message": "anyone?"})).await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("AI provider error: "),
        "{body}"
    );
}

async fn a_refused_request_is_not_handed_on(db: TestDb) {
    let c = chain(&db, |_| {}).await;
    for status in [400, 422] {
        c.sim.push_fault(
            Provider::Openai,
            Fault::status(status).message("This model's maximum context length is 8 tokens"),
        );
        let (code, body) = c.post("/chat", json!({"message": "hi"})).await;
        assert_eq!(
            (code, body["detail"].as_str()),
            (
                502,
                Some("AI provider error: This model's maximum context length is 8 tokens")
            ),
            "{status}"
        );
    }
    assert!(c.sim.journal_for(Provider::Anthropic).is_empty());
    // When both fail, the detail names each.
    c.sim
        .push_fault(Provider::Openai, Fault::status(500).message("openai down"));
    c.sim.push_fault(
        Provider::Anthropic,
        Fault::status(529).message("Overloaded"),
    );
    let (code, body) = c.post("/chat", json!({"message": "hi"})).await;
    assert_eq!(
        (code, body["detail"].as_str()),
        (
            502,
            Some("AI provider error: openai: openai down; anthropic: Overloaded")
        )
    );
    assert_eq!(c.get("/conversations").await.1, json!([]));
}

async fn streams_fall_back_only_before_their_first_chunk(db: TestDb) {
    let c = chain(&db, |config| config.store = StoreChoice::Database).await;
    let faults = [
        Fault::status(500),
        Fault::status(429),
        Fault::default().delay_ms(2_500),
        // An unreadable chunk before any text.
        Fault::action(provider_sim::FaultAction::Malformed),
    ];
    let count = faults.len();
    for fault in faults {
        c.sim.push_fault(Provider::Openai, fault.clone());
        let (status, events) = c.stream(json!({"message": "one two three four"})).await;
        assert_eq!(status, 200);
        assert_eq!(
            names(&events),
            ["connect", "chunk", "final", "complete"],
            "{fault:?}: {events:?}"
        );
        let (_, last) = events.iter().find(|(n, _)| n == "final").unwrap();
        assert_eq!(last["content"], "one two three four");
        assert_eq!(
            answered_by(last),
            ("anthropic", ANTHROPIC_MODEL),
            "{fault:?}"
        );
        let (_, complete) = events.last().unwrap();
        assert_eq!(answered_by(complete), ("anthropic", ANTHROPIC_MODEL));
        let id = last["conversation_id"].as_str().unwrap();
        let (_, detail) = c.get(&format!("/conversations/{id}")).await;
        assert_eq!(
            answered_by(&detail["messages"][1]),
            ("anthropic", ANTHROPIC_MODEL)
        );
    }
    assert_eq!(c.sim.journal_for(Provider::Anthropic).len(), count);
    // Once a chunk has gone out, a failure is the stream's: nobody else is asked.
    for action in [
        provider_sim::FaultAction::Disconnect,
        provider_sim::FaultAction::Stall,
        provider_sim::FaultAction::Truncate,
    ] {
        c.sim.push_fault(Provider::Openai, Fault::action(action));
        let (_, events) = c
            .stream(json!({"message": "one two three four five six seven eight"}))
            .await;
        assert_eq!(
            names(&events),
            ["connect", "chunk", "error"],
            "{action:?}: {events:?}"
        );
    }
    assert_eq!(c.sim.journal_for(Provider::Anthropic).len(), count);
    // The breaks after the first chunk counted against openai too.
    let (_, health) = c.get("/health").await;
    assert_eq!(
        health["providers"][0]["consecutive_failures"],
        count + 3,
        "{health}"
    );
    // The first provider answers streams again, and says so; its success resets the count.
    let (_, events) = c.stream(json!({"message": "back"})).await;
    assert_eq!(
        answered_by(&events[events.len() - 2].1),
        ("openai", "gpt-4o-mini")
    );
    let (_, health) = c.get("/health").await;
    assert_eq!(
        health["providers"][0]["consecutive_failures"], 0,
        "{health}"
    );
    let (_, list) = c.get("/conversations?limit=1000").await;
    assert_eq!(list.as_array().unwrap().len(), count + 1);
}

async fn the_circuit_opens_after_repeated_failures_and_closes_after_a_trial(db: TestDb) {
    let c = chain(&db, |config| {
        config.circuit_failures = 2;
        config.circuit_cooldown = Duration::from_millis(2_000);
    })
    .await;
    let (_, health) = c.get("/health").await;
    let chain: Vec<(&str, &str, &str)> = health["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["provider"].as_str().unwrap(),
                p["role"].as_str().unwrap(),
                p["circuit"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        chain,
        [
            ("openai", "primary", "closed"),
            ("anthropic", "fallback", "closed")
        ]
    );
    assert_eq!(health["providers"][0]["configured"], true);
    c.sim
        .push_fault(Provider::Openai, Fault::status(500).times(2));
    for _ in 0..2 {
        let (_, body) = c.post("/chat", json!({"message": "hi"})).await;
        assert_eq!(answered_by(&body).0, "anthropic");
    }
    let (_, health) = c.get("/health").await;
    let openai = &health["providers"][0];
    assert_eq!(openai["circuit"], "open", "{health}");
    assert_eq!(openai["consecutive_failures"], 2);
    assert!(openai["retry_at"].as_str().is_some(), "{health}");
    // Health stays healthy: a fallback answers.
    assert_eq!(health["status"], "healthy");
    // While open, openai is not asked at all (no fault is queued: it would answer).
    let (_, body) = c.post("/chat", json!({"message": "skipped"})).await;
    assert_eq!(answered_by(&body).0, "anthropic");
    let (_, events) = c.stream(json!({"message": "skipped too"})).await;
    assert_eq!(answered_by(&events[events.len() - 2].1).0, "anthropic");
    assert_eq!(c.sim.journal_for(Provider::Openai).len(), 2);
    // After the cool-down one trial goes through; its success closes the circuit.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let (_, body) = c.post("/chat", json!({"message": "trial"})).await;
    assert_eq!(answered_by(&body).0, "openai", "{body}");
    let (_, health) = c.get("/health").await;
    assert_eq!(health["providers"][0]["circuit"], "closed");
    assert_eq!(health["providers"][0]["consecutive_failures"], 0);
    assert_eq!(health["providers"][0]["retry_at"], Value::Null);
    // A failed trial opens it again at once, for another cool-down.
    c.sim
        .push_fault(Provider::Openai, Fault::status(500).times(3));
    for _ in 0..2 {
        c.post("/chat", json!({"message": "hi"})).await;
    }
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let (_, body) = c.post("/chat", json!({"message": "failed trial"})).await;
    assert_eq!(answered_by(&body).0, "anthropic");
    let asked = c.sim.journal_for(Provider::Openai).len();
    assert_eq!(asked, 6);
    let (_, body) = c.post("/chat", json!({"message": "still skipped"})).await;
    assert_eq!(answered_by(&body).0, "anthropic");
    assert_eq!(c.sim.journal_for(Provider::Openai).len(), asked);
    assert_eq!(c.get("/health").await.1["providers"][0]["circuit"], "open");
}

async fn a_chain_whose_circuits_are_all_open_answers_503(db: TestDb) {
    let c = start(&db, |config| {
        config.circuit_failures = 1;
        config.circuit_cooldown = Duration::from_secs(30);
    })
    .await;
    c.sim.push_fault(Provider::Openai, Fault::status(500));
    assert_eq!(c.post("/chat", json!({"message": "hi"})).await.0, 502);
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 503);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&wait), "{wait}");
    let body: Value = res.json().await.unwrap();
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "AI service error: no AI provider can be asked now: openai: skipped after repeated failures (circuit open, retry in "
        ),
        "{detail}"
    );
    let (status, events) = c.stream(json!({"message": "hi"})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&events), ["connect", "error"]);
    assert!(
        events[1].1["detail"]
            .as_str()
            .unwrap()
            .starts_with("AI service error: no AI provider can be asked now"),
        "{events:?}"
    );
    assert_eq!(c.sim.journal_for(Provider::Openai).len(), 1);
    let (_, health) = c.get("/health").await;
    assert_eq!(health["providers"][0]["circuit"], "open");
    assert_eq!(health["providers"].as_array().unwrap().len(), 1);
}
