//! Who may call what (the spec's Payment rules 1, 2 and 4): with the auth module every route but
//! the webhook needs an active user, each user sees only their own rows, and the status summary
//! shows an administrator the deployment and anyone else their own rows; without it, all is open.

use serde_json::{Value, json};

use super::*;

kernel::backend_tests! {
    every_route_but_the_webhook_needs_an_active_user,
    another_users_rows_are_not_found,
    the_status_shows_an_admin_everything_and_a_user_their_own,
    without_auth_every_route_is_open_and_the_status_counts_everything,
}

/// Every route but the webhook, with ids of rows that exist.
fn routes(tx: i64, sub: i64, dispute: i64) -> Vec<(&'static str, String)> {
    vec![
        ("POST", "/checkout".to_owned()),
        ("GET", "/transactions".to_owned()),
        ("GET", format!("/transactions/{tx}")),
        ("POST", format!("/refund/{tx}")),
        ("GET", "/subscriptions".to_owned()),
        ("POST", format!("/subscriptions/{sub}/cancel")),
        ("GET", "/disputes".to_owned()),
        ("GET", format!("/disputes/{dispute}")),
        ("GET", "/invoices".to_owned()),
        ("POST", "/portal".to_owned()),
        ("GET", "/status".to_owned()),
    ]
}

