//! What a browser's `EventSource` relies on: a `retry:` first, an id on every event, and a
//! reconnect (`Last-Event-ID`) answered 204 without asking the provider again, after `complete`,
//! after `error` and in the middle of a stream, on POST and GET.

use eventsource_stream::{Event, Eventsource};
use futures_util::StreamExt;

use super::*;

kernel::backend_tests! {
    every_event_has_an_id_after_a_retry_line,
    a_reconnect_is_answered_204_without_asking_again,
}

/// The raw body of a stream and its events as a real SSE parser reads them.
async fn raw_stream(res: reqwest::Response) -> (String, Vec<Event>) {
    let text = res.text().await.unwrap();
    let bytes = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(text.clone())]);
    let events = bytes
        .eventsource()
        .map(|e| e.unwrap())
        .collect::<Vec<Event>>()
        .await;
    (text, events)
}

/// Each event's id is `<message_id>:<n>`, n counting from 0; returns the message id.
fn assert_numbered(events: &[Event]) -> String {
    let (message_id, _) = events[0].id.split_once(':').expect("an id on connect");
    assert!(uuid::Uuid::parse_str(message_id).is_ok(), "{events:?}");
    for (n, e) in events.iter().enumerate() {
        assert_eq!(e.id, format!("{message_id}:{n}"), "{events:?}");
    }
    message_id.to_owned()
}

fn llm_calls(c: &Ctx) -> usize {
    c.sim.journal_for(Provider::Openai).len()
}

async fn every_event_has_an_id_after_a_retry_line(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat/stream"))
        .json(&json!({"message": "one two three"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let (text, events) = raw_stream(res).await;
    // The reconnection time comes first, before any event.
    assert!(text.starts_with("retry: 1000\n\n"), "{text}");
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        names,
        ["connect", "chunk", "chunk", "chunk", "final", "complete"]
    );
    let message_id = assert_numbered(&events);
    let last: Value = serde_json::from_str(&events[4].data).unwrap();
    assert_eq!(last["message_id"], message_id.as_str());
    // The data are the spec's, with who answered added.
    let complete: Value = serde_json::from_str(&events[5].data).unwrap();
    assert_eq!(
        complete,
        json!({"status": "completed", "message": "Stream completed", "provider": "openai", "model": "gpt-4o-mini"})
    );
    // The GET form and a failed stream are numbered the same way.
    let res = c
        .server
        .client
        .get(c.server.url("/ai/chat/stream?message=hi"))
        .send()
        .await
        .unwrap();
    let (text, events) = raw_stream(res).await;
    assert!(text.starts_with("retry: 1000\n\n"), "{text}");
    assert_eq!(events.last().unwrap().event, "complete");
    assert_numbered(&events);
    c.sim.push_fault(Provider::Openai, Fault::status(500));
    let res = c
        .server
        .client
        .get(c.server.url("/ai/chat/stream?message=hi"))
        .send()
        .await
        .unwrap();
    let (_, events) = raw_stream(res).await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["connect", "error"]);
    assert_numbered(&events);
}

async fn a_reconnect_is_answered_204_without_asking_again(db: TestDb) {
    let c = start(&db, |config| config.store = StoreChoice::Database).await;
    let url = c.server.url("/ai/chat/stream?message=hello%20again");
    let res = c.server.client.get(&url).send().await.unwrap();
    let (_, events) = raw_stream(res).await;
    let complete = events.last().unwrap();
    assert_eq!(complete.event, "complete");
    let final_data: Value = serde_json::from_str(&events[events.len() - 2].data).unwrap();
    let conversation = final_data["conversation_id"].as_str().unwrap().to_owned();
    let asked = llm_calls(&c);
    assert_eq!(asked, 1);
    // What a browser does once the stream has ended: the same request with the last id.
    let reconnect = |id: &str| {
        c.server
            .client
            .get(&url)
            .header("Last-Event-ID", id)
            .header("Accept", "text/event-stream")
            .send()
    };
    let res = reconnect(&complete.id).await.unwrap();
    assert_eq!(res.status().as_u16(), 204);
    assert_eq!(res.text().await.unwrap(), "");
    // In the middle of a stream (its connection lost) the answer is the same: a stream is never
    // resumed nor asked again.
    let res = reconnect(&events[1].id).await.unwrap();
    assert_eq!(res.status().as_u16(), 204);
    assert_eq!(llm_calls(&c), asked);
    assert_eq!(
        c.get(&format!("/conversations/{conversation}")).await.1["message_count"],
        2
    );
    // After an error event, the same.
    c.sim.push_fault(Provider::Openai, Fault::status(500));
    let failing = c.server.url("/ai/chat/stream?message=refused");
    let res = c.server.client.get(&failing).send().await.unwrap();
    let (_, events) = raw_stream(res).await;
    let error = events.last().unwrap();
    assert_eq!(error.event, "error");
    let asked = llm_calls(&c);
    let res = c
        .server
        .client
        .get(&failing)
        .header("Last-Event-ID", &error.id)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    assert_eq!(llm_calls(&c), asked);
    // The POST form, as a client library that reconnects sends it.
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat/stream"))
        .header("Last-Event-ID", &complete.id)
        .json(&json!({"message": "hello again", "conversation_id": conversation}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    assert_eq!(llm_calls(&c), asked);
    // A request that a new question would have refused is refused the same way.
    let res = c
        .server
        .client
        .get(c.server.url("/ai/chat/stream?message=%20"))
        .header("Last-Event-ID", &complete.id)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat/stream"))
        .header("Last-Event-ID", &complete.id)
        .json(&json!({"message": "x", "conversation_id": uuid::Uuid::new_v4().to_string()}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 404);
    // An empty Last-Event-ID (which browsers never send) is a new question.
    let res = c
        .server
        .client
        .get(&url)
        .header("Last-Event-ID", "")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let (_, events) = raw_stream(res).await;
    assert_eq!(events.last().unwrap().event, "complete");
    assert_eq!(llm_calls(&c), asked + 1);
}
