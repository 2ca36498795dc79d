//! What each Stripe event does to the stored rows. Every handler is written so that any order of
//! delivery ends in the same rows: charge statuses only move forward, subscriptions and disputes
//! keep the newest event's state (by the event's `created`), invoices never go back to an
//! earlier status ([`invoices`]), and rows that arrive before the rows they refer to are linked
//! when those arrive.

mod invoices;

pub use invoices::INVOICE_STATUSES;

use chrono::NaiveDateTime;
use kernel::DbConn;
use serde_json::Value;

use crate::error::PaymentError;
use crate::store::{self, ChargeIds, DisputeRow, NewTransaction, SubscriptionRow, TransactionRow};

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn int(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

/// An id field that may be expanded into an object.
fn id<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    match v.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(Value::Object(o)) => o.get("id").and_then(Value::as_str),
        _ => None,
    }
}

fn time(seconds: Option<i64>) -> Option<NaiveDateTime> {
    seconds
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map(|t| t.naive_utc())
}

/// The user named by a session or object: `client_reference_id` or `metadata.user_id`.
fn named_user(v: &Value) -> Option<i64> {
    text(v, "client_reference_id")
        .or_else(|| v.get("metadata").and_then(|m| text(m, "user_id")))
        .and_then(|s| s.parse().ok())
}

/// Where a charge status stands: a later event never moves it back.
fn charge_rank(status: &str) -> u8 {
    match status {
        "pending" => 0,
        "failed" | "canceled" => 1,
        "succeeded" => 2,
        "partially_refunded" => 3,
        "refunded" => 4,
        _ => 0,
    }
}

/// What an event says about a charge.
#[derive(Default)]
struct ChargeFacts<'a> {
    payment_intent: Option<&'a str>,
    charge: Option<&'a str>,
    /// Used as the row's provider id when the event names neither (an invoice without a payment).
    fallback_id: Option<&'a str>,
    amount: Option<i64>,
    amount_refunded: Option<i64>,
    currency: Option<&'a str>,
    status: Option<&'a str>,
    user: Option<i64>,
    customer: Option<&'a str>,
    description: Option<&'a str>,
}

/// The Stripe customer an event names (its object's `customer`), and that customer's stored row
/// as the event's claim read it (`None`: not stored; else its user), kept up to date by
/// [`user_of`]'s writes: an event reads its customer once.
struct Customer<'a> {
    id: Option<&'a str>,
    stored: Option<Option<i64>>,
}

/// The user of an event: the one it names, else its customer's. Every event's customer gets a
/// row (one without a user when nobody is named), and a stored one without a user gets the
/// named one.
async fn user_of(
    tx: &mut DbConn<'_>,
    named: Option<i64>,
    customer: &mut Customer<'_>,
    email: Option<&str>,
    now: NaiveDateTime,
) -> Result<Option<i64>, PaymentError> {
    let Some(id) = customer.id else {
        return Ok(named);
    };
    match (customer.stored, named) {
        (Some(Some(_)), _) | (Some(None), None) => {}
        (Some(None), Some(user)) => store::set_customer_user(tx, id, user, now).await?,
        (None, _) => store::insert_customer(tx, id, named, email, now).await?,
    }
    let stored = customer.stored.flatten().or(named);
    customer.stored = Some(stored);
    Ok(named.or(stored))
}

