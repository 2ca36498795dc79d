//! The webhook's own statements: an event's claim (its id recorded once) with the read of its
//! customer, and a charge found or created with the disputes waiting for it. On PostgreSQL each
//! is one statement (a data-modifying `WITH`), since every statement of an event is a round trip
//! made while its transaction holds a connection; SQLite, which runs them in process and has no
//! data-modifying `WITH`, runs the same steps one statement each.

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable};
use diesel::{ExpressionMethods, QueryDsl, QueryResult, QueryableByName};
use kernel::db::Cached;
use kernel::{DbConn, with_conn};

use super::{NewTransaction, TransactionRow, find_charge, insert_transaction, link_disputes};
use crate::schema::{payment_customers, payment_events, payment_transactions};
use crate::view::Shown;

/// What claiming an event found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// `false` when the event id was processed before (nothing is to be done again).
    pub claimed: bool,
    /// The stored row of the customer asked about: `None` when there is none, else its user.
    pub customer: Option<Option<i64>>,
}

#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = Bool)]
    claimed: bool,
    #[diesel(sql_type = Bool)]
    customer_stored: bool,
    #[diesel(sql_type = Nullable<BigInt>)]
    customer_user: Option<i64>,
}

// Read only in the PostgreSQL arm, which an SQLite-only kernel leaves out.
#[allow(dead_code)]
const CLAIM: &str = "\
WITH claimed AS (
    INSERT INTO payment_events (id, event_type, processed_at) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING RETURNING id
)
SELECT EXISTS (SELECT 1 FROM claimed) AS claimed,
       c.id IS NOT NULL AS customer_stored,
       c.user_id AS customer_user
FROM (SELECT 1) AS one
LEFT JOIN payment_customers c ON c.provider_customer_id = $4";

/// Records an event id (`claimed` is `false` when it was processed before) and reads the row of
/// `customer`, the Stripe customer the event names, if any.
pub async fn claim_event(
    conn: &mut DbConn<'_>,
    id: &str,
    kind: &str,
    now: NaiveDateTime,
    customer: Option<&str>,
) -> QueryResult<Claim> {
    let folded: Option<ClaimRow> = with_conn!(
        conn,
        postgres | c | {
            // Here, not at the top: an SQLite-only kernel leaves this arm out.
            use diesel::sql_types::{Text, Timestamp};
            Cached(
                diesel::sql_query(CLAIM)
                    .bind::<Text, _>(id)
                    .bind::<Text, _>(kind)
                    .bind::<Timestamp, _>(now)
                    .bind::<Nullable<Text>, _>(customer),
            )
            .get_result(c)
            .await
            .map(Some)
        },
        sqlite | _c | Ok::<_, diesel::result::Error>(None)
    )?;
    if let Some(row) = folded {
        return Ok(Claim {
            claimed: row.claimed,
            customer: row.customer_stored.then_some(row.customer_user),
        });
    }
    let claimed = with_conn!(conn, |c| {
        diesel::insert_into(payment_events::table)
            .values((
                payment_events::id.eq(id),
                payment_events::event_type.eq(kind),
                payment_events::processed_at.eq(now),
            ))
            .on_conflict_do_nothing()
            .execute(c)
            .await
    })? == 1;
    let customer = match customer {
        Some(customer) if claimed => super::customer(conn, customer).await?,
        _ => None,
    };
    Ok(Claim { claimed, customer })
}

/// Forgets processed event ids older than `before`; how many.
pub async fn forget_events(conn: &mut DbConn<'_>, before: NaiveDateTime) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::delete(payment_events::table.filter(payment_events::processed_at.lt(before)))
            .execute(c)
            .await
    })
}

/// Stores a Stripe customer the first time an event names it.
pub async fn insert_customer(
    conn: &mut DbConn<'_>,
    provider_customer_id: &str,
    user_id: Option<i64>,
    email: Option<&str>,
    now: NaiveDateTime,
) -> QueryResult<()> {
    with_conn!(conn, |c| {
        Cached(diesel::insert_into(payment_customers::table).values((
            payment_customers::user_id.eq(user_id),
            payment_customers::provider_customer_id.eq(provider_customer_id),
            payment_customers::email.eq(email),
            payment_customers::created_at.eq(now),
            payment_customers::updated_at.eq(now),
        )))
        .execute(c)
        .await
        .map(drop)
    })
}

/// Gives a stored customer without a user its user.
pub async fn set_customer_user(
    conn: &mut DbConn<'_>,
    provider_customer_id: &str,
    user_id: i64,
    now: NaiveDateTime,
) -> QueryResult<()> {
    with_conn!(conn, |c| {
        Cached(
            diesel::update(
                payment_customers::table
                    .filter(payment_customers::provider_customer_id.eq(provider_customer_id))
                    .filter(payment_customers::user_id.is_null()),
            )
            .set((
                payment_customers::user_id.eq(user_id),
                payment_customers::updated_at.eq(now),
            )),
        )
        .execute(c)
        .await
        .map(drop)
    })
}

/// The ids a charge is looked up by (see [`find_charge`] for the order of preference).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChargeIds<'a> {
    /// A charge of this payment intent.
    pub payment_intent: Option<&'a str>,
    /// A row (charge or refund) of this provider id.
    pub provider_id: Option<&'a str>,
    /// A charge of this charge id.
    pub charge: Option<&'a str>,
}

