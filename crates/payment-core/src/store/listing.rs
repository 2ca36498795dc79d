//! The lists of transactions (as rows, or as their ids and stored JSON, see [`crate::view`]),
//! their totals from the counts the triggers keep, and the JSON written for rows that lack it.

use diesel::backend::Backend;
use diesel::dsl::sql;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, Nullable, Text};
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
/// and the number that match: each row carries the total as a scalar subquery (run once); only a
/// page without rows asks for the total on its own.
pub async fn list_transactions(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    status: Option<&str>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<ListedTransaction>, i64)> {
    with_conn!(conn, |c| {
        let mut query = payment_transactions::table.into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(payment_transactions::user_id.eq(user_id));
        }
        if let Some(status) = status {
            query = query.filter(payment_transactions::status.eq(status));
        }
        let found: Vec<(ListedTransaction, Option<i64>)> = Cached(
            query
                .order((
                    payment_transactions::created_at.desc(),
                    payment_transactions::id.desc(),
                ))
                .offset(offset)
                .limit(limit)
                .select((
                    Rendered(ListedTransaction::as_select()),
                    counts_of!(user_id, status).single_value(),
                )),
        )
        .load(c)
        .await?;
        let total = match <[_]>::first(&found) {
            Some((_, total)) => total.unwrap_or(0),
            None => counted!(c, user_id, status)?,
        };
        Ok((found.into_iter().map(|(row, _)| row).collect(), total))
    })
}

/// One page of transactions as their ids and stored JSON (see [`crate::view`]), newest first,
/// and the number that match, as [`list_transactions`] reads them, in a statement written by
/// hand ([`JsonPage`]).
pub async fn list_transaction_json(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    status: Option<&str>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<(i64, Option<String>)>, i64)> {
    macro_rules! shaped {
        ($by_user:literal, $by_status:literal) => {
            JsonPage::<$by_user, $by_status> {
                user_id: user_id.unwrap_or_default(),
                status: status.unwrap_or_default(),
                offset,
                limit,
            }
        };
    }
    let found: Vec<(i64, Option<String>, Option<i64>)> = with_conn!(conn, |c| {
        match (user_id.is_some(), status.is_some()) {
            (true, true) => shaped!(true, true).load(c).await,
            (true, false) => shaped!(true, false).load(c).await,
            (false, true) => shaped!(false, true).load(c).await,
            (false, false) => shaped!(false, false).load(c).await,
        }
    })?;
    let total = match found.first() {
        Some((_, _, total)) => total.unwrap_or(0),
        None => with_conn!(conn, |c| counted!(c, user_id, status))?,
    };
    Ok((
        found.into_iter().map(|(id, json, _)| (id, json)).collect(),
        total,
    ))
}

/// The statement of [`list_transaction_json`]: the ids and stored JSON of one page of
/// transactions, each row with the number that match (a scalar subquery over the counts the
/// triggers keep, run once). Its text is one of four, fixed by its type (whether it filters by
/// user, by status): SQLite finds it among its prepared statements by that type, without writing
/// the text as it must for a boxed query, and on PostgreSQL the text is a few literals copied.
#[derive(Debug, Clone, Copy)]
struct JsonPage<'a, const BY_USER: bool, const BY_STATUS: bool> {
    user_id: i64,
    status: &'a str,
    offset: i64,
    limit: i64,
}

/// The type that keys [`JsonPage`]'s prepared statements: one per text.
struct JsonPageShape<const BY_USER: bool, const BY_STATUS: bool>;

impl<const U: bool, const S: bool> QueryId for JsonPage<'_, U, S> {
    type QueryId = JsonPageShape<U, S>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<const U: bool, const S: bool> Query for JsonPage<'_, U, S> {
    type SqlType = (BigInt, Nullable<Text>, Nullable<BigInt>);
}

impl<const U: bool, const S: bool> JsonPage<'_, U, S> {
    /// ` WHERE user_id = ? AND status = ?`, each when its filter is on, of `table`.
    fn filter<'b, DB: Backend>(
        &'b self,
        table: &str,
        out: &mut AstPass<'_, 'b, DB>,
    ) -> QueryResult<()>
    where
        i64: ToSql<BigInt, DB>,
        str: ToSql<Text, DB>,
    {
        let mut and = " WHERE ";
        if U {
            out.push_sql(and);
            out.push_sql(table);
            out.push_sql(".user_id = ");
            out.push_bind_param::<BigInt, _>(&self.user_id)?;
            and = " AND ";
        }
        if S {
            out.push_sql(and);
            out.push_sql(table);
            out.push_sql(".status = ");
            out.push_bind_param::<Text, _>(self.status)?;
        }
        Ok(())
    }
}

impl<const U: bool, const S: bool, DB: Backend> QueryFragment<DB> for JsonPage<'_, U, S>
where
    i64: ToSql<BigInt, DB>,
    str: ToSql<Text, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        out.push_sql("SELECT payment_transactions.id, payment_transactions.api_json, (SELECT ");
        out.push_sql(COUNTED);
        out.push_sql(" FROM payment_transaction_counts");
        self.filter("payment_transaction_counts", &mut out)?;
        out.push_sql(") FROM payment_transactions");
        self.filter("payment_transactions", &mut out)?;
        out.push_sql(
            " ORDER BY payment_transactions.created_at DESC, payment_transactions.id DESC LIMIT ",
        );
        out.push_bind_param::<BigInt, _>(&self.limit)?;
        out.push_sql(" OFFSET ");
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        Ok(())
    }
}

impl<const U: bool, const S: bool, Conn> diesel::RunQueryDsl<Conn> for JsonPage<'_, U, S> {}

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
            use diesel::sql_types::Array;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kernel::testing::TestDb;

    use super::*;

    /// How SQLite runs a page of the shape `U` (by user), `S` (by status).
    async fn sqlite_plan<const U: bool, const S: bool>(conn: &mut DbConn<'_>) -> String {
        let page = JsonPage::<U, S> {
            user_id: 7,
            status: "succeeded",
            offset: 0,
            limit: 20,
        };
        let text = diesel::debug_query::<diesel::sqlite::Sqlite, _>(&page).to_string();
        kernel::testing::sqlite_plan(conn, text.split(" -- binds").next().unwrap()).await
    }

    /// On SQLite a page without a status filter (every row, or one user's) is read from its
    /// time index alone, which carries each row's JSON: no seek into the table per row.
    #[tokio::test]
    async fn sqlite_pages_are_read_from_the_index_alone() {
        let db = TestDb::sqlite().await;
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let every = sqlite_plan::<false, false>(&mut conn).await;
        assert!(
            every.contains(
                "SCAN payment_transactions USING COVERING INDEX payment_transactions_created_idx"
            ),
            "{every}"
        );
        let users = sqlite_plan::<true, false>(&mut conn).await;
        assert!(
            users.contains(
                "SEARCH payment_transactions USING COVERING INDEX payment_transactions_user_idx (user_id=?)"
            ),
            "{users}"
        );
        // Newest first without a sort of its own: the index read backwards.
        assert!(!every.contains("TEMP B-TREE") && !users.contains("TEMP B-TREE"));
    }
}
