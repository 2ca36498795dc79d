//! Every SQL query of the payment module (the disputes' in [`disputes`], the invoices' in
//! [`invoices`], the webhook's own in [`events`], a transaction's counts written at its end in
//! [`counts`]).

mod counts;
mod disputes;
mod events;
mod invoices;
mod listing;
#[cfg(test)]
mod tests;

pub use counts::{count_later, write_counts};
pub use disputes::{
    DisputeRow, find_dispute, find_dispute_by_provider_id, link_disputes, list_disputes,
    put_dispute,
};
pub use events::{
    ChargeIds, charge_or_insert, claim_event, forget_events, insert_customer, insert_refund,
    set_customer_user,
};
pub use invoices::{InvoiceRow, find_invoice_by_provider_id, list_invoices, put_invoice};
pub use listing::{
    list_transaction_json, list_transactions, listed_by_ids, render_transactions, totals,
    unrendered_transactions,
};

use chrono::NaiveDateTime;
use diesel::dsl::sql;
use diesel::sql_types::Integer;
use diesel::{
    CombineDsl, ExpressionMethods, Insertable, OptionalExtension, QueryDsl, QueryResult, Queryable,
    QueryableByName, Selectable, SelectableHelper,
};
use kernel::db::Cached;
use kernel::time::{StoredTime, StoredTimeOpt};
use kernel::{DbConn, with_conn};

use crate::schema::{payment_customers, payment_subscriptions, payment_transactions};
use crate::view::Shown;

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = payment_transactions)]
pub struct TransactionRow {
    pub id: i64,
    pub user_id: Option<i64>,
    pub provider_customer_id: Option<String>,
    pub kind: String,
    pub status: String,
    pub amount: i64,
    pub amount_refunded: i64,
    pub currency: String,
    pub description: String,
    pub provider_transaction_id: String,
    pub payment_intent_id: Option<String>,
    pub charge_id: Option<String>,
    pub parent_id: Option<i64>,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
}

/// A transaction as a list shows it: the columns of its JSON, no more (a page's rows are read,
/// sent and decoded on every uncached request, and the links between rows are not shown).
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = payment_transactions)]
pub struct ListedTransaction {
    pub id: i64,
    pub kind: String,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    pub description: String,
    pub provider_transaction_id: String,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
}

/// A `None` is written as NULL, never left to the column's default (the nullable columns have
/// none): the insert then has one text whatever the row, one prepared statement per connection,
/// which SQLite finds by the query's type without writing the text out on every call.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = payment_transactions, treat_none_as_default_value = false)]
pub struct NewTransaction {
    pub user_id: Option<i64>,
    pub provider_customer_id: Option<String>,
    pub kind: String,
    pub status: String,
    pub amount: i64,
    pub amount_refunded: i64,
    pub currency: String,
    pub description: String,
    pub provider_transaction_id: String,
    pub payment_intent_id: Option<String>,
    pub charge_id: Option<String>,
    pub parent_id: Option<i64>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = payment_subscriptions)]
