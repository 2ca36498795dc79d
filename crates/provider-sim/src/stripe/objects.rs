//! Stripe objects as JSON, with the fields Keel reads (API version 2025-03-31.basil shapes).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ids;

pub const API_VERSION: &str = "2025-03-31.basil";
const PERIOD: i64 = 30 * 24 * 3600;

/// A price that checkout sessions may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    pub id: String,
    pub product: String,
    pub product_name: String,
    pub unit_amount: i64,
    pub currency: String,
    /// `day`, `week`, `month` or `year` for a recurring price; `None` for a one-time price.
    pub recurring: Option<String>,
}

impl Price {
    pub fn one_time(id: &str, unit_amount: i64, name: &str) -> Price {
        Price {
            id: id.to_owned(),
            product: format!("prod_{}", id.trim_start_matches("price_")),
            product_name: name.to_owned(),
            unit_amount,
            currency: "usd".to_owned(),
            recurring: None,
        }
    }

    pub fn recurring(id: &str, unit_amount: i64, name: &str, interval: &str) -> Price {
        Price {
            recurring: Some(interval.to_owned()),
            ..Price::one_time(id, unit_amount, name)
        }
    }

    /// `price_one_time` (20.00 USD), `price_monthly` (15.00 USD a month), `price_yearly`
    /// (150.00 USD a year).
    pub fn defaults() -> Vec<Price> {
        vec![
            Price::one_time("price_one_time", 2000, "One-time purchase"),
            Price::recurring("price_monthly", 1500, "Monthly plan", "month"),
            Price::recurring("price_yearly", 15000, "Yearly plan", "year"),
        ]
    }

    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "object": "price",
            "active": true,
            "currency": self.currency,
            "product": self.product,
            "unit_amount": self.unit_amount,
            "type": if self.recurring.is_some() { "recurring" } else { "one_time" },
            "recurring": self.recurring.as_ref().map(|i| json!({"interval": i, "interval_count": 1})),
            "livemode": false,
        })
    }
}

pub fn customer(
    id: &str,
    email: Option<&str>,
    name: Option<&str>,
    metadata: Value,
    now: i64,
) -> Value {
    json!({
        "id": id,
        "object": "customer",
        "email": email,
        "name": name,
        "phone": null,
        "description": null,
        "metadata": or_empty(metadata),
        "created": now,
        "livemode": false,
    })
}

pub struct Payment<'a> {
    pub customer: &'a str,
    pub payment_intent: &'a str,
    pub charge: &'a str,
    pub amount: i64,
    pub currency: &'a str,
    pub metadata: Value,
}

pub fn payment_intent(p: &Payment, succeeded: bool, now: i64) -> Value {
    json!({
        "id": p.payment_intent,
        "object": "payment_intent",
        "amount": p.amount,
        "amount_received": if succeeded { p.amount } else { 0 },
        "currency": p.currency,
        "customer": p.customer,
        "metadata": or_empty(p.metadata.clone()),
        "latest_charge": p.charge,
        "payment_method": "pm_card_visa",
        "status": if succeeded { "succeeded" } else { "requires_payment_method" },
        "last_payment_error": if succeeded { Value::Null } else { card_declined(p.charge) },
        "created": now,
        "livemode": false,
    })
}

/// The `last_payment_error` of a declined card.
pub fn card_declined(charge: &str) -> Value {
    json!({
        "type": "card_error",
        "code": "card_declined",
        "decline_code": "generic_decline",
        "message": "Your card was declined.",
        "charge": charge,
        "payment_method": {"id": "pm_card_visa_chargeDeclined", "object": "payment_method", "type": "card"},
    })
}

pub fn charge(p: &Payment, succeeded: bool, now: i64) -> Value {
    json!({
        "id": p.charge,
        "object": "charge",
        "amount": p.amount,
        "amount_captured": if succeeded { p.amount } else { 0 },
        "amount_refunded": 0,
        "refunded": false,
        "captured": succeeded,
        "paid": succeeded,
        "status": if succeeded { "succeeded" } else { "failed" },
        "currency": p.currency,
        "customer": p.customer,
        "payment_intent": p.payment_intent,
        "metadata": or_empty(p.metadata.clone()),
        "disputed": false,
        "failure_code": if succeeded { Value::Null } else { json!("card_declined") },
        "created": now,
        "livemode": false,
    })
}

pub fn refund(
    id: &str,
    amount: i64,
    charge: &Value,
    reason: Option<&str>,
    metadata: Value,
    now: i64,
) -> Value {
    json!({
        "id": id,
        "object": "refund",
        "amount": amount,
        "charge": charge["id"],
        "payment_intent": charge["payment_intent"],
        "currency": charge["currency"],
        "reason": reason,
        "metadata": or_empty(metadata),
        "status": "succeeded",
        "created": now,
    })
}

pub struct SubscriptionSeed<'a> {
    pub id: &'a str,
    pub customer: &'a str,
    pub items: &'a [(Price, i64)],
    pub latest_invoice: Option<&'a str>,
    pub metadata: Value,
}

pub fn subscription(s: &SubscriptionSeed, now: i64) -> Value {
    let items: Vec<Value> = s
        .items
        .iter()
        .map(|(price, quantity)| {
            json!({
                "id": ids::stripe("si_"),
                "object": "subscription_item",
                "price": price.to_json(),
                "quantity": quantity,
                "subscription": s.id,
                "current_period_start": now,
                "current_period_end": now + PERIOD,
            })
        })
        .collect();
    json!({
        "id": s.id,
        "object": "subscription",
        "customer": s.customer,
        "status": "active",
        "items": {"object": "list", "data": items, "has_more": false},
        "cancel_at_period_end": false,
        "cancel_at": null,
        "canceled_at": null,
        "ended_at": null,
        "cancellation_details": {"reason": null, "feedback": null, "comment": null},
        "trial_end": null,
        "latest_invoice": s.latest_invoice,
        "metadata": or_empty(s.metadata.clone()),
        "start_date": now,
        "created": now,
        "livemode": false,
    })
}

