//! The transaction counts the lists' totals read (`payment_transaction_counts`, kept by triggers,
//! spread over stripes on PostgreSQL) stay equal to the rows under concurrent webhooks: new
//! payments and refunds that change a payment's status, delivered at once from many connections.

use futures_util::StreamExt;

use super::*;

kernel::backend_tests! {
    counts_agree_with_the_rows_after_concurrent_webhooks,
}

async fn counts_agree_with_the_rows_after_concurrent_webhooks(db: TestDb) {
    let c = start(&db, |_| {}).await;
    let payment = |n: u32| {
        event(
            &format!("evt_pay_{n}"),
            "payment_intent.succeeded",
            i64::from(n),
            json!({"id": format!("pi_c{n}"), "amount": 1000, "currency": "usd",
                   "customer": format!("cus_c{}", n % 7), "latest_charge": format!("ch_c{n}"),
                   "metadata": {"user_id": "1"}}),
        )
    };
    let refund = |n: u32| {
        event(
            &format!("evt_refund_{n}"),
            "charge.refunded",
            10_000 + i64::from(n),
            json!({"id": format!("ch_c{n}"), "payment_intent": format!("pi_c{n}"), "amount": 1000,
                   "amount_refunded": 1000, "refunded": true, "currency": "usd",
                   "customer": format!("cus_c{}", n % 7),
                   "refunds": {"data": [{"id": format!("re_c{n}"), "amount": 1000,
                                         "currency": "usd", "status": "succeeded"}]}}),
        )
    };
    let sent = |events: Vec<Value>| {
        let c = &c;
        async move {
            futures_util::stream::iter(events)
                .map(|e| async move { send_event(c, e).await.0 })
                .buffer_unordered(24)
                .collect::<Vec<u16>>()
                .await
        }
    };
    let statuses = sent((0..150).map(payment).collect()).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    // Every third payment fully refunded: a status change and a refund row each.
    let statuses = sent((0..150).step_by(3).map(refund).collect()).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    assert_counts_agree(&db).await;
    let (status, list) = c
        .call("GET", "/transactions?page_size=1", Some(ALICE), None)
        .await;
    assert_eq!(status, 200, "{list}");
    let (_, all) = c
        .call(
            "GET",
            "/transactions?page_size=100&page=1",
            Some(ALICE),
            None,
        )
        .await;
    assert_eq!(list["total"], all["total"], "{list}");
    assert!(list["total"].as_i64().unwrap() >= 150, "{list}");
}