#[derive(QueryableByName)]
struct ChargeMatch {
    #[diesel(embed)]
    charge: TransactionRow,
    /// -1: inserted by the statement; else the lookup that found it (0 best).
    #[diesel(sql_type = Integer)]
    preference: i32,
}

/// The columns of a [`TransactionRow`], in its order.
macro_rules! columns {
    () => {
        "id, user_id, provider_customer_id, kind, status, amount, amount_refunded, currency, \
         description, provider_transaction_id, payment_intent_id, charge_id, parent_id, \
         created_at, updated_at"
    };
}

/// The charge known by the ids `$1`..`$3` (see [`find_charge`]), else a new row of the columns
/// `$4`..`$18` inserted and the disputes waiting for its payment intent or charge linked to it.
// Read only in the PostgreSQL arm, which an SQLite-only kernel leaves out.
#[allow(dead_code)]
const CHARGE_OR_INSERT: &str = concat!(
    "WITH found AS (
    SELECT ",
    columns!(),
    ", 0 AS preference FROM payment_transactions
    WHERE payment_intent_id = $1 AND kind = 'charge'
    UNION ALL
    SELECT ",
    columns!(),
    ", 1 FROM payment_transactions WHERE provider_transaction_id = $2
    UNION ALL
    SELECT ",
    columns!(),
    ", 2 FROM payment_transactions WHERE charge_id = $3 AND kind = 'charge'
), inserted AS (
    INSERT INTO payment_transactions (user_id, provider_customer_id, kind, status, amount,
        amount_refunded, currency, description, provider_transaction_id, payment_intent_id,
        charge_id, parent_id, created_at, updated_at, api_json)
    SELECT $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18
    WHERE NOT EXISTS (SELECT 1 FROM found)
    RETURNING ",
    columns!(),
    ", -1 AS preference
), linked AS (
    UPDATE payment_disputes SET transaction_id = inserted.id FROM inserted
    WHERE payment_disputes.transaction_id IS NULL
      AND (payment_disputes.payment_intent_id = $1 OR payment_disputes.charge_id = $3)
)
SELECT * FROM inserted UNION ALL SELECT * FROM found"
);

/// The charge known by `ids` (`false`), else `new` inserted (`true`) and the disputes stored
/// before it linked to it. Two events about one new charge at once: the second insert fails on
/// the unique provider id, and the webhook applies its event again.
pub async fn charge_or_insert(
    conn: &mut DbConn<'_>,
    ids: ChargeIds<'_>,
    new: &NewTransaction,
) -> QueryResult<(TransactionRow, bool)> {
    let folded: Option<Vec<ChargeMatch>> = with_conn!(
        conn,
        postgres | c | {
            // Here, not at the top: an SQLite-only kernel leaves this arm out.
            use diesel::sql_types::{Text, Timestamp};
            Cached(
                diesel::sql_query(CHARGE_OR_INSERT)
                    .bind::<Nullable<Text>, _>(ids.payment_intent)
                    .bind::<Nullable<Text>, _>(ids.provider_id)
                    .bind::<Nullable<Text>, _>(ids.charge)
                    .bind::<Nullable<BigInt>, _>(new.user_id)
                    .bind::<Nullable<Text>, _>(&new.provider_customer_id)
                    .bind::<Text, _>(&new.kind)
                    .bind::<Text, _>(&new.status)
                    .bind::<BigInt, _>(new.amount)
                    .bind::<BigInt, _>(new.amount_refunded)
                    .bind::<Text, _>(&new.currency)
                    .bind::<Text, _>(&new.description)
                    .bind::<Text, _>(&new.provider_transaction_id)
                    .bind::<Nullable<Text>, _>(&new.payment_intent_id)
                    .bind::<Nullable<Text>, _>(&new.charge_id)
                    .bind::<Nullable<BigInt>, _>(new.parent_id)
                    .bind::<Timestamp, _>(new.created_at)
                    .bind::<Timestamp, _>(new.updated_at)
                    .bind::<Text, _>(Shown::from(new).to_json()),
            )
            .load(c)
            .await
            .map(Some)
        },
        sqlite | _c | Ok::<_, diesel::result::Error>(None)
    )?;
    if let Some(rows) = folded {
        return match rows.into_iter().min_by_key(|m| (m.preference, m.charge.id)) {
            Some(m) => Ok((m.charge, m.preference < 0)),
            // Neither found nor inserted: only if the insert's condition saw a row the lookup
            // did not, which one statement's snapshot rules out.
            None => Err(diesel::result::Error::NotFound),
        };
    }
    if let Some(row) = find_charge(conn, ids).await? {
        return Ok((row, false));
    }
    let row = insert_transaction(conn, new).await?;
    link_disputes(conn, row.id, ids.payment_intent, ids.charge).await?;
    Ok((row, true))
}

/// Inserts a refund unless a row of its provider id is stored; whether it was inserted.
pub async fn insert_refund(conn: &mut DbConn<'_>, new: &NewTransaction) -> QueryResult<bool> {
    let json = Shown::from(new).to_json();
    with_conn!(conn, |c| {
        Cached(
            diesel::insert_into(payment_transactions::table)
                .values((new, payment_transactions::api_json.eq(&json)))
                .on_conflict(payment_transactions::provider_transaction_id)
                .do_nothing(),
        )
        .execute(c)
        .await
        .map(|n| n == 1)
    })
}
