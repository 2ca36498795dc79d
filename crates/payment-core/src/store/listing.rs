//! The lists of transactions (as rows, or as their ids and stored JSON, see [`crate::view`]),
//! their totals from the counts the triggers keep, and the JSON written for rows that lack it.

use diesel::dsl::sql;
use diesel::sql_types::BigInt;
use diesel::{ExpressionMethods, QueryDsl, QueryResult, SelectableHelper};
use kernel::db::{Cached, Rendered};
use kernel::{DbConn, with_conn};

use super::ListedTransaction;
use crate::schema::{payment_transaction_counts, payment_transactions};
use crate::view::Shown;

/// The counts the triggers keep (`payment_transaction_counts`) of one user (or, `None`, of every
/// row) and of one status (or every one), as a boxed query to select their sum from.
macro_rules! counts_of {
    ($user_id:expr, $status:expr) => {{
        let mut query = payment_transaction_counts::table.into_boxed();
        if let Some(user_id) = $user_id {
            query = query.filter(payment_transaction_counts::user_id.eq(user_id));
        }
        if let Some(status) = $status {
            query = query.filter(payment_transaction_counts::status.eq(status));
        }
        query.select(sql::<BigInt>(COUNTED))
    }};
}

/// The sum of the counts [`counts_of!`] selects.
const COUNTED: &str = "CAST(COALESCE(SUM(transactions), 0) AS BIGINT)";

/// The number of transactions of one user and status (see [`counts_of!`]).
macro_rules! counted {
    ($c:expr, $user_id:expr, $status:expr) => {{
        Cached(counts_of!($user_id, $status))
            .get_result::<i64>($c)
            .await
    }};
}

/// One page of transactions of one user (or every one) and status (or every one), newest first,
/// selecting `$fields` and the number that match: each row carries the total as a scalar
/// subquery (run once); only a page without rows asks for the total on its own.
macro_rules! page_of {
    ($c:expr, $user_id:expr, $status:expr, $offset:expr, $limit:expr, $fields:expr) => {{
        let mut query = payment_transactions::table.into_boxed();
        if let Some(user_id) = $user_id {
            query = query.filter(payment_transactions::user_id.eq(user_id));
        }
        if let Some(status) = $status {
            query = query.filter(payment_transactions::status.eq(status));
        }
        let found: Vec<(_, Option<i64>)> = Cached(
            query
                .order((
                    payment_transactions::created_at.desc(),
                    payment_transactions::id.desc(),
                ))
                .offset($offset)
                .limit($limit)
                .select(($fields, counts_of!($user_id, $status).single_value())),
        )
        .load($c)
        .await?;
        let total = match <[_]>::first(&found) {
            Some((_, total)) => total.unwrap_or(0),
            None => counted!($c, $user_id, $status)?,
        };
        Ok((found.into_iter().map(|(row, _)| row).collect(), total))
    }};
}

/// One page of transactions, newest first, and the number that match (see [`page_of!`]).
pub async fn list_transactions(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    status: Option<&str>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<ListedTransaction>, i64)> {
    with_conn!(conn, |c| {
        page_of!(
            c,
            user_id,
            status,
            offset,
            limit,
            Rendered(ListedTransaction::as_select())
        )
    })
}

/// One page of transactions as their ids and stored JSON (see [`crate::view`]), newest first,
/// and the number that match (see [`page_of!`]).
pub async fn list_transaction_json(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    status: Option<&str>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<(i64, Option<String>)>, i64)> {
    with_conn!(conn, |c| {
        page_of!(
            c,
            user_id,
            status,
            offset,
            limit,
            (payment_transactions::id, payment_transactions::api_json)
        )
    })
}

/// The transactions of `ids` that exist, by id, as a list shows them.
pub async fn listed_by_ids(
    conn: &mut DbConn<'_>,
    ids: &[i64],
) -> QueryResult<Vec<ListedTransaction>> {
    with_conn!(conn, |c| {
        payment_transactions::table
            .filter(payment_transactions::id.eq_any(ids))
            .order(payment_transactions::id)
            .select(ListedTransaction::as_select())
            .load(c)
            .await
    })
}

