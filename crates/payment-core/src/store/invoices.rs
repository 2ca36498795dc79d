//! The invoices' SQL: one row per Stripe invoice, read through the customers of a user.

use chrono::NaiveDateTime;
use diesel::{
    ExpressionMethods, Insertable, NullableExpressionMethods, OptionalExtension, QueryDsl,
    QueryResult, Queryable, Selectable, SelectableHelper,
};
use kernel::time::{StoredTime, StoredTimeOpt};
use kernel::{DbConn, with_conn};

use crate::schema::{payment_customers, payment_invoices};

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = payment_invoices)]
pub struct InvoiceRow {
    #[diesel(skip_insertion)]
    pub id: i64,
    pub provider_invoice_id: String,
    pub provider_customer_id: Option<String>,
    pub provider_subscription_id: Option<String>,
    pub number: Option<String>,
    /// `draft`, `open`, `paid`, `uncollectible` or `void`.
    pub status: String,
    /// Where `status` stands (draft 0, open 1, uncollectible 2, paid and void 3).
    pub status_rank: i32,
    pub amount_due: i64,
    pub amount_paid: i64,
    pub amount_remaining: i64,
    pub currency: String,
    pub hosted_invoice_url: Option<String>,
    pub invoice_pdf: Option<String>,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub period_start: Option<NaiveDateTime>,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub period_end: Option<NaiveDateTime>,
    /// The invoice's `created` at Stripe.
    #[diesel(deserialize_as = StoredTime)]
    pub invoice_created: NaiveDateTime,
    /// The type and `created` of the event whose state the row holds.
    pub event_type: String,
    pub event_created: i64,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
}

pub async fn find_invoice_by_provider_id(
    conn: &mut DbConn<'_>,
    provider_invoice_id: &str,
) -> QueryResult<Option<InvoiceRow>> {
    with_conn!(conn, |c| {
        payment_invoices::table
            .filter(payment_invoices::provider_invoice_id.eq(provider_invoice_id))
            .select(InvoiceRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

/// Inserts the row, or replaces the stored row with the same provider id (keeping its
/// `created_at`, and the ids and URLs it knew that `row` lacks). Two first events about one
/// invoice at once: the second insert fails on the unique key, and the webhook applies its event
/// again.
pub async fn put_invoice(conn: &mut DbConn<'_>, row: &InvoiceRow) -> QueryResult<()> {
    match find_invoice_by_provider_id(conn, &row.provider_invoice_id).await? {
        None => with_conn!(conn, |c| {
            diesel::insert_into(payment_invoices::table)
                .values(row)
                .execute(c)
                .await
                .map(drop)
        }),
        Some(existing) => with_conn!(conn, |c| {
            diesel::update(payment_invoices::table.find(existing.id))
                .set((
                    payment_invoices::provider_customer_id.eq(row
                        .provider_customer_id
                        .as_ref()
                        .or(existing.provider_customer_id.as_ref())),
                    payment_invoices::provider_subscription_id.eq(row
                        .provider_subscription_id
                        .as_ref()
                        .or(existing.provider_subscription_id.as_ref())),
                    payment_invoices::number.eq(row.number.as_ref().or(existing.number.as_ref())),
                    payment_invoices::status.eq(&row.status),
                    payment_invoices::status_rank.eq(row.status_rank),
                    payment_invoices::amount_due.eq(row.amount_due),
                    payment_invoices::amount_paid.eq(row.amount_paid),
                    payment_invoices::amount_remaining.eq(row.amount_remaining),
                    payment_invoices::currency.eq(&row.currency),
                    payment_invoices::hosted_invoice_url.eq(row
                        .hosted_invoice_url
                        .as_ref()
                        .or(existing.hosted_invoice_url.as_ref())),
                    payment_invoices::invoice_pdf
                        .eq(row.invoice_pdf.as_ref().or(existing.invoice_pdf.as_ref())),
                    payment_invoices::period_start.eq(row.period_start.or(existing.period_start)),
                    payment_invoices::period_end.eq(row.period_end.or(existing.period_end)),
                    payment_invoices::invoice_created.eq(row.invoice_created),
                    payment_invoices::event_type.eq(&row.event_type),
                    payment_invoices::event_created.eq(row.event_created),
                    payment_invoices::updated_at.eq(row.updated_at),
                ))
                .execute(c)
                .await
                .map(drop)
        }),
    }
}

/// One page of invoices, newest first (by Stripe's `created`), and the number that match:
/// `user_id` keeps those of the user's Stripe customers.
pub async fn list_invoices(
    conn: &mut DbConn<'_>,
    user_id: Option<i64>,
    status: Option<&str>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<InvoiceRow>, i64)> {
    macro_rules! filtered {
        () => {{
            let mut query = payment_invoices::table.into_boxed();
            if let Some(user_id) = user_id {
                query = query.filter(
                    payment_invoices::provider_customer_id.eq_any(
                        payment_customers::table
                            .filter(payment_customers::user_id.eq(user_id))
                            .select(payment_customers::provider_customer_id.nullable()),
                    ),
                );
            }
            if let Some(status) = status {
                query = query.filter(payment_invoices::status.eq(status));
            }
            query
        }};
    }
    with_conn!(conn, |c| {
        let rows = filtered!()
            .order((
                payment_invoices::invoice_created.desc(),
                payment_invoices::id.desc(),
            ))
            .offset(offset)
            .limit(limit)
            .select(InvoiceRow::as_select())
            .load(c)
            .await?;
        let total = filtered!().count().get_result(c).await?;
        Ok((rows, total))
    })
}
