//! Invoice events (`invoice.finalized`, `.paid`, `.payment_failed`, `.voided`,
//! `.marked_uncollectible`; the paid and failed ones also write the charge, in [`super::apply`]):
//! one row per Stripe invoice, upserted by its id. A state never goes back: an
//! event is applied only when its (status rank, event `created`, event type order) is not below
//! the stored one's, so any order of delivery, and any repetition, ends in the newest state.

use chrono::NaiveDateTime;
use kernel::DbConn;
use serde_json::Value;

use super::{Customer, id, int, named_user, text, time, user_of};
use crate::error::PaymentError;
use crate::store::{self, InvoiceRow};

/// Stripe's invoice statuses.
pub const INVOICE_STATUSES: [&str; 5] = ["draft", "open", "paid", "uncollectible", "void"];

/// Where an invoice status stands: an invoice goes draft → open → paid, void or uncollectible,
/// and from uncollectible to paid or void; paid and void are final.
pub(crate) fn status_rank(status: &str) -> i32 {
    match status {
        "draft" => 0,
        "open" => 1,
        "uncollectible" => 2,
        "paid" | "void" => 3,
        _ => 0,
    }
}

/// Orders two events of the same rank and second (`invoice.finalized` and a failed payment are
/// often stamped alike) so that the result does not depend on which came first.
fn event_order(kind: &str) -> u8 {
    match kind {
        "invoice.finalized" => 0,
        "invoice.payment_failed" => 1,
        "invoice.marked_uncollectible" => 2,
        "invoice.voided" => 3,
        "invoice.paid" => 4,
        _ => 0,
    }
}

/// The status an event gives: the object's own when it is one of Stripe's, else the event's.
fn status_of<'a>(invoice: &'a Value, kind: &str) -> &'a str {
    match text(invoice, "status") {
        Some(s) if INVOICE_STATUSES.contains(&s) => s,
        _ => match kind {
            "invoice.paid" => "paid",
            "invoice.voided" => "void",
            "invoice.marked_uncollectible" => "uncollectible",
            _ => "open",
        },
    }
}

/// The subscription an invoice bills: `parent.subscription_details.subscription` (API
/// 2025-03-31 and later), else the older top-level `subscription`, else its first line's.
fn subscription_of(invoice: &Value) -> Option<&str> {
    let details = invoice
        .get("parent")
        .and_then(|p| p.get("subscription_details"));
    details
        .and_then(|d| id(d, "subscription"))
        .or_else(|| id(invoice, "subscription"))
        .or_else(|| {
            first_line(invoice)
                .get("parent")
                .and_then(|p| p.get("subscription_item_details"))
                .and_then(|d| id(d, "subscription"))
        })
}

fn first_line(invoice: &Value) -> &Value {
    invoice
        .get("lines")
        .and_then(|l| l.get("data"))
        .and_then(|d| d.get(0))
        .unwrap_or(&Value::Null)
}

/// The user an invoice names: its own metadata, else its subscription's (copied by Stripe into
/// `parent.subscription_details.metadata`).
pub(super) fn invoice_user(invoice: &Value) -> Option<i64> {
    named_user(invoice).or_else(|| {
        invoice
            .get("parent")
            .and_then(|p| p.get("subscription_details"))
            .and_then(named_user)
    })
}

/// Stores what an invoice event says about its invoice, unless the stored state is newer.
pub(super) async fn invoice_event(
    tx: &mut DbConn<'_>,
    invoice: &Value,
    kind: &str,
    created: i64,
    customer: &mut Customer<'_>,
    now: NaiveDateTime,
) -> Result<(), PaymentError> {
    let Some(invoice_id) = text(invoice, "id") else {
        return Ok(());
    };
    let status = status_of(invoice, kind);
    let rank = status_rank(status);
    let existing = store::find_invoice_by_provider_id(tx, invoice_id).await?;
    if let Some(stored) = &existing {
        let stored_key = (
            stored.status_rank,
            stored.event_created,
            event_order(&stored.event_type),
        );
        if (rank, created, event_order(kind)) < stored_key {
            return Ok(()); // an older state than the one stored
        }
    }
    // The customer's row (tied to the user the invoice names, if it has none): the invoice is
    // shown to the user of its customer.
    user_of(
        tx,
        invoice_user(invoice),
        customer,
        text(invoice, "customer_email"),
        now,
    )
    .await?;
    let line_period = first_line(invoice).get("period");
    let period = |key: &str, legacy: &str| {
        time(
            line_period
                .and_then(|p| int(p, key))
                .or_else(|| int(invoice, legacy)),
        )
    };
    let amount_due = int(invoice, "amount_due").unwrap_or(0);
    let amount_paid = int(invoice, "amount_paid").unwrap_or(0);
    let row = InvoiceRow {
        id: 0,
        provider_invoice_id: invoice_id.to_owned(),
        provider_customer_id: customer.id.map(str::to_owned),
        provider_subscription_id: subscription_of(invoice).map(str::to_owned),
        number: text(invoice, "number").map(str::to_owned),
        status: status.to_owned(),
        status_rank: rank,
        amount_due,
        amount_paid,
        amount_remaining: int(invoice, "amount_remaining")
            .unwrap_or((amount_due - amount_paid).max(0)),
        currency: text(invoice, "currency").unwrap_or("usd").to_owned(),
        hosted_invoice_url: text(invoice, "hosted_invoice_url").map(str::to_owned),
        invoice_pdf: text(invoice, "invoice_pdf").map(str::to_owned),
        period_start: period("start", "period_start"),
        period_end: period("end", "period_end"),
        invoice_created: time(int(invoice, "created")).unwrap_or(now),
        event_type: kind.to_owned(),
        event_created: created,
        created_at: existing.as_ref().map_or(now, |r| r.created_at),
        updated_at: now,
    };
    store::put_invoice(tx, &row).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn statuses_rank_as_an_invoice_moves() {
        let ranks: Vec<i32> = INVOICE_STATUSES.iter().map(|s| status_rank(s)).collect();
        assert_eq!(ranks, [0, 1, 3, 2, 3]);
        assert_eq!(
            status_of(&json!({"status": "paid"}), "invoice.payment_failed"),
            "paid"
        );
        assert_eq!(
            status_of(&json!({"status": "bogus"}), "invoice.voided"),
            "void"
        );
        assert_eq!(status_of(&json!({}), "invoice.finalized"), "open");
    }

    #[test]
    fn the_subscription_is_read_where_each_api_version_puts_it() {
        let basil = json!({"parent": {"subscription_details": {"subscription": "sub_new"}},
                           "subscription": "sub_old"});
        assert_eq!(subscription_of(&basil), Some("sub_new"));
        assert_eq!(
            subscription_of(&json!({"subscription": {"id": "sub_x"}})),
            Some("sub_x")
        );
        let line = json!({"lines": {"data": [{"parent": {"subscription_item_details":
                                                          {"subscription": "sub_line"}}}]}});
        assert_eq!(subscription_of(&line), Some("sub_line"));
        assert_eq!(subscription_of(&json!({})), None);
        let named = json!({"parent": {"subscription_details": {"metadata": {"user_id": "7"}}}});
        assert_eq!(invoice_user(&named), Some(7));
    }
}