async fn upsert_charge(
    tx: &mut DbConn<'_>,
    facts: ChargeFacts<'_>,
    now: NaiveDateTime,
) -> Result<Option<TransactionRow>, PaymentError> {
    // Looked up by its payment intent and charge, else (an event naming neither) by its fallback.
    let ids = ChargeIds {
        payment_intent: facts.payment_intent,
        provider_id: facts.payment_intent.or(match facts.charge {
            None => facts.fallback_id,
            Some(_) => None,
        }),
        charge: facts.charge,
    };
    let Some(provider_id) = facts.payment_intent.or(facts.charge).or(facts.fallback_id) else {
        return Ok(None);
    };
    let new = NewTransaction {
        user_id: facts.user,
        provider_customer_id: facts.customer.map(str::to_owned),
        kind: "charge".to_owned(),
        status: facts.status.unwrap_or("pending").to_owned(),
        amount: facts.amount.unwrap_or(0),
        amount_refunded: facts.amount_refunded.unwrap_or(0),
        currency: facts.currency.unwrap_or("usd").to_owned(),
        description: facts.description.unwrap_or_default().to_owned(),
        provider_transaction_id: provider_id.to_owned(),
        payment_intent_id: facts.payment_intent.map(str::to_owned),
        charge_id: facts.charge.map(str::to_owned),
        parent_id: None,
        created_at: now,
        updated_at: now,
    };
    // A new charge is inserted (and the disputes waiting for it linked) by the lookup itself.
    let row = match store::charge_or_insert(tx, ids, &new).await? {
        (row, true) => row,
        (mut row, false) => {
            let had_user = row.user_id.is_some();
            if row.payment_intent_id.is_none() {
                row.payment_intent_id = facts.payment_intent.map(str::to_owned);
            }
            if row.charge_id.is_none() {
                row.charge_id = facts.charge.map(str::to_owned);
            }
            row.user_id = row.user_id.or(facts.user);
            if row.provider_customer_id.is_none() {
                row.provider_customer_id = facts.customer.map(str::to_owned);
            }
            if let Some(amount) = facts.amount.filter(|a| *a > 0) {
                row.amount = amount;
            }
            if let Some(currency) = facts.currency {
                row.currency = currency.to_owned();
            }
            if let Some(description) = facts.description.filter(|_| row.description.is_empty()) {
                row.description = description.to_owned();
            }
            if let Some(refunded) = facts.amount_refunded {
                row.amount_refunded = row.amount_refunded.max(refunded);
            }
            if let Some(status) = facts.status
                && charge_rank(status) > charge_rank(&row.status)
            {
                row.status = status.to_owned();
            }
            row.updated_at = now;
            store::save_transaction(tx, &row).await?;
            // Refunds take their charge's user when stored, so only a charge that gets its
            // user now can have refunds without one.
            if let (false, Some(user)) = (had_user, row.user_id) {
                store::adopt_refunds(tx, row.id, user).await?;
            }
            row
        }
    };
    Ok(Some(row))
}

/// The type of an event fit to apply (`None`: not one): it has an id and a type, and none of
/// its text holds a NUL character, which PostgreSQL's text cannot keep (and which no Stripe
/// object holds).
pub(crate) fn kind(event: &Value) -> Option<&str> {
    text(event, "id")
        .and(text(event, "type"))
        .filter(|_| !holds_nul(event))
}

/// Whether a key or a string anywhere in `v` holds a NUL (serde_json nests at most 128 deep).
fn holds_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, value)| key.contains('\0') || holds_nul(value)),
        _ => false,
    }
}

/// Applies one verified event inside the caller's transaction. `false` when its id was
/// processed before (nothing is done again).
pub(crate) async fn apply(
    tx: &mut DbConn<'_>,
    event: &Value,
    now: NaiveDateTime,
) -> Result<bool, PaymentError> {
    let (Some(kind), Some(event_id)) = (kind(event), text(event, "id")) else {
        return Err(PaymentError::InvalidPayload);
    };
    let object = event
        .get("data")
        .and_then(|d| d.get("object"))
        .unwrap_or(&Value::Null);
    let mut customer = Customer {
        id: id(object, "customer"),
        stored: None,
    };
    let claim = store::claim_event(tx, event_id, kind, now, customer.id).await?;
    if !claim.claimed {
        return Ok(false);
    }
    customer.stored = claim.customer;
    let customer = &mut customer;
    let created = int(event, "created").unwrap_or(0);
    match kind {
        "checkout.session.completed" => checkout_completed(tx, object, customer, now).await?,
        "payment_intent.succeeded" | "payment_intent.payment_failed" => {
            let status = if kind.ends_with("succeeded") {
                "succeeded"
            } else {
                "failed"
            };
            let user = user_of(tx, named_user(object), customer, None, now).await?;
            let facts = ChargeFacts {
                payment_intent: text(object, "id"),
                charge: id(object, "latest_charge"),
                amount: int(object, "amount"),
                currency: text(object, "currency"),
                status: Some(status),
                user,
                customer: customer.id,
                description: text(object, "description"),
                ..ChargeFacts::default()
            };
            upsert_charge(tx, facts, now).await?;
        }
        "invoice.paid" | "invoice.payment_failed" => {
            let paid = kind == "invoice.paid";
            // The user named by the invoice, or by its subscription (whose metadata Stripe copies
            // into the invoice's `parent`).
            let user = user_of(
                tx,
                invoices::invoice_user(object),
                customer,
                text(object, "customer_email"),
                now,
            )
            .await?;
            let amount = if paid {
                int(object, "amount_paid")
            } else {
                int(object, "amount_due")
            };
            let facts = ChargeFacts {
                payment_intent: id(object, "payment_intent"),
                charge: id(object, "charge"),
                fallback_id: text(object, "id"),
                amount,
                currency: text(object, "currency"),
                status: Some(if paid { "succeeded" } else { "failed" }),
                user,
                customer: customer.id,
                description: Some("Subscription invoice"),
                ..ChargeFacts::default()
            };
            upsert_charge(tx, facts, now).await?;
            invoices::invoice_event(tx, object, kind, created, customer, now).await?;
        }
        "invoice.finalized" | "invoice.voided" | "invoice.marked_uncollectible" => {
            invoices::invoice_event(tx, object, kind, created, customer, now).await?;
        }
        "charge.refunded" => charge_refunded(tx, object, customer, now).await?,
        "customer.subscription.created"
        | "customer.subscription.updated"
        | "customer.subscription.deleted" => {
            subscription_event(tx, object, kind, created, customer, now).await?;
        }
        "radar.early_fraud_warning.created" => {
            let row = dispute_row(tx, object, "warning_issued", kind, created, now).await?;
            let reason = text(object, "fraud_type").unwrap_or("fraud_warning");
            store::put_dispute(
                tx,
                &DisputeRow {
                    reason: reason.to_owned(),
                    ..row
                },
            )
            .await?;
        }
        "charge.dispute.created" | "charge.dispute.updated" | "charge.dispute.closed" => {
            let status = match text(object, "status").unwrap_or("needs_response") {
                "warning_needs_response" | "warning_under_review" => "warning_issued",
                other => other,
            };
            let row = dispute_row(tx, object, status, kind, created, now).await?;
            if store::find_dispute_by_provider_id(tx, &row.provider_dispute_id)
                .await?
                .is_none_or(|d| d.event_created <= created)
            {
                store::put_dispute(tx, &row).await?;
            }
        }
        _ => {}
    }
    Ok(true)
}

