//! LLM dialects.

use super::*;

#[tokio::test]
async fn openai_compatible_chat_streams_and_not() {
    let sim = start();
    let messages = json!([{"role": "system", "content": "be nice"}, {"role": "user", "content": "Hello simulated world"}]);
    for (path, provider) in [
        ("/openai/v1/chat/completions", Provider::Openai),
        ("/groq/openai/v1/chat/completions", Provider::Groq),
        ("/mistral/v1/chat/completions", Provider::Mistral),
        ("/ollama/v1/chat/completions", Provider::Ollama),
        ("/v1/chat/completions", Provider::Openai),
    ] {
        let res = post_json(
            &sim,
            path,
            &[BEARER],
            json!({"model": "m", "messages": messages}),
        )
        .await;
        assert_eq!(res.status(), 200, "{path}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["object"], "chat.completion");
        assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "Hello simulated world"
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["completion_tokens"], 3);
        assert_eq!(sim.journal().last().unwrap().provider, provider);
    }

    let body = json!({"model": "m", "messages": messages, "stream": true, "stream_options": {"include_usage": true}});
    let res = post_json(&sim, "/groq/openai/v1/chat/completions", &[BEARER], body).await;
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = sse(&res.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello simulated world");
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty()))
            .count(),
        3
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["x_groq"]["usage"]["completion_tokens"], 3);
    assert_eq!(chunks.last().unwrap()["choices"], json!([]));
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 8);

    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[BEARER],
        json!({"model": "m", "messages": messages, "max_tokens": 2}),
    )
    .await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (
            body["choices"][0]["message"]["content"].as_str(),
            body["choices"][0]["finish_reason"].as_str()
        ),
        (Some("Hello simulated"), Some("length"))
    );

    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[],
        json!({"model": "m", "messages": messages}),
    )
    .await;
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].is_string());
    let res = post_json(
        &sim,
        "/mistral/v1/chat/completions",
        &[BEARER],
        json!({"model": "m", "messages": []}),
    )
    .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "error");
}

#[tokio::test]
async fn openai_rejects_a_wrong_key_when_one_is_configured() {
    let sim = start_with(SimConfig {
        ai_api_key: Some("right".to_owned()),
        ..SimConfig::default()
    });
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let res = post_json(&sim, "/openai/v1/chat/completions", &[BEARER], body.clone()).await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "invalid_api_key");
    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[("authorization", "Bearer right")],
        body,
    )
    .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn anthropic_messages_with_named_events() {
    let sim = start();
    let headers = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    let body = json!({"model": "test-model", "max_tokens": 100, "system": "terse",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi from Keel"}]}]});
    let res = post_json(&sim, "/anthropic/v1/messages", &headers, body.clone()).await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    assert_eq!(reply["type"], "message");
    assert!(reply["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        reply["content"][0],
        json!({"type": "text", "text": "Hi from Keel"})
    );
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["usage"]["output_tokens"], 3);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = sse(&post_json(&sim, "/v1/messages", &headers, streamed)
        .await
        .text()
        .await
        .unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let text: String = events
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["delta"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Hi from Keel");
    let delta: Value = serde_json::from_str(&events[7].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");

    let mut no_max = body.clone();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let res = post_json(&sim, "/anthropic/v1/messages", &headers, no_max).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "invalid_request_error");
    let res = post_json(
        &sim,
        "/anthropic/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        body.clone(),
    )
    .await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["type"], "authentication_error");
    let mut short = body;
    short["max_tokens"] = json!(1);
    let reply: Value = post_json(&sim, "/anthropic/v1/messages", &headers, short)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            reply["content"][0]["text"].as_str(),
            reply["stop_reason"].as_str()
        ),
        (Some("Hi"), Some("max_tokens"))
    );
}

#[tokio::test]
async fn gemini_generate_content_and_crlf_sse_without_done() {
    let sim = start();
    let key = [("x-goog-api-key", "k")];
    let body = json!({"systemInstruction": {"parts": [{"text": "terse"}]},
        "contents": [{"role": "user", "parts": [{"text": "Bonjour le monde"}]}],
        "generationConfig": {"maxOutputTokens": 50}});
    let reply: Value = post_json(
        &sim,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        &key,
        body.clone(),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        reply["candidates"][0]["content"]["parts"][0]["text"],
        "Bonjour le monde"
    );
    assert_eq!(reply["candidates"][0]["content"]["role"], "model");
    assert_eq!(reply["candidates"][0]["finishReason"], "STOP");
    assert_eq!(reply["usageMetadata"]["candidatesTokenCount"], 3);
    assert_eq!(reply["modelVersion"], "gemini-2.0-flash");

    let res = post_json(
        &sim,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&key=k",
        &[],
        body.clone(),
    )
    .await;
    assert_eq!(res.status(), 200);
    let raw = res.text().await.unwrap();
    assert!(raw.contains("\r\n\r\n"));
    assert!(!raw.contains("[DONE]"));
    let chunks: Vec<Value> = sse(&raw)
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks.len(), 3);
    let text: String = chunks
        .iter()
        .map(|c| {
            c["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(text, "Bonjour le monde");
    assert!(chunks[0]["candidates"][0].get("finishReason").is_none());
    assert_eq!(chunks[2]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(chunks[2]["usageMetadata"]["totalTokenCount"], 7);

    let res = post_json(
        &sim,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        &[],
        body.clone(),
    )
    .await;
    assert_eq!(res.status(), 403);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["status"], "PERMISSION_DENIED");
    let res = post_json(
        &sim,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        &key,
        json!({"contents": []}),
    )
    .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(
        (
            err["error"]["code"].as_u64(),
            err["error"]["status"].as_str()
        ),
        (Some(400), Some("INVALID_ARGUMENT"))
    );
}

#[tokio::test]
async fn gemini_bad_key_is_400_api_key_invalid() {
    let sim = start_with(SimConfig {
        ai_api_key: Some("good".to_owned()),
        ..SimConfig::default()
    });
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}]});
    let res = post_json(
        &sim,
        "/gemini/v1beta/models/g:generateContent",
        &[("x-goog-api-key", "bad")],
        body,
    )
    .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["details"][0]["reason"], "API_KEY_INVALID");
}

