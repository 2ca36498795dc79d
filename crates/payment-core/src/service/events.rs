//! The webhook's writer: verified events applied a batch at a time ([`GroupCommit`]). An event's
//! statements are few and small, and most of its time was its own commit (PostgreSQL flushes
//! the WAL to disk on each): so the events that queue while earlier batches are written are
//! applied in one transaction, in the order they came, and each delivery is answered once the
//! transaction holding its event has committed, as before.
//!
//! Nothing of the guarantees changes. An event is claimed and applied in the transaction that
//! commits it, so it is applied once whatever batch it shares; two deliveries of one event in
//! one batch find the first's claim. Events apply in any order to the same rows (see
//! [`crate::webhook`]), so which events share a batch does not matter. A batch that fails is
//! rolled back whole, and each of its events is then applied alone, as a lone event always was:
//! one bad event costs only itself.
//!
//! A batch counts its transactions once, at its end ([`store::count_later`]): counted once an
//! event, each count row would leave a version an event that none can prune before the commit,
//! and the rows would spread over many pages that every list then reads.
//!
//! PostgreSQL writes up to [`PG_WRITERS`] batches at a time (a batch's statements are round
//! trips made one after another: alone, one would leave the database mostly idle); SQLite one,
//! since it writes one transaction at a time.

use kernel::db::{Backend, GroupCommit};
use kernel::{DbError, DbPool, write_tx};
use serde_json::Value;

use super::now;
use crate::error::PaymentError;
use crate::store;

/// The most events one transaction applies.
const BATCH: usize = 64;

/// The most batches written at a time on PostgreSQL (never more than half the pool: the rest
/// stays for reads and the other writes).
const PG_WRITERS: usize = 4;

/// Whether each event was processed now (`false`: its id was processed before).
pub(super) struct EventWriter(GroupCommit<Value, Result<bool, PaymentError>>);

impl EventWriter {
    pub(super) fn new(pool: DbPool) -> Self {
        let writers = match pool.backend() {
            Backend::Postgres => PG_WRITERS.min(pool.status().max_size / 2),
            Backend::Sqlite => 1,
        };
        EventWriter(GroupCommit::new(
            BATCH,
            writers,
            move |events: Vec<Value>| {
                let pool = pool.clone();
                async move { apply_all(&pool, &events).await }
            },
        ))
    }

    /// Applies `event` (its id and type already checked) with the events queued beside it:
    /// `false` when its id was processed before. Dropping the future does not take the event
    /// back: it is applied all the same.
    pub(super) async fn apply(&self, event: Value) -> Result<bool, PaymentError> {
        self.0.submit(event).await.unwrap_or_else(|| {
            Err(PaymentError::Db(DbError::Unit(
                "the webhook's writer stopped".into(),
            )))
        })
    }
}

/// The outcome of each event: one transaction for all, else each alone.
async fn apply_all(pool: &DbPool, events: &[Value]) -> Vec<Result<bool, PaymentError>> {
    if let [event] = events {
        return vec![apply_one(pool, event).await];
    }
    let together = write_tx!(pool, PaymentError, |tx| {
        store::count_later(tx).await?;
        let mut processed = Vec::with_capacity(events.len());
        for event in events {
            processed.push(crate::webhook::apply(tx, event, now()).await?);
        }
        store::write_counts(tx).await?;
        Ok(processed)
    });
    match together {
        Ok(processed) => processed.into_iter().map(Ok).collect(),
        Err(e) => {
            tracing::debug!(error = %e, events = events.len(), "a batch of webhook events failed: each goes alone");
            let mut outcomes = Vec::with_capacity(events.len());
            for event in events {
                outcomes.push(apply_one(pool, event).await);
            }
            outcomes
        }
    }
}