async fn checkout_completed(
    tx: &mut DbConn<'_>,
    session: &Value,
    customer: &mut Customer<'_>,
    now: NaiveDateTime,
) -> Result<(), PaymentError> {
    let email = session
        .get("customer_details")
        .and_then(|d| text(d, "email"))
        .or_else(|| text(session, "customer_email"));
    let user = user_of(tx, named_user(session), customer, email, now).await?;
    if text(session, "mode") == Some("payment") {
        let paid = matches!(
            text(session, "payment_status"),
            Some("paid" | "no_payment_required")
        );
        let facts = ChargeFacts {
            payment_intent: id(session, "payment_intent"),
            fallback_id: text(session, "id"),
            amount: int(session, "amount_total"),
            currency: text(session, "currency"),
            status: Some(if paid { "succeeded" } else { "pending" }),
            user,
            customer: customer.id,
            description: Some("Checkout payment"),
            ..ChargeFacts::default()
        };
        upsert_charge(tx, facts, now).await?;
    }
    if let (Some(subscription), Some(user)) = (id(session, "subscription"), user)
        && let Some(mut row) = store::find_subscription_by_provider_id(tx, subscription).await?
        && row.user_id.is_none()
    {
        row.user_id = Some(user);
        row.updated_at = now;
        store::put_subscription(tx, &row).await?;
    }
    Ok(())
}

