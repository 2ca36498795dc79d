//! A transaction's counts written once, at its end (PostgreSQL; see the migration
//! `payment_counts_once_a_transaction`): [`count_later`] makes the triggers of the rest of the
//! transaction set their changes aside, and [`write_counts`] adds them up into
//! `payment_transaction_counts`, one row a user and status. On SQLite both do nothing: its
//! triggers count each row as before, in place.
//!
//! The table the changes wait in is the session's own (temporary, created by the first
//! transaction that needs it; `IF NOT EXISTS` says so with a notice, which the transaction's
//! `client_min_messages` keeps off the log) and rolls back with the transaction.

use diesel::QueryResult;
use kernel::{DbConn, with_conn};

// Read only in the PostgreSQL arms, which an SQLite-only kernel leaves out.
#[allow(dead_code)]
const COUNT_LATER: &str = "\
SET LOCAL client_min_messages = warning;
CREATE TEMPORARY TABLE IF NOT EXISTS payment_count_changes (
    user_id BIGINT NOT NULL, status TEXT NOT NULL, change INTEGER NOT NULL);
SET LOCAL keel.payment_counts_later = on";

#[allow(dead_code)]
const WRITE_COUNTS: &str = "\
WITH changes AS (DELETE FROM pg_temp.payment_count_changes RETURNING user_id, status, change)
INSERT INTO payment_transaction_counts (user_id, status, stripe, transactions)
SELECT user_id, status, pg_backend_pid() % 64, SUM(change) FROM changes
GROUP BY user_id, status HAVING SUM(change) <> 0
ON CONFLICT (user_id, status, stripe)
DO UPDATE SET transactions = payment_transaction_counts.transactions + EXCLUDED.transactions";

/// From now until the transaction ends, the counts of the payment transactions it writes wait
/// for [`write_counts`], which must run before it commits.
pub async fn count_later(conn: &mut DbConn<'_>) -> QueryResult<()> {
    with_conn!(
        conn,
        postgres | c | {
            use diesel_async::SimpleAsyncConnection;
            c.batch_execute(COUNT_LATER).await
        },
        sqlite | _c | Ok(())
    )
}

/// Writes the counts set aside since [`count_later`].
pub async fn write_counts(conn: &mut DbConn<'_>) -> QueryResult<()> {
    with_conn!(
        conn,
        postgres | c | {
            use diesel_async::RunQueryDsl;
            kernel::db::Cached(diesel::sql_query(WRITE_COUNTS))
                .execute(c)
                .await
                .map(drop)
        },
        sqlite | _c | Ok(())
    )
}
