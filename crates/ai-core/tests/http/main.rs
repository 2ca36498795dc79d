//! The AI module over real HTTP against `provider-sim`: chat, SSE streams, conversations in both
//! stores, ownership, and the contract's error texts, on both backends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use ai_core::{AiConfig, AiModule, StoreChoice};
use kernel::identity::AuthFailure;
use kernel::module::{BuildModule, Deps};
use kernel::testing::{TestDb, TestServer, spawn_modules};
use kernel::{Authenticator, Principal, Role};
use provider_sim::{Fault, Provider, ProviderSim, SimConfig, SimHandle};
use serde_json::{Value, json};

mod budget;
mod cancellation;
mod delete;
mod fallback;
mod reconnect;

const TOKEN: &str = "token-of-user-7";

struct StubAuthenticator;

#[async_trait::async_trait]
impl Authenticator for StubAuthenticator {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        match token {
            TOKEN => Ok(Principal {
                user_id: 7,
                email: "seven@example.com".into(),
                full_name: None,
                role: Role::User,
                is_active: true,
            }),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

struct Ctx {
    server: TestServer,
    sim: SimHandle,
}

/// The `openai` provider against the simulator; `adjust` changes the settings first.
fn config(sim: &SimHandle, adjust: impl FnOnce(&mut AiConfig)) -> AiConfig {
    let mut config = AiConfig {
        provider: ai_core::config::provider("openai").unwrap(),
        timeout: Duration::from_secs(3),
        ..AiConfig::default()
    };
    config.api_keys.insert("openai", "sk-test".into());
    config
        .base_urls
        .insert("openai", format!("{}/openai/v1", sim.base_url()));
    adjust(&mut config);
    config
}

async fn serve(db: &TestDb, config: AiConfig, auth: bool) -> TestServer {
    let pool = db.migrated_pool(&[ai_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool).unwrap();
    deps.read_cache = db.read_cache;
    if auth {
        deps = deps.with_authenticator(Arc::new(StubAuthenticator));
    }
    spawn_modules(vec![Arc::new(
        AiModule::build(config, &deps).await.unwrap(),
    )])
}

async fn start(db: &TestDb, adjust: impl FnOnce(&mut AiConfig)) -> Ctx {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let server = serve(db, config(&sim, adjust), false).await;
    Ctx { server, sim }
}

impl Ctx {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let res = self
            .server
            .client
            .post(self.server.url(&format!("/ai{path}")))
            .json(&body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let res = self
            .server
            .client
            .get(self.server.url(&format!("/ai{path}")))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    /// A whole SSE answer as (event, data) pairs.
    async fn stream(&self, body: Value) -> (u16, Vec<(String, Value)>) {
        let res = self
            .server
            .client
            .post(self.server.url("/ai/chat/stream"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, read_events(res).await)
    }
}

/// Reads an SSE answer with a real SSE parser: (event, data) pairs, comments skipped.
async fn read_events(res: reqwest::Response) -> Vec<(String, Value)> {
    use eventsource_stream::Eventsource;
    use futures_util::StreamExt;
    res.bytes_stream()
        .eventsource()
        .map(|e| {
            let e = e.unwrap();
            (
                e.event,
                serde_json::from_str(&e.data).unwrap_or(Value::Null),
            )
        })
        .collect()
        .await
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    let mut names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    names.dedup();
    names
}

kernel::backend_tests! {
    a_chat_is_answered_and_continued_with_its_context,
    a_stream_sends_connect_chunks_final_and_complete,
    failures_follow_the_contract,
    conversations_belong_to_their_user,
    the_database_store_is_shared_by_two_instances,
    a_client_that_disconnects_mid_stream_stores_nothing,
}

async fn a_chat_is_answered_and_continued_with_its_context(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let (status, first) = c
        .post("/chat", json!({"message": "Hello there, model"}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["content"], "Hello there, model");
    assert_eq!(
        (first["provider"].as_str(), first["model"].as_str()),
        (Some("openai"), Some("gpt-4o-mini"))
    );
    let id = first["conversation_id"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok());
    assert!(first["response_time_ms"].as_f64().unwrap() >= 0.0);
    let (status, second) = c
        .post(
            "/chat",
            json!({"message": "And again", "conversation_id": id}),
        )
        .await;
    assert_eq!(
        (status, second["conversation_id"].as_str()),
        (200, Some(id.as_str()))
    );
    // The provider saw the earlier exchange as context, then the new message.
    let sent = c.sim.journal_for(Provider::Openai);
    assert_eq!(sent.last().unwrap().path, "/openai/v1/chat/completions");
    assert_eq!(
        sent.last().unwrap().header("authorization"),
        Some("Bearer sk-test")
    );
    let body: Value = serde_json::from_str(&sent.last().unwrap().body).unwrap();
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(body["messages"][1]["content"], "Hello there, model");
    assert_eq!(body["model"], "gpt-4o-mini");
    let (_, list) = c.get("/conversations").await;
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["message_count"], 4);
    assert_eq!(list[0]["title"], "Hello there, model");
    let (status, detail) = c.get(&format!("/conversations/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(detail["messages"].as_array().unwrap().len(), 4);
    assert_eq!(detail["messages"][3]["role"], "assistant");
    assert_eq!(detail["metadata"]["user_id"], "api-user");
    // Titles are cut at 50 characters.
    let long = "word ".repeat(20);
    let (_, answer) = c.post("/chat", json!({"message": long})).await;
    let (_, detail) = c
        .get(&format!(
            "/conversations/{}",
            answer["conversation_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(detail["title"], format!("{}...", &long[..50]));
    // The same routes under /api/v1.
    let res = c
        .server
        .client
        .get(c.server.url("/api/v1/ai/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
}

async fn a_stream_sends_connect_chunks_final_and_complete(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let (status, events) = c.stream(json!({"message": "one two three four"})).await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&events),
        ["connect", "chunk", "final", "complete"],
        "{events:?}"
    );
    let chunks: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "chunk")
        .map(|(_, d)| d)
        .collect();
    assert!(chunks.len() >= 4, "{chunks:?}");
    let joined: String = chunks
        .iter()
        .map(|d| d["content"].as_str().unwrap())
        .collect();
    let (_, last) = events.iter().find(|(n, _)| n == "final").unwrap();
    assert_eq!(joined, last["content"].as_str().unwrap());
    assert_eq!(last["content"], "one two three four");
    assert_eq!(
        (last["provider"].as_str(), last["model"].as_str()),
        (Some("openai"), Some("gpt-4o-mini"))
    );
    assert_eq!(last["is_final"], true);
    assert!(
        chunks
            .iter()
            .all(|d| d["message_id"] == last["message_id"] && d["is_delta"] == true)
    );
    // The reply was stored, and the GET variant continues nothing but works the same.
    let id = last["conversation_id"].as_str().unwrap();
    assert_eq!(
        c.get(&format!("/conversations/{id}")).await.1["message_count"],
        2
    );
    let res = c
        .server
        .client
        .get(c.server.url("/ai/chat/stream?message=hi%20there"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(
        names(&read_events(res).await),
        ["connect", "chunk", "final", "complete"]
    );
}

async fn failures_follow_the_contract(db: TestDb) {
    let c = start(&db, |_| {}).await;
    for (body, detail) in [
        (json!({"message": ""}), "Message must not be empty"),
        (json!({}), "Message must not be empty"),
        (
            json!({"message": "hi", "conversation_id": "nope"}),
            "Invalid conversation_id: \"nope\" is not a UUID",
        ),
    ] {
        let (status, answer) = c.post("/chat", body.clone()).await;
        assert_eq!(
            (status, answer["detail"].as_str()),
            (400, Some(detail)),
            "{body}"
        );
        // A stream refuses it before it starts.
        let res = c
            .server
            .client
            .post(c.server.url("/ai/chat/stream"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 400);
    }
    let unknown = uuid::Uuid::new_v4().to_string();
    let (status, answer) = c
        .post(
            "/chat",
            json!({"message": "hi", "conversation_id": unknown}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        answer["detail"],
        format!("Conversation error: Conversation {unknown} not found")
    );
    // A provider error: 502 on chat, one error event on a stream.
    c.sim.push_fault(
        Provider::Openai,
        Fault {
            message: Some("Incorrect API key provided".into()),
            ..Fault::status(401)
        },
    );
    let (status, answer) = c.post("/chat", json!({"message": "hi"})).await;
    assert_eq!(
        (status, answer["detail"].as_str()),
        (502, Some("AI provider error: Incorrect API key provided"))
    );
    c.sim.push_fault(Provider::Openai, Fault::status(500));
    let (status, events) = c.stream(json!({"message": "hi"})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&events), ["connect", "error"], "{events:?}");
    assert!(
        events[1].1["detail"]
            .as_str()
            .unwrap()
            .starts_with("AI provider error:")
    );
    // Nothing of the failed turns was stored.
    assert_eq!(c.get("/conversations").await.1, json!([]));
    drop(c);
    let c = start(&db, |config| {
        config.api_keys.clear();
    })
    .await;
    let (status, answer) = c.post("/chat", json!({"message": "hi"})).await;
    assert_eq!(
        (status, answer["detail"].as_str()),
        (
            503,
            Some("AI service error: Missing API key for openai. Set OPENAI_API_KEY.")
        )
    );
    let (_, health) = c.get("/health").await;
    assert_eq!(health["status"], "unhealthy");
    assert_eq!(
        health["validation_errors"],
        json!(["Missing API key for openai. Set OPENAI_API_KEY."])
    );
    drop(c);
    let c = start(&db, |config| config.enabled = false).await;
    let (status, answer) = c.post("/chat", json!({"message": "hi"})).await;
    assert_eq!(
        (status, answer["detail"].as_str()),
        (503, Some("AI service error: AI service is disabled"))
    );
    drop(c);
    // AI_MAX_MESSAGE_CHARS counts characters, not bytes.
    let c = start(&db, |config| config.max_message_chars = 5).await;
    let (status, answer) = c.post("/chat", json!({"message": "ééééé!"})).await;
    assert_eq!(
        (status, answer["detail"].as_str()),
        (400, Some("Message too long: 6 characters (max 5)"))
    );
    assert_eq!(c.post("/chat", json!({"message": "ééééé"})).await.0, 200);
}

async fn conversations_belong_to_their_user(db: TestDb) {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let server = serve(&db, config(&sim, |_| {}), true).await;
    let c = Ctx { server, sim };
    let (_, mine) = c
        .post("/chat", json!({"message": "mine", "user_id": "alice"}))
        .await;
    let id = mine["conversation_id"].as_str().unwrap().to_owned();
    let (status, body) = c.get(&format!("/conversations/{id}?user_id=bob")).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (403, Some("Access denied"))
    );
    let (status, _) = c
        .post(
            "/chat",
            json!({"message": "x", "conversation_id": id, "user_id": "bob"}),
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(
        c.get(&format!("/conversations/{id}?user_id=alice")).await.0,
        200
    );
    assert_eq!(c.get("/conversations?user_id=bob").await.1, json!([]));
    // With a token the user is the token's, whatever user_id says.
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"message": "from a token", "user_id": "alice"}))
        .send()
        .await
        .unwrap();
    let answer: Value = res.json().await.unwrap();
    let token_conversation = answer["conversation_id"].as_str().unwrap();
    let res = c
        .server
        .client
        .get(
            c.server
                .url(&format!("/ai/conversations/{token_conversation}")),
        )
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    // An account's id as user_id needs that account's token: without it, 401 on every route.
    let not_authenticated = (401, json!({"detail": "Not authenticated"}));
    assert_eq!(
        c.get(&format!("/conversations/{token_conversation}?user_id=7"))
            .await,
        not_authenticated
    );
    assert_eq!(c.get("/conversations?user_id=7").await, not_authenticated);
    let continue_as_7 =
        json!({"message": "x", "conversation_id": token_conversation, "user_id": "7"});
    assert_eq!(
        c.post("/chat", continue_as_7.clone()).await,
        not_authenticated
    );
    assert_eq!(c.stream(continue_as_7).await.0, 401);
    let res = c
        .server
        .client
        .get(c.server.url("/ai/chat/stream?message=x&user_id=7"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    // Other names stay the caller's word (the spec's anonymous use).
    assert_eq!(c.get("/conversations?user_id=007").await, (200, json!([])));
    assert_eq!(
        c.get(&format!(
            "/conversations/{token_conversation}?user_id=alice"
        ))
        .await
        .0,
        403
    );
    let res = c
        .server
        .client
        .get(c.server.url("/ai/conversations"))
        .bearer_auth("bad")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    assert_eq!(c.get("/conversations?limit=0").await.0, 400);
    // A user_id with a NUL byte, or far too long, is refused before it is stored or queried.
    assert_eq!(c.get("/conversations?user_id=%00").await.0, 400);
    let long = "u".repeat(256);
    assert_eq!(
        c.get(&format!("/conversations?user_id={long}")).await.0,
        400
    );
    let (status, _) = c
        .post("/chat", json!({"message": "hi", "user_id": "a\u{0}"}))
        .await;
    assert_eq!(status, 400);
    // Without an identity provider there are no accounts: any user_id is the caller's word.
    let open = start(&db, |_| {}).await;
    let (status, _) = open
        .post("/chat", json!({"message": "hi", "user_id": "7"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        open.get("/conversations?user_id=7").await.1[0]["message_count"],
        2
    );
}

async fn the_database_store_is_shared_by_two_instances(db: TestDb) {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let shared = |config: &mut AiConfig| config.store = StoreChoice::Database;
    let a = serve(&db, config(&sim, shared), false).await;
    let b = serve(&db, config(&sim, shared), false).await;
    let first: Value = a
        .client
        .post(a.url("/ai/chat"))
        .json(&json!({"message": "first"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = first["conversation_id"].as_str().unwrap();
    let second: Value = b
        .client
        .post(b.url("/ai/chat"))
        .json(&json!({"message": "second", "conversation_id": id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(second["conversation_id"], id);
    let detail: Value = a
        .client
        .get(a.url(&format!("/ai/conversations/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let contents: Vec<&str> = detail["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["first", "first", "second", "second"]);
    assert_eq!(detail["message_count"], 4);
    // A stream through the second instance is stored for the first.
    let res = b
        .client
        .post(b.url("/ai/chat/stream"))
        .json(&json!({"message": "streamed", "conversation_id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(names(&read_events(res).await).last(), Some(&"complete"));
    let detail: Value = a
        .client
        .get(a.url(&format!("/ai/conversations/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["message_count"], 6);
}

/// A client that goes away after the first chunk: the relay stops (dropping the provider's stream
/// closes that request, see tests/providers.rs) and nothing is stored, even once the provider
/// would have finished.
async fn a_client_that_disconnects_mid_stream_stores_nothing(db: TestDb) {
    use futures_util::StreamExt;
    let c = start(&db, |_| {}).await;
    c.sim.set_chunk_delay(Duration::from_millis(50));
    let message = "word ".repeat(20);
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat/stream"))
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap();
    let mut body = res.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("event: chunk") {
        seen.push_str(&String::from_utf8_lossy(
            &body.next().await.unwrap().unwrap(),
        ));
    }
    drop(body);
    // Longer than the whole reply takes (20 chunks, 50 ms apart).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(c.get("/conversations").await.1, json!([]));
    // The server still answers a whole stream afterwards.
    c.sim.set_chunk_delay(Duration::ZERO);
    let (_, events) = c.stream(json!({"message": "again"})).await;
    assert_eq!(names(&events).last(), Some(&"complete"));
}