pub struct SubscriptionRow {
    #[diesel(skip_insertion)]
    pub id: i64,
    pub user_id: Option<i64>,
    pub provider_customer_id: Option<String>,
    pub provider_subscription_id: String,
    pub plan_name: String,
    pub status: String,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub current_period_start: Option<NaiveDateTime>,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub current_period_end: Option<NaiveDateTime>,
    pub cancel_at_period_end: bool,
    pub event_created: i64,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
    /// The Stripe price of its first item (`None` for rows stored before it was kept).
    pub price_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Customers

/// The user of a Stripe customer, if the customer is known and has one.
pub async fn customer(
    conn: &mut DbConn<'_>,
    provider_customer_id: &str,
) -> QueryResult<Option<Option<i64>>> {
    with_conn!(conn, |c| {
        payment_customers::table
            .filter(payment_customers::provider_customer_id.eq(provider_customer_id))
            .select(payment_customers::user_id)
            .get_result(c)
            .await
            .optional()
    })
}

/// The Stripe customer of a user (the first stored when events named the user for several), if
/// one was created.
pub async fn customer_of_user(conn: &mut DbConn<'_>, user_id: i64) -> QueryResult<Option<String>> {
    with_conn!(conn, |c| {
        payment_customers::table
            .filter(payment_customers::user_id.eq(user_id))
            .order(payment_customers::id)
            .select(payment_customers::provider_customer_id)
            .first(c)
            .await
            .optional()
    })
}

/// The user of the customer with this e-mail address, if any.
pub async fn user_by_email(conn: &mut DbConn<'_>, email: &str) -> QueryResult<Option<i64>> {
    with_conn!(conn, |c| {
        payment_customers::table
            .filter(payment_customers::email.eq(email))
            .filter(payment_customers::user_id.is_not_null())
            .select(payment_customers::user_id)
            .first::<Option<i64>>(c)
            .await
            .optional()
            .map(Option::flatten)
    })
}

/// Creates the customer row, or gives it a user it lacks.
pub async fn upsert_customer(
    conn: &mut DbConn<'_>,
    provider_customer_id: &str,
    user_id: Option<i64>,
    email: Option<&str>,
    now: NaiveDateTime,
) -> QueryResult<()> {
    match (customer(conn, provider_customer_id).await?, user_id) {
        (Some(Some(_)), _) | (Some(None), None) => Ok(()),
        (Some(None), Some(user_id)) => {
            set_customer_user(conn, provider_customer_id, user_id, now).await
        }
        (None, _) => insert_customer(conn, provider_customer_id, user_id, email, now).await,
    }
}

// ---------------------------------------------------------------------------------------------
// Transactions

pub async fn find_transaction(
    conn: &mut DbConn<'_>,
    id: i64,
) -> QueryResult<Option<TransactionRow>> {
    with_conn!(conn, |c| {
        payment_transactions::table
            .find(id)
            .select(TransactionRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

/// The charge known by `ids`, in this order of preference: the charge of the payment intent, the
/// row whose provider id is `provider_id`, the charge of the charge id. One statement, a
/// `UNION ALL` of one indexed lookup per id (an `OR` of the three would be planned as a scan of
/// the whole table), each row tagged with its preference.
pub async fn find_charge(
    conn: &mut DbConn<'_>,
    ids: ChargeIds<'_>,
) -> QueryResult<Option<TransactionRow>> {
    let found: Vec<(TransactionRow, i32)> = with_conn!(conn, |c| {
        let by_intent = ids.payment_intent.map(|pi| {
            payment_transactions::table
                .filter(payment_transactions::payment_intent_id.eq(pi))
                .filter(payment_transactions::kind.eq("charge"))
                .select((TransactionRow::as_select(), sql::<Integer>("0")))
                .into_boxed()
        });
        let by_provider_id = ids.provider_id.map(|id| {
            payment_transactions::table
                .filter(payment_transactions::provider_transaction_id.eq(id))
                .select((TransactionRow::as_select(), sql::<Integer>("1")))
                .into_boxed()
        });
        let by_charge = ids.charge.map(|ch| {
            payment_transactions::table
                .filter(payment_transactions::charge_id.eq(ch))
                .filter(payment_transactions::kind.eq("charge"))
                .select((TransactionRow::as_select(), sql::<Integer>("2")))
                .into_boxed()
        });
        let mut parts = [by_intent, by_provider_id, by_charge].into_iter().flatten();
        match parts.next() {
            None => Ok(Vec::new()),
            Some(first) => match (parts.next(), parts.next()) {
                (None, _) => Cached(first).load(c).await,
                (Some(second), None) => Cached(first.union_all(second)).load(c).await,
                (Some(second), Some(third)) => {
                    Cached(first.union_all(second).union_all(third))
                        .load(c)
                        .await
                }
            },
        }
    })?;
    Ok(found
        .into_iter()
        .min_by_key(|(row, preference)| (*preference, row.id))
        .map(|(row, _)| row))
}

pub async fn find_by_provider_id(
    conn: &mut DbConn<'_>,
    provider_transaction_id: &str,
) -> QueryResult<Option<TransactionRow>> {
    with_conn!(conn, |c| {
        payment_transactions::table
            .filter(payment_transactions::provider_transaction_id.eq(provider_transaction_id))
            .select(TransactionRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

pub async fn insert_transaction(
    conn: &mut DbConn<'_>,
    new: &NewTransaction,
) -> QueryResult<TransactionRow> {
    let json = Shown::from(new).to_json();
    with_conn!(conn, |c| {
        Cached(
            diesel::insert_into(payment_transactions::table)
                .values((new, payment_transactions::api_json.eq(&json)))
                .returning(TransactionRow::as_returning()),
        )
        .get_result(c)
        .await
    })
}

/// Writes back a charge changed in memory, with its JSON.
pub async fn save_transaction(conn: &mut DbConn<'_>, row: &TransactionRow) -> QueryResult<()> {
    let json = Shown::from(row).to_json();
    with_conn!(conn, |c| {
        Cached(
            diesel::update(payment_transactions::table.find(row.id)).set((
                payment_transactions::user_id.eq(row.user_id),
                payment_transactions::provider_customer_id.eq(&row.provider_customer_id),
                payment_transactions::status.eq(&row.status),
                payment_transactions::amount.eq(row.amount),
                payment_transactions::amount_refunded.eq(row.amount_refunded),
                payment_transactions::currency.eq(&row.currency),
                payment_transactions::description.eq(&row.description),
                payment_transactions::payment_intent_id.eq(&row.payment_intent_id),
                payment_transactions::charge_id.eq(&row.charge_id),
                payment_transactions::updated_at.eq(row.updated_at),
                payment_transactions::api_json.eq(&json),
            )),
        )
        .execute(c)
        .await
        .map(drop)
    })
}

/// Gives a charge's refunds its user when they were stored before it had one.
pub async fn adopt_refunds(conn: &mut DbConn<'_>, parent_id: i64, user_id: i64) -> QueryResult<()> {
    with_conn!(conn, |c| {
        Cached(
            diesel::update(
                payment_transactions::table
                    .filter(payment_transactions::parent_id.eq(parent_id))
                    .filter(payment_transactions::user_id.is_null()),
            )
            .set(payment_transactions::user_id.eq(user_id)),
        )
        .execute(c)
        .await
        .map(drop)
    })
}

// ---------------------------------------------------------------------------------------------
// Subscriptions

pub async fn find_subscription_by_provider_id(
    conn: &mut DbConn<'_>,
    provider_subscription_id: &str,
) -> QueryResult<Option<SubscriptionRow>> {
    with_conn!(conn, |c| {
        payment_subscriptions::table
            .filter(payment_subscriptions::provider_subscription_id.eq(provider_subscription_id))
            .select(SubscriptionRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

pub async fn find_subscription(
    conn: &mut DbConn<'_>,
    id: i64,
) -> QueryResult<Option<SubscriptionRow>> {
    with_conn!(conn, |c| {
        payment_subscriptions::table
            .find(id)
            .select(SubscriptionRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

/// Inserts or replaces the subscription row with the same provider id.
pub async fn put_subscription(conn: &mut DbConn<'_>, row: &SubscriptionRow) -> QueryResult<()> {
    match find_subscription_by_provider_id(conn, &row.provider_subscription_id).await? {
        None => with_conn!(conn, |c| {
            diesel::insert_into(payment_subscriptions::table)
                .values(row)
                .execute(c)
                .await
                .map(drop)
        }),
        Some(existing) => with_conn!(conn, |c| {
            diesel::update(payment_subscriptions::table.find(existing.id))
                .set((
                    payment_subscriptions::user_id.eq(row.user_id.or(existing.user_id)),
                    payment_subscriptions::provider_customer_id.eq(&row.provider_customer_id),
                    payment_subscriptions::plan_name.eq(&row.plan_name),
                    payment_subscriptions::price_id
                        .eq(row.price_id.as_ref().or(existing.price_id.as_ref())),
                    payment_subscriptions::status.eq(&row.status),
                    payment_subscriptions::current_period_start.eq(row.current_period_start),
                    payment_subscriptions::current_period_end.eq(row.current_period_end),
                    payment_subscriptions::cancel_at_period_end.eq(row.cancel_at_period_end),
                    payment_subscriptions::event_created.eq(row.event_created),
                    payment_subscriptions::updated_at.eq(row.updated_at),
                ))
                .execute(c)
                .await
                .map(drop)
        }),
    }
}

pub async fn list_subscriptions(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    status: Option<&str>,
) -> QueryResult<Vec<SubscriptionRow>> {
    with_conn!(conn, |c| {
        let mut query = payment_subscriptions::table.into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(payment_subscriptions::user_id.eq(user_id));
        }
        if let Some(status) = status {
            query = query.filter(payment_subscriptions::status.eq(status));
        }
        query
            .order(payment_subscriptions::id.desc())
            .select(SubscriptionRow::as_select())
            .load(c)
            .await
    })
}

/// Active and trialing subscriptions, of one user or (`None`) of every one.
pub async fn count_active_subscriptions(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
) -> QueryResult<i64> {
    with_conn!(conn, |c| {
        let mut query = payment_subscriptions::table
            .filter(payment_subscriptions::status.eq_any(["active", "trialing"]))
            .into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(payment_subscriptions::user_id.eq(user_id));
        }
        query.count().get_result(c).await
    })
}
