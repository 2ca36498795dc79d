//! A client that resets its connection while its e-mail is with the provider: the send still
//! completes and is logged, once (the module's service is wrapped in `Detached` when it is built,
//! so each call is a unit of work that a dropped request does not cut off between the send and its
//! record).

use kernel::testing::{eventually, reset_mid_request};

use super::*;

kernel::backend_tests! {
    a_send_whose_client_left_is_logged_once,
}

async fn a_send_whose_client_left_is_logged_once(db: TestDb) {
    let c = start(db).await;
    c.sim.push_fault(
        Provider::Resend,
        Fault {
            delay_ms: Some(1_000),
            ..Fault::default()
        },
    );
    let request = c
        .server
        .client
        .post(c.server.url("/api/v1/comms/email/send"))
        .bearer_auth(USER)
        .json(&json!({"to": ["a@example.com"], "subject": "Hi", "text": "Left behind"}));
    reset_mid_request(request, Duration::from_millis(300)).await;
    let logged = || async {
        let (status, body) = c.get("/messages?page_size=100", Some(ADMIN)).await;
        assert_eq!(status, 200, "{body}");
        body["messages"].as_array().unwrap().clone()
    };
    let recorded = eventually(Duration::from_secs(10), || async {
        !logged().await.is_empty()
    })
    .await;
    assert!(recorded, "the send was dropped with its request");
    let messages = logged().await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["status"], "sent", "{messages:?}");
    assert_eq!(c.sim.journal_for(Provider::Resend).len(), 1);
}
