#![allow(clippy::unwrap_used)]

use kernel::db::Backend;
use kernel::testing::{StatementLog, TestDb};

use super::*;

/// The lists and totals that payment pages read are prepared once per filter shape and reused,
/// whatever the values: on PostgreSQL, where an unprepared statement costs a second round trip
/// and a fresh plan (diesel's SQLite connection prepares in process, see `kernel::db::Cached`).
async fn page_reads_are_prepared_once_and_reused(db: TestDb) {
    let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
    let mut pooled = pool.get().await.unwrap();
    let mut conn = pooled.conn();
    let log = StatementLog::default();
    log.attach(&mut conn);
    for round in 0..2 {
        for user in [None, Some(7 + round)] {
            for status in [None, Some(["succeeded", "failed"][round as usize])] {
                list_transactions(&mut conn, user, status, 20 * round, 20)
                    .await
                    .unwrap();
                list_transaction_json(&mut conn, user, status, 20 * round, 20)
                    .await
                    .unwrap();
                list_invoices(&mut conn, user, status, 20 * round, 20)
                    .await
                    .unwrap();
                list_subscriptions(&mut conn, user, status).await.unwrap();
                let statuses = status.map(|s| [s, "won"]);
                list_disputes(&mut conn, user, statuses.as_ref().map(|s| &s[..]))
                    .await
                    .unwrap();
            }
            totals(&mut conn, user).await.unwrap();
            count_active_subscriptions(&mut conn, user).await.unwrap();
        }
    }
    assert!(log.statements_run() > 0);
    if db.backend == Backend::Postgres {
        assert_eq!(log.not_reused(), Vec::<String>::new());
    }
}

/// A transaction's insert (a charge, a refund) has one text whatever fields are `None`, prepared
/// once per connection. A `None` left to the column's default gave each combination of `None`s
/// its own text, which diesel wrote out on every call to find it among the prepared statements;
/// with one text, SQLite finds it by the query's type alone.
async fn transaction_inserts_have_one_text_each(db: TestDb) {
    let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
    let mut pooled = pool.get().await.unwrap();
    let mut conn = pooled.conn();
    let log = StatementLog::default();
    log.attach(&mut conn);
    for n in 0..4 {
        let mut new = transaction(&format!("pi_{n}"), Some(n), "succeeded");
        if n % 2 == 1 {
            new.provider_customer_id = Some("cus_1".to_owned());
            new.payment_intent_id = Some(format!("pi_{n}"));
            new.charge_id = Some(format!("ch_{n}"));
        }
        let charge = insert_transaction(&mut conn, &new).await.unwrap();
        let refund = NewTransaction {
            kind: "refund".to_owned(),
            provider_transaction_id: format!("re_{n}"),
            parent_id: (n % 2 == 0).then_some(charge.id),
            ..new
        };
        assert!(insert_refund(&mut conn, &refund).await.unwrap());
        assert!(!insert_refund(&mut conn, &refund).await.unwrap());
    }
    assert_eq!((log.statements_run(), log.texts_run()), (12, 2));
    assert_eq!(log.not_reused(), Vec::<String>::new());
}

/// A charge of 100 with only the fields every row has.
fn transaction(provider_id: &str, user_id: Option<i64>, status: &str) -> NewTransaction {
    let now = kernel::time::now();
    NewTransaction {
        user_id,
        provider_customer_id: None,
        kind: "charge".to_owned(),
        status: status.to_owned(),
        amount: 100,
        amount_refunded: 0,
        currency: "usd".to_owned(),
        description: String::new(),
        provider_transaction_id: provider_id.to_owned(),
        payment_intent_id: None,
        charge_id: None,
        parent_id: None,
        created_at: now,
        updated_at: now,
    }
}

/// A page's total is the number of rows its filters match, whether the page has rows (the total
/// comes with them) or lies past the last row (asked on its own).
async fn a_pages_total_counts_what_its_filters_match(db: TestDb) {
    let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
    let mut pooled = pool.get().await.unwrap();
    let mut conn = pooled.conn();
    let rows = [
        (Some(1), "succeeded"),
        (Some(1), "failed"),
        (Some(1), "succeeded"),
        (Some(2), "succeeded"),
        (None, "pending"),
    ];
    for (n, (user_id, status)) in rows.into_iter().enumerate() {
        let new = transaction(&format!("pi_{n}"), user_id, status);
        insert_transaction(&mut conn, &new).await.unwrap();
    }
    for (user, status, expected) in [
        (None, None, 5),
        (Some(1), None, 3),
        (Some(1), Some("succeeded"), 2),
        (None, Some("succeeded"), 3),
        (Some(2), Some("failed"), 0),
        (Some(3), None, 0),
    ] {
        for (offset, shown) in [(0, expected.min(2)), (10, 0)] {
            let (page, total) = list_transactions(&mut conn, user, status, offset, 2)
                .await
                .unwrap();
            assert_eq!(
                (page.len() as i64, total),
                (shown, expected),
                "{user:?} {status:?} from {offset}"
            );
            let owned_by = |t: &ListedTransaction| {
                let n: usize = t.provider_transaction_id["pi_".len()..].parse().unwrap();
                rows[n].0
            };
            assert!(
                page.iter()
                    .all(|t| user.is_none_or(|u| owned_by(t) == Some(u)))
            );
            assert!(page.iter().all(|t| status.is_none_or(|s| t.status == s)));
        }
    }
}

kernel::backend_tests! {
    page_reads_are_prepared_once_and_reused,
    transaction_inserts_have_one_text_each,
    a_pages_total_counts_what_its_filters_match,
}
