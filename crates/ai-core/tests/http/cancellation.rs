//! A client that resets its connection while its question is with the provider: the reply is still
//! stored, once (the module's service is wrapped in `Detached` when it is built, so each call is a
//! unit of work that a dropped request does not cut off between the provider's answer and its
//! record).

use kernel::testing::{eventually, reset_mid_request};

use super::*;

kernel::backend_tests! {
    a_chat_whose_client_left_is_stored_once,
}

async fn a_chat_whose_client_left_is_stored_once(db: TestDb) {
    let c = start(&db, |config| config.store = StoreChoice::Database).await;
    c.sim.push_fault(
        Provider::Openai,
        Fault {
            delay_ms: Some(1_000),
            ..Fault::default()
        },
    );
    let request = c
        .server
        .client
        .post(c.server.url("/ai/chat"))
        .json(&json!({"message": "Left behind"}));
    reset_mid_request(request, Duration::from_millis(300)).await;
    let stored = eventually(Duration::from_secs(10), || async {
        c.get("/conversations").await.1 != json!([])
    })
    .await;
    assert!(stored, "the reply was dropped with its request");
    let (status, list) = c.get("/conversations").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["message_count"], 2, "{list}");
    assert_eq!(list[0]["title"], "Left behind");
    assert_eq!(c.sim.journal_for(Provider::Openai).len(), 1);
}
