//! Pages of transactions come from the read cache (`READ_CACHE`): a webhook applied by this
//! process shows on the very next read, a write by another process once its entry expires (0.9 s).

use super::*;

kernel::backend_tests! {
    transaction_pages_show_local_writes_at_once_and_others_within_a_second,
}

fn payment(n: i64) -> Value {
    event(
        &format!("evt_cache_{n}"),
        "payment_intent.succeeded",
        n,
        json!({"id": format!("pi_cache_{n}"), "amount": 500, "currency": "usd",
               "customer": "cus_cache", "metadata": {"user_id": "1"}}),
    )
}

async fn total(c: &Ctx) -> i64 {
    let (status, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    assert_eq!(status, 200, "{list}");
    list["total"].as_i64().unwrap()
}

async fn transaction_pages_show_local_writes_at_once_and_others_within_a_second(db: TestDb) {
    let c = start(&db, |_| {}).await;
    assert_eq!(send_event(&c, payment(1)).await.0, 200);
    assert_eq!(total(&c).await, 1);
    // Applied here: the cached page is dropped, the next read has it.
    assert_eq!(send_event(&c, payment(2)).await.0, 200);
    assert_eq!(total(&c).await, 2);
    // A duplicate changes nothing.
    assert_eq!(send_event(&c, payment(2)).await.0, 200);
    assert_eq!(total(&c).await, 2);

    // Written by another process: seen within a second, at once without the cache.
    execute(
        &db,
        "UPDATE payment_transactions SET status = 'failed' \
         WHERE provider_transaction_id = 'pi_cache_1'",
    )
    .await;
    let (_, failed) = c
        .call("GET", "/transactions?status=failed", Some(ALICE), None)
        .await;
    assert_eq!(failed["total"], 1, "{failed}");
    let seen = kernel::testing::eventually(Duration::from_secs(2), || async {
        let (_, page) = c.call("GET", "/transactions", Some(ALICE), None).await;
        page["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["status"] == "failed")
    })
    .await;
    assert!(seen, "the other process's write did not show within 2 s");
}
