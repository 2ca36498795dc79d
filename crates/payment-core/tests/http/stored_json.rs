//! Pages of transactions are written from each row's stored JSON (`api_json`): every write of the
//! module stores it, a hand edit of a shown column turns it NULL (the page then shows the
//! columns), and the module writes what is missing when it starts.

use super::*;

kernel::backend_tests! {
    every_write_of_the_module_stores_the_json_its_pages_show,
    hand_edits_show_at_once_and_a_restart_writes_what_is_missing,
    each_filter_lists_exactly_its_rows_newest_first,
}

/// The number `sql` (a `SELECT COUNT(*) AS n ...`) counts on the test database.
async fn count(db: &TestDb, sql: &str) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let pool = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    kernel::with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query(sql).get_result::<Count>(c).await
    })
    .unwrap()
    .n
}

const WITHOUT_JSON: &str = "SELECT COUNT(*) AS n FROM payment_transactions WHERE api_json IS NULL";

/// Every transaction on the caller's first page of 100 is the one `/transactions/{id}` reads from
/// its columns; the caller's total.
async fn assert_pages_show_the_rows(c: &Ctx, token: &str) -> usize {
    let (status, page) = c
        .call("GET", "/transactions?page_size=100", Some(token), None)
        .await;
    assert_eq!(status, 200, "{page}");
    let listed = page["transactions"].as_array().unwrap();
    let total = page["total"].as_u64().unwrap() as usize;
    assert_eq!(listed.len(), total.min(100), "{page}");
    for t in listed {
        let path = format!("/transactions/{}", t["id"]);
        let (status, row) = c.call("GET", &path, Some(token), None).await;
        assert_eq!(status, 200, "{row}");
        assert_eq!(*t, row, "the page and the row disagree");
    }
    total
}

async fn every_write_of_the_module_stores_the_json_its_pages_show(db: TestDb) {
    let c = start(&db, |_| {}).await;
    // A charge by checkout, refunded in part through the API (a refund row, the charge saved).
    c.pay(ALICE, "payment", "price_one_time").await;
    let (_, list) = c.call("GET", "/transactions", Some(ALICE), None).await;
    let id = list["transactions"][0]["id"].as_i64().unwrap();
    let reason = json!({"amount": 500, "reason": "\"quoted\" \\ tab\t, ünïcødé, 🦀, \u{1}"});
    let (status, refund) = c
        .call("POST", &format!("/refund/{id}"), Some(ALICE), Some(reason))
        .await;
    assert_eq!(status, 200, "{refund}");
    // Charges and refunds by webhook: a charge found again by a later event, a refund of it.
    let paid = json!({"id": "pi_w", "amount": 900, "currency": "eur", "customer": "cus_w",
                      "latest_charge": "ch_w", "description": "line one\nline \"two\"",
                      "metadata": {"user_id": "1"}});
    assert_eq!(
        send_event(&c, event("evt_w1", "payment_intent.succeeded", 10, paid))
            .await
            .0,
        200
    );
    let refunded = json!({"id": "ch_w", "payment_intent": "pi_w", "amount": 900,
        "amount_refunded": 400, "refunded": false, "currency": "eur", "customer": "cus_w",
        "refunds": {"data": [{"id": "re_w", "amount": 400, "currency": "eur",
                              "status": "succeeded", "reason": "duplicate"}]}});
    assert_eq!(
        send_event(&c, event("evt_w2", "charge.refunded", 11, refunded))
            .await
            .0,
        200
    );
    // A charge of a customer without a user yet, who gets one later (the charge is saved again).
    let stray = json!({"id": "pi_s", "amount": 300, "currency": "usd", "customer": "cus_s"});
    assert_eq!(
        send_event(&c, event("evt_s1", "payment_intent.succeeded", 12, stray))
            .await
            .0,
        200
    );
    let claimed = json!({"id": "cs_s", "mode": "payment", "payment_status": "paid",
        "payment_intent": "pi_s", "customer": "cus_s", "client_reference_id": "2",
        "amount_total": 300, "currency": "usd"});
    assert_eq!(
        send_event(
            &c,
            event("evt_s2", "checkout.session.completed", 13, claimed)
        )
        .await
        .0,
        200
    );

    assert_eq!(
        count(&db, WITHOUT_JSON).await,
        0,
        "a write left a row without its JSON"
    );
    assert_eq!(assert_pages_show_the_rows(&c, ALICE).await, 4);
    assert_eq!(assert_pages_show_the_rows(&c, BOB).await, 1);
    let (_, page) = c.call("GET", "/transactions", Some(ALICE), None).await;
    let shown: Vec<&str> = page["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        shown.iter().filter(|s| **s == "partially_refunded").count(),
        2,
        "{page}"
    );
}

