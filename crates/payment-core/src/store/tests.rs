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

kernel::backend_tests! { page_reads_are_prepared_once_and_reused }