#[tokio::test]
async fn cohere_v2_chat_streams_named_events() {
    let sim = start();
    let body =
        json!({"model": "command-r", "messages": [{"role": "user", "content": "Ciao tutti"}]});
    let reply: Value = post_json(&sim, "/cohere/v2/chat", &[BEARER], body.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["finish_reason"], "COMPLETE");
    assert_eq!(reply["message"]["content"][0]["text"], "Ciao tutti");
    assert_eq!(reply["usage"]["billed_units"]["output_tokens"], 2);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = sse(&post_json(&sim, "/v2/chat", &[BEARER], streamed)
        .await
        .text()
        .await
        .unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message-start",
            "content-start",
            "content-delta",
            "content-delta",
            "content-end",
            "message-end"
        ]
    );
    let text: String = events
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content-delta"))
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["delta"]["message"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Ciao tutti");
    let end: Value = serde_json::from_str(&events[5].1).unwrap();
    assert_eq!(end["delta"]["finish_reason"], "COMPLETE");

    let res = post_json(&sim, "/cohere/v2/chat", &[], body).await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert!(err["message"].is_string());
}

/// With usage off, no dialect reports any, streamed or not (the Gemini stream keeps its CRLF
/// framing); the control API turns it back on.
#[tokio::test]
async fn usage_can_be_left_out_of_every_dialect() {
    let sim = start();
    sim.set_llm_usage(false);
    let openai = json!({"model": "m", "messages": [{"role": "user", "content": "one two"}]});
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "one two"}]}]});
    let anthropic = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "one two"}]});
    let gemini_key: &[(&str, &str)] = &[("x-goog-api-key", "k")];
    let anthropic_key: &[(&str, &str)] = &[("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    for (path, headers, body) in [
        ("/openai/v1/chat/completions", &[BEARER][..], openai.clone()),
        (
            "/groq/openai/v1/chat/completions",
            &[BEARER][..],
            openai.clone(),
        ),
        ("/cohere/v2/chat", &[BEARER][..], openai),
        (
            "/gemini/v1beta/models/g:generateContent",
            gemini_key,
            gemini.clone(),
        ),
        (
            "/gemini/v1beta/models/g:streamGenerateContent?alt=sse",
            gemini_key,
            gemini,
        ),
        ("/anthropic/v1/messages", anthropic_key, anthropic),
    ] {
        for stream in [false, true] {
            let mut body = body.clone();
            if stream {
                body["stream"] = json!(true);
                if path.ends_with("/chat/completions") {
                    body["stream_options"] = json!({"include_usage": true});
                }
            }
            let res = post_json(&sim, path, headers, body).await;
            assert_eq!(res.status(), 200, "{path}");
            let raw = res.text().await.unwrap();
            assert!(raw.contains("one"), "{path}: {raw}");
            assert!(
                !raw.contains("usage") && !raw.contains("Usage"),
                "{path}: {raw}"
            );
            if path.contains("alt=sse") {
                assert!(raw.contains("\r\n\r\n"), "{raw}");
            }
        }
    }
    let res = client()
        .post(sim.url("/_sim/llm/usage"))
        .json(&json!({"report": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = post_json(
        &sim,
        "/openai/v1/chat/completions",
        &[BEARER],
        json!({"model": "m", "messages": [{"role": "user", "content": "one two"}]}),
    )
    .await;
    assert_eq!(
        res.json::<Value>().await.unwrap()["usage"]["total_tokens"],
        4
    );
}
