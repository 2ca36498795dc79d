//! Resend's events find their email by the reference keel sent with it (the `keel_message` tag,
//! which Resend sends back in every event of the email), checked against the email's id at
//! Resend: an event without it, or with another email's, changes nothing.

use super::*;

kernel::backend_tests! {
    resend_events_find_their_email_by_its_reference,
}

/// The reference keel sent with the email Resend knows as `email_id`.
fn reference_of(c: &Ctx, email_id: &str) -> String {
    let outbox = c.sim.outbox();
    let email = outbox.emails.iter().find(|e| e.id == email_id).unwrap();
    let tags = email.tags.as_array().unwrap();
    let tag = tags.iter().find(|t| t["name"] == "keel_message").unwrap();
    tag["value"].as_str().unwrap().to_owned()
}

/// Posts `email.delivered` for `email_id` with these tags.
async fn delivered(c: &Ctx, email_id: &str, tags: Value) -> (u16, Value) {
    c.resend_event_with("email.delivered", email_id, tags, 0, WEBHOOK_KEY)
        .await
}

async fn resend_events_find_their_email_by_its_reference(db: TestDb) {
    let c = start(db).await;
    let (first, second) = (c.send_email().await, c.send_email().await);
    let (ref_first, ref_second) = (reference_of(&c, &first), reference_of(&c, &second));
    assert_ne!(ref_first, ref_second);
    // Without the reference, with the other email's, or with one nobody sent: nothing changes.
    for (tags, what) in [
        (json!({}), "no tags"),
        (json!({"kind": "welcome"}), "other tags"),
        (
            json!({"keel_message": ref_second}),
            "the other email's reference",
        ),
        (
            json!({"keel_message": "0190b6a2-0000-7000-8000-000000000000"}),
            "an unknown reference",
        ),
        (
            json!("keel_message"),
            "tags that are not an object or a list",
        ),
    ] {
        assert_eq!(
            delivered(&c, &first, tags).await,
            (200, json!({"applied": false})),
            "{what}"
        );
    }
    assert_eq!(c.logged(&first).await["status"], "sent");
    // Its own, as Resend's events carry tags (an object), applies.
    assert_eq!(
        delivered(&c, &first, json!({"keel_message": ref_first, "kind": "x"})).await,
        (200, json!({"applied": true}))
    );
    assert_eq!(c.logged(&first).await["status"], "delivered");
    // Tags as a send lists them ({name, value}) are read too.
    let listed =
        json!([{"name": "kind", "value": "x"}, {"name": "keel_message", "value": ref_second}]);
    assert_eq!(
        delivered(&c, &second, listed).await,
        (200, json!({"applied": true}))
    );
    assert_eq!(c.logged(&second).await["status"], "delivered");
}