/// Alice's rows: a paid charge, a subscription, and a dispute about the charge; Bob's: one paid
/// charge. Returns Alice's (transaction, subscription, dispute) ids.
async fn alice_and_bob_pay(c: &Ctx, alice: Option<&str>, bob: Option<&str>) -> (i64, i64, i64) {
    c.pay(alice.unwrap_or(""), "payment", "price_one_time")
        .await;
    c.pay(alice.unwrap_or(""), "subscription", "price_monthly")
        .await;
    c.pay(bob.unwrap_or(""), "payment", "price_one_time").await;
    let (_, list) = c.call("GET", "/transactions", alice, None).await;
    let charge = list["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["amount"] == 2000)
        .unwrap()
        .clone();
    let pi = charge["provider_transaction_id"].as_str().unwrap();
    let charge_id = c.sim.stripe_object(pi).unwrap()["latest_charge"]
        .as_str()
        .unwrap()
        .to_owned();
    let dispute = json!({"id": "dp_alice", "charge": charge_id, "amount": 2000, "currency": "usd",
                         "reason": "fraudulent", "status": "needs_response"});
    let sent = send_event(c, event("evt_dp", "charge.dispute.created", 100, dispute)).await;
    assert_eq!(sent.0, 200, "{sent:?}");
    let (_, subs) = c.call("GET", "/subscriptions", alice, None).await;
    let (_, disputes) = c.call("GET", "/disputes", alice, None).await;
    (
        charge["id"].as_i64().unwrap(),
        subs["subscriptions"][0]["id"].as_i64().unwrap(),
        disputes["disputes"][0]["id"].as_i64().unwrap(),
    )
}

async fn every_route_but_the_webhook_needs_an_active_user(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let (tx, sub, dispute) = alice_and_bob_pay(&c, Some(ALICE), Some(BOB)).await;
    for (method, path) in routes(tx, sub, dispute) {
        let body = (method == "POST").then(|| json!({}));
        let (status, answer) = c.call(method, &path, None, body.clone()).await;
        assert_eq!(
            (status, answer["detail"].as_str()),
            (401, Some("Not authenticated")),
            "{method} {path}"
        );
        let (status, answer) = c.call(method, &path, Some("forged"), body).await;
        assert_eq!(
            (status, answer["detail"].as_str()),
            (401, Some("Could not validate credentials")),
            "{method} {path}"
        );
    }
    // The webhook is authenticated by its signature, never by a user.
    let (status, answer) = c.call("POST", "/webhook", None, Some(json!({}))).await;
    assert_eq!(
        (status, answer["detail"].as_str()),
        (400, Some("Invalid payload"))
    );
}

async fn another_users_rows_are_not_found(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let (tx, sub, dispute) = alice_and_bob_pay(&c, Some(ALICE), Some(BOB)).await;
    for (method, path, detail) in [
        (
            "GET",
            format!("/transactions/{tx}"),
            "Transaction not found",
        ),
        ("POST", format!("/refund/{tx}"), "Transaction not found"),
        (
            "POST",
            format!("/subscriptions/{sub}/cancel"),
            "Subscription not found",
        ),
        ("GET", format!("/disputes/{dispute}"), "Dispute not found"),
    ] {
        let (status, answer) = c.call(method, &path, Some(BOB), None).await;
        assert_eq!(
            (status, answer["detail"].as_str()),
            (404, Some(detail)),
            "{method} {path}"
        );
        // The same as a row that does not exist at all.
        let missing = path.replace(&format!("/{tx}"), "/999999");
        let missing = missing.replace(&format!("/{sub}/"), "/999999/");
        let missing = missing.replace(&format!("/{dispute}"), "/999999");
        assert_eq!(c.call(method, &missing, Some(BOB), None).await.0, 404);
    }
    let totals = |body: &Value, list: &str| (body["total"].clone(), body[list].clone());
    let (_, txs) = c.call("GET", "/transactions", Some(BOB), None).await;
    assert_eq!(txs["total"], 1, "{txs}");
    let (_, subs) = c.call("GET", "/subscriptions", Some(BOB), None).await;
    assert_eq!(totals(&subs, "subscriptions"), (json!(0), json!([])));
    let (_, disputes) = c.call("GET", "/disputes", Some(BOB), None).await;
    assert_eq!(totals(&disputes, "disputes"), (json!(0), json!([])));
    // Alice's own rows are still hers, untouched by Bob's attempts.
    let (status, row) = c
        .call("GET", &format!("/transactions/{tx}"), Some(ALICE), None)
        .await;
    assert_eq!((status, row["status"].as_str()), (200, Some("succeeded")));
}

/// The figures of `/status` as (transactions, revenue, active subscriptions).
async fn figures(c: &Ctx, token: Option<&str>) -> (i64, i64, i64) {
    let (status, body) = c.call("GET", "/status", token, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["provider"], "stripe");
    (
        body["total_transactions"].as_i64().unwrap(),
        body["total_revenue_cents"].as_i64().unwrap(),
        body["active_subscriptions"].as_i64().unwrap(),
    )
}

async fn the_status_shows_an_admin_everything_and_a_user_their_own(db: TestDb) {
    let c = start(&db, |_| {}).await;
    // Before anything is paid, everyone sees zeros.
    assert_eq!(figures(&c, Some(ADMIN)).await, (0, 0, 0));
    alice_and_bob_pay(&c, Some(ALICE), Some(BOB)).await;
    // Alice: her charge (2000) and her subscription's first invoice (1500).
    assert_eq!(figures(&c, Some(ALICE)).await, (2, 3500, 1));
    assert_eq!(figures(&c, Some(BOB)).await, (1, 2000, 0));
    assert_eq!(figures(&c, Some(ADMIN)).await, (3, 5500, 1));
    // A refund of part of Alice's charge shows in her revenue and the deployment's.
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    let charge = list["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["amount"] == 2000)
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (status, _) = c
        .call(
            "POST",
            &format!("/refund/{charge}"),
            Some(ALICE),
            Some(json!({"amount": 500})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(figures(&c, Some(ALICE)).await, (3, 3000, 1));
    assert_eq!(figures(&c, Some(BOB)).await, (1, 2000, 0));
    assert_eq!(figures(&c, Some(ADMIN)).await, (4, 5000, 1));
    // The administrator's lists stay scoped to their own rows, as every user's are.
    let (_, own) = c.call("GET", "/transactions", Some(ADMIN), None).await;
    assert_eq!(own["total"], 0, "{own}");
}

async fn without_auth_every_route_is_open_and_the_status_counts_everything(db: TestDb) {
    let c = start_with(&db, |_| {}, false).await;
    let (tx, sub, dispute) = alice_and_bob_pay(&c, None, None).await;
    for (method, path) in routes(tx, sub, dispute) {
        if path.starts_with("/refund")
            || path.ends_with("/cancel")
            || path == "/checkout"
            || path == "/portal"
        {
            continue; // they act: checked below and by the other tests
        }
        let (status, answer) = c.call(method, &path, None, None).await;
        assert_eq!(status, 200, "{method} {path}: {answer}");
    }
    let (_, list) = c.call("GET", "/transactions", None, None).await;
    assert_eq!(list["total"], 3, "{list}");
    // Every invoice (the subscription's first), and no user whose customer a portal could open.
    let (_, invoices) = c.call("GET", "/invoices", None, None).await;
    assert_eq!(invoices["total"], 1, "{invoices}");
    let (status, answer) = c.call("POST", "/portal", None, None).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(figures(&c, None).await, (3, 5500, 1));
    let (status, answer) = c
        .call("POST", &format!("/subscriptions/{sub}/cancel"), None, None)
        .await;
    assert_eq!(status, 200, "{answer}");
}