/// What an invoice is: its id and number, its subscription, and where its hosted page is.
pub struct InvoiceSeed<'a> {
    pub id: &'a str,
    /// `<customer prefix>-<sequence>`, as Stripe numbers a customer's invoices.
    pub number: &'a str,
    pub subscription: &'a Value,
    pub email: Option<&'a str>,
    /// The simulator's address: the hosted invoice page and its PDF are served there.
    pub base_url: &'a str,
}

/// An invoice of `subscription` (its first item's period and price), paid or open.
pub fn invoice(seed: &InvoiceSeed, paid: bool, now: i64) -> Value {
    let (id, subscription, email) = (seed.id, seed.subscription, seed.email);
    let item = &subscription["items"]["data"][0];
    let quantity = item["quantity"].as_i64().unwrap_or(1);
    let amount = item["price"]["unit_amount"].as_i64().unwrap_or(0) * quantity;
    let period = json!({"start": item["current_period_start"], "end": item["current_period_end"]});
    json!({
        "id": id,
        "object": "invoice",
        "customer": subscription["customer"],
        "customer_email": email,
        "status": if paid { "paid" } else { "open" },
        "amount_due": amount,
        "amount_paid": if paid { amount } else { 0 },
        "amount_remaining": if paid { 0 } else { amount },
        "currency": item["price"]["currency"],
        "billing_reason": if paid { "subscription_create" } else { "subscription_cycle" },
        "attempt_count": 1,
        "attempted": true,
        "next_payment_attempt": if paid { Value::Null } else { json!(now + 3 * 24 * 3600) },
        "number": seed.number,
        "hosted_invoice_url": format!("{}/invoice/{id}", seed.base_url),
        "invoice_pdf": format!("{}/invoice/{id}/pdf", seed.base_url),
        "subtotal": amount,
        "total": amount,
        "status_transitions": {
            "finalized_at": now,
            "paid_at": if paid { json!(now) } else { Value::Null },
            "voided_at": null,
            "marked_uncollectible_at": null,
        },
        "period_start": period["start"],
        "period_end": period["end"],
        "parent": {
            "type": "subscription_details",
            "subscription_details": {"subscription": subscription["id"], "metadata": subscription["metadata"]},
        },
        "lines": {"object": "list", "has_more": false, "data": [{
            "id": ids::stripe("il_"),
            "object": "line_item",
            "amount": amount,
            "currency": item["price"]["currency"],
            "quantity": quantity,
            "period": period,
            "pricing": {"type": "price_details", "price_details": {"price": item["price"]["id"], "product": item["price"]["product"]}},
            "parent": {
                "type": "subscription_item_details",
                "subscription_item_details": {"subscription": subscription["id"], "subscription_item": item["id"]},
            },
        }]},
        "created": now,
        "livemode": false,
    })
}

/// The next number of `customer`'s invoices: a prefix made from its id, then a sequence.
pub fn invoice_number(customer: &str, earlier: usize) -> String {
    let prefix: String = customer
        .trim_start_matches("cus_")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect::<String>()
        .to_ascii_uppercase();
    format!("{prefix}-{:04}", earlier + 1)
}

/// A billing portal session of `customer`, opened at `url`.
pub fn portal_session(
    id: &str,
    customer: &str,
    configuration: &str,
    return_url: Option<&str>,
    url: &str,
    now: i64,
) -> Value {
    json!({
        "id": id,
        "object": "billing_portal.session",
        "configuration": configuration,
        "created": now,
        "customer": customer,
        "flow": null,
        "livemode": false,
        "locale": null,
        "on_behalf_of": null,
        "return_url": return_url,
        "url": url,
    })
}

/// The account's default billing portal configuration.
pub fn portal_configuration(id: &str, now: i64) -> Value {
    json!({
        "id": id,
        "object": "billing_portal.configuration",
        "active": true,
        "application": null,
        "business_profile": {"headline": null, "privacy_policy_url": null, "terms_of_service_url": null},
        "default_return_url": null,
        "features": {
            "customer_update": {"enabled": true, "allowed_updates": ["email", "address"]},
            "invoice_history": {"enabled": true},
            "payment_method_update": {"enabled": true},
            "subscription_cancel": {"enabled": true, "mode": "at_period_end"},
        },
        "is_default": true,
        "livemode": false,
        "metadata": {},
        "created": now,
        "updated": now,
    })
}

pub fn early_fraud_warning(charge: &Value, now: i64) -> Value {
    json!({
        "id": ids::stripe("issfr_"),
        "object": "radar.early_fraud_warning",
        "actionable": true,
        "charge": charge["id"],
        "payment_intent": charge["payment_intent"],
        "fraud_type": "made_with_stolen_card",
        "created": now,
        "livemode": false,
    })
}

pub fn dispute(charge: &Value, status: &str, now: i64) -> Value {
    json!({
        "id": ids::stripe("dp_"),
        "object": "dispute",
        "amount": charge["amount"],
        "currency": charge["currency"],
        "charge": charge["id"],
        "payment_intent": charge["payment_intent"],
        "reason": "fraudulent",
        "status": status,
        "evidence_details": {"due_by": now + 7 * 24 * 3600, "has_evidence": false, "past_due": false, "submission_count": 0},
        "is_charge_refundable": false,
        "metadata": {},
        "balance_transactions": [],
        "created": now,
        "livemode": false,
    })
}

fn or_empty(value: Value) -> Value {
    if value.is_object() { value } else { json!({}) }
}
