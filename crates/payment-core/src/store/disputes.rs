//! The disputes' and early fraud warnings' SQL.

use chrono::NaiveDateTime;
use diesel::{
    BoolExpressionMethods, ExpressionMethods, Insertable, NullableExpressionMethods,
    OptionalExtension, QueryDsl, QueryResult, Queryable, Selectable, SelectableHelper,
};
use kernel::db::Cached;
use kernel::time::{StoredTime, StoredTimeOpt};
use kernel::{DbConn, with_conn};

use crate::schema::{payment_disputes, payment_transactions};

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = payment_disputes)]
pub struct DisputeRow {
    #[diesel(skip_insertion)]
    pub id: i64,
    pub transaction_id: Option<i64>,
    pub provider_dispute_id: String,
    pub charge_id: Option<String>,
    pub payment_intent_id: Option<String>,
    pub status: String,
    pub reason: String,
    pub amount: i64,
    pub currency: String,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub evidence_due_by: Option<NaiveDateTime>,
    pub event_type: String,
    pub event_created: i64,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
}

pub async fn find_dispute_by_provider_id(
    conn: &mut DbConn<'_>,
    provider_dispute_id: &str,
) -> QueryResult<Option<DisputeRow>> {
    with_conn!(conn, |c| {
        payment_disputes::table
            .filter(payment_disputes::provider_dispute_id.eq(provider_dispute_id))
            .select(DisputeRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

pub async fn find_dispute(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<DisputeRow>> {
    with_conn!(conn, |c| {
        payment_disputes::table
            .find(id)
            .select(DisputeRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

/// Inserts or replaces the dispute row with the same provider id.
pub async fn put_dispute(conn: &mut DbConn<'_>, row: &DisputeRow) -> QueryResult<()> {
    match find_dispute_by_provider_id(conn, &row.provider_dispute_id).await? {
        None => with_conn!(conn, |c| {
            diesel::insert_into(payment_disputes::table)
                .values(row)
                .execute(c)
                .await
                .map(drop)
        }),
        Some(existing) => with_conn!(conn, |c| {
            diesel::update(payment_disputes::table.find(existing.id))
                .set((
                    payment_disputes::transaction_id
                        .eq(row.transaction_id.or(existing.transaction_id)),
                    payment_disputes::charge_id.eq(row.charge_id.clone().or(existing.charge_id)),
                    payment_disputes::payment_intent_id
                        .eq(row.payment_intent_id.clone().or(existing.payment_intent_id)),
                    payment_disputes::status.eq(&row.status),
                    payment_disputes::reason.eq(&row.reason),
                    payment_disputes::amount.eq(row.amount),
                    payment_disputes::currency.eq(&row.currency),
                    payment_disputes::evidence_due_by.eq(row.evidence_due_by),
                    payment_disputes::event_type.eq(&row.event_type),
                    payment_disputes::event_created.eq(row.event_created),
                    payment_disputes::updated_at.eq(row.updated_at),
                ))
                .execute(c)
                .await
                .map(drop)
        }),
    }
}

/// Links disputes stored before their transaction was known.
pub async fn link_disputes(
    conn: &mut DbConn<'_>,
    transaction_id: i64,
    payment_intent: Option<&str>,
    charge: Option<&str>,
) -> QueryResult<()> {
    let (pi, ch) = (payment_intent.unwrap_or(""), charge.unwrap_or(""));
    with_conn!(conn, |c| {
        Cached(
            diesel::update(
                payment_disputes::table
                    .filter(payment_disputes::transaction_id.is_null())
                    .filter(
                        payment_disputes::payment_intent_id
                            .eq(pi)
                            .or(payment_disputes::charge_id.eq(ch)),
                    ),
            )
            .set(payment_disputes::transaction_id.eq(transaction_id)),
        )
        .execute(c)
        .await
        .map(drop)
    })
}

/// Disputes, newest first; `user_id` keeps those of the user's transactions.
pub async fn list_disputes(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    statuses: Option<&[&str]>,
) -> QueryResult<Vec<DisputeRow>> {
    with_conn!(conn, |c| {
        let mut query = payment_disputes::table.into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(
                payment_disputes::transaction_id.eq_any(
                    payment_transactions::table
                        .filter(payment_transactions::user_id.eq(user_id))
                        .select(payment_transactions::id.nullable()),
                ),
            );
        }
        if let Some(statuses) = statuses {
            query = query.filter(payment_disputes::status.eq_any(statuses.to_vec()));
        }
        query
            .order(payment_disputes::id.desc())
            .select(DisputeRow::as_select())
            .load(c)
            .await
    })
}