async fn charge_refunded(
    tx: &mut DbConn<'_>,
    charge: &Value,
    customer: &mut Customer<'_>,
    now: NaiveDateTime,
) -> Result<(), PaymentError> {
    let user = user_of(tx, named_user(charge), customer, None, now).await?;
    let amount = int(charge, "amount").unwrap_or(0);
    let refunded = int(charge, "amount_refunded").unwrap_or(0);
    let status = if refunded >= amount && amount > 0 {
        "refunded"
    } else {
        "partially_refunded"
    };
    let facts = ChargeFacts {
        payment_intent: id(charge, "payment_intent"),
        charge: text(charge, "id"),
        amount: Some(amount),
        amount_refunded: Some(refunded),
        currency: text(charge, "currency"),
        status: Some(status),
        user,
        customer: customer.id,
        ..ChargeFacts::default()
    };
    let Some(parent) = upsert_charge(tx, facts, now).await? else {
        return Ok(());
    };
    let refunds = charge
        .get("refunds")
        .and_then(|r| r.get("data"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for refund in &refunds {
        let Some(refund_id) = text(refund, "id") else {
            continue;
        };
        let new = NewTransaction {
            user_id: parent.user_id,
            provider_customer_id: parent.provider_customer_id.clone(),
            kind: "refund".to_owned(),
            status: text(refund, "status").unwrap_or("succeeded").to_owned(),
            amount: int(refund, "amount").unwrap_or(0),
            amount_refunded: 0,
            currency: text(refund, "currency")
                .unwrap_or(&parent.currency)
                .to_owned(),
            description: text(refund, "reason").unwrap_or_default().to_owned(),
            provider_transaction_id: refund_id.to_owned(),
            payment_intent_id: parent.payment_intent_id.clone(),
            charge_id: parent.charge_id.clone(),
            parent_id: Some(parent.id),
            created_at: now,
            updated_at: now,
        };
        // Kept as it is when stored before (by an earlier event or by the refund's own call).
        store::insert_refund(tx, &new).await?;
    }
    Ok(())
}

/// Stripe's subscription statuses in the spec's six.
fn subscription_status(status: &str) -> &str {
    match status {
        "incomplete_expired" => "canceled",
        "paused" => "unpaid",
        other => other,
    }
}

async fn subscription_event(
    tx: &mut DbConn<'_>,
    sub: &Value,
    kind: &str,
    created: i64,
    customer: &mut Customer<'_>,
    now: NaiveDateTime,
) -> Result<(), PaymentError> {
    let Some(sub_id) = text(sub, "id") else {
        return Ok(());
    };
    let existing = store::find_subscription_by_provider_id(tx, sub_id).await?;
    if existing.as_ref().is_some_and(|s| s.event_created > created) {
        return Ok(()); // an older state than the one stored
    }
    let user = user_of(tx, named_user(sub), customer, None, now).await?;
    let item = sub
        .get("items")
        .and_then(|i| i.get("data"))
        .and_then(|d| d.get(0))
        .unwrap_or(&Value::Null);
    let price = item.get("price").unwrap_or(&Value::Null);
    let plan_name = text(price, "nickname")
        .or_else(|| text(price, "lookup_key"))
        .or_else(|| text(price, "id"))
        .unwrap_or("subscription");
    let status = if kind.ends_with("deleted") {
        "canceled"
    } else {
        subscription_status(text(sub, "status").unwrap_or("incomplete"))
    };
    let row = SubscriptionRow {
        id: 0,
        user_id: user.or(existing.as_ref().and_then(|s| s.user_id)),
        provider_customer_id: customer.id.map(str::to_owned),
        provider_subscription_id: sub_id.to_owned(),
        plan_name: plan_name.to_owned(),
        price_id: text(price, "id").map(str::to_owned),
        status: status.to_owned(),
        current_period_start: time(
            int(item, "current_period_start").or_else(|| int(sub, "current_period_start")),
        ),
        current_period_end: time(
            int(item, "current_period_end").or_else(|| int(sub, "current_period_end")),
        ),
        cancel_at_period_end: sub
            .get("cancel_at_period_end")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        event_created: created,
        created_at: existing.as_ref().map_or(now, |s| s.created_at),
        updated_at: now,
    };
    store::put_subscription(tx, &row).await?;
    Ok(())
}

/// A dispute or fraud warning row for `object`, linked to its transaction when known.
async fn dispute_row(
    tx: &mut DbConn<'_>,
    object: &Value,
    status: &str,
    kind: &str,
    created: i64,
    now: NaiveDateTime,
) -> Result<DisputeRow, PaymentError> {
    let charge = id(object, "charge");
    let payment_intent = id(object, "payment_intent");
    let ids = ChargeIds {
        payment_intent,
        provider_id: payment_intent,
        charge,
    };
    let transaction = store::find_charge(tx, ids).await?;
    let existing = match text(object, "id") {
        Some(d) => store::find_dispute_by_provider_id(tx, d).await?,
        None => None,
    };
    Ok(DisputeRow {
        id: 0,
        transaction_id: transaction.as_ref().map(|t| t.id),
        provider_dispute_id: text(object, "id").unwrap_or_default().to_owned(),
        charge_id: charge.map(str::to_owned),
        payment_intent_id: payment_intent.map(str::to_owned),
        status: status.to_owned(),
        reason: text(object, "reason").unwrap_or("general").to_owned(),
        amount: int(object, "amount")
            .or(transaction.as_ref().map(|t| t.amount))
            .unwrap_or(0),
        currency: text(object, "currency")
            .map(str::to_owned)
            .or(transaction.as_ref().map(|t| t.currency.clone()))
            .unwrap_or_else(|| "usd".to_owned()),
        evidence_due_by: time(
            object
                .get("evidence_details")
                .and_then(|e| int(e, "due_by")),
        ),
        event_type: kind.to_owned(),
        event_created: created,
        created_at: existing.map_or(now, |d| d.created_at),
        updated_at: now,
    })
}