async fn hand_edits_show_at_once_and_a_restart_writes_what_is_missing(db: TestDb) {
    let c = start(&db, |_| {}).await;
    for n in 0..3 {
        let paid = json!({"id": format!("pi_{n}"), "amount": 100 + n, "currency": "usd",
                          "customer": "cus_1", "metadata": {"user_id": "1"}});
        let delivery = event(&format!("evt_{n}"), "payment_intent.succeeded", n, paid);
        assert_eq!(send_event(&c, delivery).await.0, 200);
    }
    // A write of columns the JSON does not show keeps it, as does a shown one set to itself.
    execute(
        &db,
        "UPDATE payment_transactions SET amount_refunded = 1, updated_at = created_at;
         UPDATE payment_transactions SET status = status, description = description",
    )
    .await;
    assert_eq!(count(&db, WITHOUT_JSON).await, 0);
    // A hand edit of a shown column drops the row's JSON; a stored text that is no object is
    // never spliced. Both pages show the columns.
    execute(
        &db,
        "UPDATE payment_transactions SET description = 'edited \"by hand\"' \
             WHERE provider_transaction_id = 'pi_0';
         UPDATE payment_transactions SET api_json = '[]' WHERE provider_transaction_id = 'pi_1';",
    )
    .await;
    assert_eq!(count(&db, WITHOUT_JSON).await, 1);
    assert_eq!(assert_pages_show_the_rows(&c, ALICE).await, 3);
    let (_, page) = c
        .call("GET", "/transactions?status=succeeded", Some(ALICE), None)
        .await;
    let edited: Vec<&Value> = page["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["provider_transaction_id"] == "pi_0")
        .collect();
    assert_eq!(edited[0]["description"], "edited \"by hand\"", "{page}");
    // Rows stored by a program that does not know the column: more than one batch of them.
    execute(
        &db,
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200) \
         INSERT INTO payment_transactions (user_id, kind, status, amount, amount_refunded, \
             currency, description, provider_transaction_id, created_at, updated_at) \
         SELECT 1, 'charge', 'succeeded', i, 0, 'usd', 'bulk', 'pi_bulk_' || i, \
             '2030-01-01 00:00:00', '2030-01-01 00:00:00' FROM n",
    )
    .await;
    assert_eq!(count(&db, WITHOUT_JSON).await, 1201);
    // Written by another process: past the read cache's 0.9 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(assert_pages_show_the_rows(&c, ALICE).await, 1203);
    // Started again, the module writes the missing JSON (not the hand-stored text).
    drop(c);
    let c = start(&db, |_| {}).await;
    assert_eq!(count(&db, WITHOUT_JSON).await, 0);
    assert_eq!(assert_pages_show_the_rows(&c, ALICE).await, 1203);
    let (_, last) = c
        .call(
            "GET",
            "/transactions?page_size=100&page=13",
            Some(ALICE),
            None,
        )
        .await;
    let last = last["transactions"].as_array().unwrap();
    assert_eq!(last.len(), 3);
    for t in last {
        let path = format!("/transactions/{}", t["id"]);
        assert_eq!(*t, c.call("GET", &path, Some(ALICE), None).await.1);
    }
}

/// The ids `filter` (an SQL condition, or `TRUE`) selects, as a page orders them.
async fn ids_where(db: &TestDb, filter: &str) -> Vec<i64> {
    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        id: i64,
    }
    let sql = format!(
        "SELECT id FROM payment_transactions WHERE {filter} ORDER BY created_at DESC, id DESC"
    );
    let pool = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    kernel::with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query(sql).load::<Id>(c).await
    })
    .unwrap()
    .into_iter()
    .map(|row| row.id)
    .collect()
}

/// A page's statement is one of four (with or without the user, with or without the status):
/// each lists exactly the rows its filters select, newest first, across pages, with their total.
async fn each_filter_lists_exactly_its_rows_newest_first(db: TestDb) {
    let c = start(&db, |_| {}).await;
    // Alice's, Bob's and an unassigned customer's payments, some of them failed.
    for n in 0..9 {
        let user = ["1", "2", ""][n % 3];
        let metadata = if user.is_empty() {
            json!({})
        } else {
            json!({"user_id": user})
        };
        let paid = json!({"id": format!("pi_{n}"), "amount": 100 + n, "currency": "usd",
                          "customer": format!("cus_{user}"), "metadata": metadata});
        let kind = if n % 2 == 0 {
            "payment_intent.succeeded"
        } else {
            "payment_intent.payment_failed"
        };
        let delivery = event(&format!("evt_{n}"), kind, n as i64, paid);
        assert_eq!(send_event(&c, delivery).await.0, 200);
    }
    let open = start_with(&db, |_| {}, false).await;
    let cases = [
        (&c, Some(ALICE), "", "user_id = 1"),
        (
            &c,
            Some(ALICE),
            "failed",
            "user_id = 1 AND status = 'failed'",
        ),
        (
            &c,
            Some(BOB),
            "succeeded",
            "user_id = 2 AND status = 'succeeded'",
        ),
        (&open, None, "", "TRUE"),
        (&open, None, "failed", "status = 'failed'"),
    ];
    for (server, token, status, filter) in cases {
        let expected = ids_where(&db, filter).await;
        assert!(!expected.is_empty(), "{filter}");
        let mut listed = Vec::new();
        for page in 1..=5 {
            let path = format!("/transactions?status={status}&page={page}&page_size=2");
            let (code, body) = server.call("GET", &path, token, None).await;
            assert_eq!(code, 200, "{body}");
            assert_eq!(body["total"], expected.len(), "{filter}: {body}");
            for t in body["transactions"].as_array().unwrap() {
                listed.push(t["id"].as_i64().unwrap());
                if !status.is_empty() {
                    assert_eq!(t["status"], status, "{body}");
                }
            }
        }
        assert_eq!(listed, expected, "{filter}");
    }
}