/// One event in its own transaction. Two events about one new customer or charge, applied at
/// once, can both find no row and both insert it: the second fails on the unique key, its
/// transaction rolls back whole, and applying it again then finds the row. An event whose
/// transaction PostgreSQL failed to break a deadlock with a batch written beside it (two
/// deliveries of one event, each in its own batch, claim their events in opposite orders) is
/// applied again the same way.
async fn apply_one(pool: &DbPool, event: &Value) -> Result<bool, PaymentError> {
    const ATTEMPTS: usize = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = write_tx!(pool, PaymentError, |tx| {
            crate::webhook::apply(tx, event, now()).await
        });
        match result {
            Err(PaymentError::Db(e))
                if (e.is_unique_violation() || e.is_concurrency_failure())
                    && attempt < ATTEMPTS =>
            {
                continue;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kernel::testing::{TestDb, WriteLock};
    use serde_json::json;
    use std::sync::Arc;

    fn paid(event: &str, intent: &str) -> Value {
        json!({"id": event, "type": "payment_intent.succeeded", "created": 1, "data": {"object": {
            "id": intent, "amount": 500, "currency": "usd", "customer": "cus_1",
            "metadata": {"user_id": "7"}}}})
    }

    /// The provider ids of the stored transactions, sorted.
    async fn stored(pool: &DbPool) -> Vec<String> {
        let mut pooled = pool.get().await.unwrap();
        let (rows, _) = crate::store::list_transactions(&mut pooled.conn(), None, None, 0, 100)
            .await
            .unwrap();
        let mut ids: Vec<String> = rows
            .into_iter()
            .map(|r| r.provider_transaction_id)
            .collect();
        ids.sort();
        ids
    }

    fn processed(outcomes: Vec<Result<bool, PaymentError>>) -> Vec<Option<bool>> {
        outcomes.into_iter().map(Result::ok).collect()
    }

    /// A batch applies in order in one transaction: a repeat finds the claim made before it.
    async fn a_batch_applies_its_events_in_order(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let batch = [
            paid("evt_a", "pi_a"),
            paid("evt_b", "pi_b"),
            paid("evt_a", "pi_a"),
        ];
        let outcomes = apply_all(&pool, &batch).await;
        assert_eq!(processed(outcomes), [Some(true), Some(true), Some(false)]);
        assert_eq!(stored(&pool).await, ["pi_a", "pi_b"]);
    }

    /// An event that fails rolls its batch back (the events before it included, whose claims
    /// must not survive: applied again alone they are processed, not duplicates), and only it
    /// fails.
    async fn a_bad_event_costs_only_itself(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let nameless = json!({"type": "payment_intent.succeeded", "data": {"object": {}}});
        let batch = [
            paid("evt_a", "pi_a"),
            nameless,
            paid("evt_b", "pi_b"),
            paid("evt_a", "pi_a"),
        ];
        let outcomes = apply_all(&pool, &batch).await;
        assert!(matches!(outcomes[1], Err(PaymentError::InvalidPayload)));
        assert_eq!(
            processed(outcomes),
            [Some(true), None, Some(true), Some(false)]
        );
        assert_eq!(stored(&pool).await, ["pi_a", "pi_b"]);
        // What the rolled-back batch set aside to count went with it.
        assert_eq!(counts_and_rows(&pool, 7).await, [(2, 2), (2, 2), (0, 0)]);
    }

    /// Deliveries made while the first batches are held queue, and each gets its own answer.
    async fn deliveries_queued_behind_a_held_batch_each_get_their_own_answer(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let writer = Arc::new(EventWriter::new(pool.clone()));
        let lock = WriteLock::take(&db.url, "payment_events").await;
        let deliveries: Vec<_> = (0..40)
            .map(|i| {
                let writer = writer.clone();
                // Every event twice: one of the two is the duplicate.
                let event = paid(&format!("evt_{}", i / 2), &format!("pi_{}", i / 2));
                tokio::spawn(async move { writer.apply(event).await })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        lock.release().await;
        let mut firsts = 0;
        for delivery in deliveries {
            firsts += usize::from(delivery.await.unwrap().unwrap());
        }
        assert_eq!(firsts, 20);
        let mut expected: Vec<String> = (0..20).map(|i| format!("pi_{i}")).collect();
        expected.sort();
        assert_eq!(stored(&pool).await, expected);
    }

    /// An event applied alone whose transaction PostgreSQL fails to break a deadlock is applied
    /// again. Here the deadlock is made on purpose: another transaction holds the payment's row,
    /// the event claims its id and waits for that row, then the other transaction claims the same
    /// id. PostgreSQL checks a waiting session for a deadlock once, `deadlock_timeout` after its
    /// wait began, and the session that finds one fails: the event's sessions check after 3 s, by
    /// when the other transaction waits too, and the other transaction's session never does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_failed_by_a_deadlock_is_applied_again() {
        use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
        let Some(db) = TestDb::postgres().await else {
            return; // PostgreSQL only: SQLite has one writer and no deadlocks
        };
        let mut other = AsyncPgConnection::establish(&db.url).await.unwrap();
        other
            .batch_execute(
                "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = ''3s''', \
                 current_database()); END $$; SET deadlock_timeout = '1min'",
            )
            .await
            .unwrap();
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let pending = json!({"id": "evt_0", "type": "payment_intent.payment_failed", "created": 1,
            "data": {"object": {"id": "pi_1", "amount": 500, "currency": "usd",
                                "customer": "cus_1", "metadata": {"user_id": "7"}}}});
        assert!(apply_one(&pool, &pending).await.unwrap());
        other
            .batch_execute(
                "BEGIN; SELECT id FROM payment_transactions WHERE payment_intent_id = 'pi_1' FOR UPDATE",
            )
            .await
            .unwrap();
        let applying = tokio::spawn({
            let pool = pool.clone();
            async move { apply_one(&pool, &paid("evt_1", "pi_1")).await }
        });
        // Wait until the event waits for the row (its claim made), however slow the machine.
        #[derive(diesel::QueryableByName)]
        struct Waiting {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let waiting = diesel::sql_query(
            "SELECT COUNT(*) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        let mut probe = AsyncPgConnection::establish(&db.url).await.unwrap();
        for attempt in 0.. {
            let found: Waiting = diesel_async::RunQueryDsl::get_result(waiting.clone(), &mut probe)
                .await
                .unwrap();
            if found.n > 0 {
                break;
            }
            assert!(
                attempt < 500,
                "the event never waited for the payment's row"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // Waits for the event's claim: the event's session finds the deadlock and fails.
        other
            .batch_execute(
                "INSERT INTO payment_events (id, event_type, processed_at) \
                 VALUES ('evt_1', 'payment_intent.succeeded', now())",
            )
            .await
            .unwrap();
        other.batch_execute("ROLLBACK").await.unwrap();
        assert!(applying.await.unwrap().unwrap(), "applied, not a duplicate");
        let mut pooled = pool.get().await.unwrap();
        let (rows, _) = crate::store::list_transactions(&mut pooled.conn(), None, None, 0, 10)
            .await
            .unwrap();
        let statuses: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
        assert_eq!(statuses, ["succeeded"]);
    }

    fn failed(event: &str, intent: &str, user: &str) -> Value {
        json!({"id": event, "type": "payment_intent.payment_failed", "created": 1,
            "data": {"object": {"id": intent, "amount": 500, "currency": "usd",
                                "customer": format!("cus_{user}"), "metadata": {"user_id": user}}}})
    }

    /// Each status's total (from the counts) beside the number of rows listed with it, of
    /// `user`'s transactions.
    async fn counts_and_rows(pool: &DbPool, user: i64) -> Vec<(i64, usize)> {
        let mut pooled = pool.get().await.unwrap();
        let mut found = Vec::new();
        for status in [None, Some("succeeded"), Some("failed")] {
            let (rows, total) =
                crate::store::list_transactions(&mut pooled.conn(), Some(user), status, 0, 100)
                    .await
                    .unwrap();
            found.push((total, rows.len()));
        }
        found
    }

    /// A batch's transactions are counted (a status changed within the batch moves its count),
    /// and on PostgreSQL once, at the batch's end: each count row has one version, not one an
    /// event. A second batch on the same connections counts on from there.
    async fn a_batch_counts_its_transactions_once(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let batch = [
            failed("evt_1", "pi_1", "7"),
            paid("evt_2", "pi_1"),
            failed("evt_3", "pi_2", "7"),
            paid("evt_4", "pi_3"),
            failed("evt_5", "pi_4", "8"),
        ];
        let outcomes = apply_all(&pool, &batch).await;
        assert_eq!(processed(outcomes), [Some(true); 5]);
        assert_eq!(counts_and_rows(&pool, 7).await, [(3, 3), (2, 2), (1, 1)]);
        assert_eq!(counts_and_rows(&pool, 8).await, [(1, 1), (0, 0), (1, 1)]);
        if pool.backend() == Backend::Postgres {
            #[derive(diesel::QueryableByName)]
            struct Versions {
                #[diesel(sql_type = diesel::sql_types::BigInt)]
                rows: i64,
                #[diesel(sql_type = diesel::sql_types::BigInt)]
                written: i64,
            }
            let mut pooled = pool.get().await.unwrap();
            let versions: Versions = kernel::with_conn!(&mut pooled.conn(), |c| {
                diesel::sql_query(
                    "SELECT COUNT(*) AS rows, \
                     MAX((ctid::text::point)[1])::BIGINT AS written \
                     FROM payment_transaction_counts",
                )
                .get_result(c)
                .await
                .unwrap()
            });
            // Line pointers are numbered in the order versions are written on a fresh page.
            assert_eq!((versions.rows, versions.written), (3, 3));
        }
        let next = [
            failed("evt_6", "pi_2", "7"),
            paid("evt_7", "pi_2"),
            paid("evt_8", "pi_5"),
        ];
        let outcomes = apply_all(&pool, &next).await;
        assert_eq!(processed(outcomes), [Some(true); 3]);
        assert_eq!(counts_and_rows(&pool, 7).await, [(4, 4), (4, 4), (0, 0)]);
    }

    kernel::backend_tests! {
        a_batch_counts_its_transactions_once,
        a_batch_applies_its_events_in_order,
        a_bad_event_costs_only_itself,
        deliveries_queued_behind_a_held_batch_each_get_their_own_answer,
    }
}