/// Transactions without stored JSON (written before it existed, or changed by a writer that does
/// not write it), after `after_id`, by id.
pub async fn unrendered_transactions(
    conn: &mut DbConn<'_>,
    after_id: i64,
    limit: i64,
) -> QueryResult<Vec<i64>> {
    with_conn!(conn, |c| {
        payment_transactions::table
            .filter(payment_transactions::id.gt(after_id))
            .filter(payment_transactions::api_json.is_null())
            .order(payment_transactions::id)
            .limit(limit)
            .select(payment_transactions::id)
            .load(c)
            .await
    })
}

/// Writes the JSON of the transactions of `ids` that still have none, as they are now; how many
/// it wrote. The rows are locked by an update before they are read (on PostgreSQL a concurrent
/// writer may have changed them since they were listed; SQLite's write transaction holds the
/// whole file already), so run it in a write transaction. Three statements on PostgreSQL (one
/// array per column), one per row more on SQLite, where a statement is a call in process.
pub async fn render_transactions(conn: &mut DbConn<'_>, ids: &[i64]) -> QueryResult<usize> {
    let claimed: Vec<ListedTransaction> = with_conn!(conn, |c| {
        diesel::update(
            payment_transactions::table
                .filter(payment_transactions::id.eq_any(ids))
                .filter(payment_transactions::api_json.is_null()),
        )
        .set(payment_transactions::api_json.eq(None::<String>))
        .returning(ListedTransaction::as_returning())
        .load(c)
        .await
    })?;
    let rendered: Vec<(i64, String)> = claimed
        .iter()
        .map(|row| (row.id, Shown::from(row).to_json()))
        .collect();
    with_conn!(
        conn,
        postgres | c | {
            use diesel::sql_types::{Array, BigInt, Text};
            diesel::sql_query(
                "UPDATE payment_transactions AS t SET api_json = v.json \
                 FROM unnest($1::int8[], $2::text[]) AS v(id, json) WHERE t.id = v.id",
            )
            .bind::<Array<BigInt>, _>(rendered.iter().map(|(id, _)| *id).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(rendered.iter().map(|(_, json)| json).collect::<Vec<_>>())
            .execute(c)
            .await
        },
        sqlite | c | {
            for (id, json) in &rendered {
                diesel::update(payment_transactions::table.find(id))
                    .set(payment_transactions::api_json.eq(json))
                    .execute(c)
                    .await?;
            }
            Ok::<_, diesel::result::Error>(rendered.len())
        }
    )?;
    Ok(rendered.len())
}

/// (transactions, succeeded-and-refunded charges' amount minus refunds), of one user's rows or
/// (`None`) of every row. The sum is made by the database (cast back from PostgreSQL's `numeric`).
pub async fn totals(conn: &mut DbConn<'_>, user_id: Option<i64>) -> QueryResult<(i64, i64)> {
    macro_rules! scoped {
        () => {{
            let mut query = payment_transactions::table.into_boxed();
            if let Some(user_id) = user_id {
                query = query.filter(payment_transactions::user_id.eq(user_id));
            }
            query
        }};
    }
    with_conn!(conn, |c| {
        let total = counted!(c, user_id, None::<&str>)?;
        // Two texts (with or without the user): prepared once each, despite the `sql` fragment.
        let revenue: i64 = Cached(
            scoped!()
                .filter(payment_transactions::kind.eq("charge"))
                .filter(payment_transactions::status.eq_any([
                    "succeeded",
                    "partially_refunded",
                    "refunded",
                ]))
                .select(sql::<BigInt>(
                    "CAST(COALESCE(SUM(amount - amount_refunded), 0) AS BIGINT)",
                )),
        )
        .get_result(c)
        .await?;
        Ok((total, revenue))
    })
}
