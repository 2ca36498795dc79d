//! A subscription's period ending: Stripe bills the next one (`invoice.finalized`, then
//! `invoice.paid` or `invoice.payment_failed`, with the subscription moved on:
//! `customer.subscription.updated`), or ends a subscription set to cancel at the period's end
//! (`customer.subscription.deleted`, no invoice).

use serde_json::{Value, json};

use super::checkout::Outcome;
use super::events::{envelope, invoice_status};
use super::objects::{self, InvoiceSeed, Payment};
use super::{DeliveryOptions, State, deliver};
use crate::delivery::Delivery;
use crate::ids;
use crate::state::{Sim, lock, now};

/// Renews (or ends) subscription `id` as its period's end would, and delivers the events.
/// `Err` names why it cannot be renewed (unknown, already canceled).
pub async fn renew_subscription(
    sim: &Sim,
    id: &str,
    outcome: Outcome,
    options: &DeliveryOptions,
) -> Result<Vec<Delivery>, String> {
    let events = renew(&mut lock(&sim.stripe), &sim.base_url, id, outcome, now())?;
    Ok(deliver(sim, events, options).await)
}

fn renew(
    st: &mut State,
    base_url: &str,
    id: &str,
    outcome: Outcome,
    now: i64,
) -> Result<Vec<Value>, String> {
    let mut sub = st
        .get_kind(id, "subscription")
        .cloned()
        .ok_or_else(|| format!("No such subscription: '{id}'"))?;
    if sub["status"] == "canceled" {
        return Err(format!("The subscription {id} has already been canceled."));
    }
    if sub["cancel_at_period_end"] == true {
        sub["status"] = json!("canceled");
        sub["canceled_at"] = json!(now);
        sub["ended_at"] = json!(now);
        sub["cancellation_details"]["reason"] = json!("cancellation_requested");
        st.insert(sub.clone());
        return Ok(vec![envelope(
            None,
            "customer.subscription.deleted",
            sub,
            None,
            now,
        )]);
    }
    let previous = json!({"items": sub["items"].clone(), "status": sub["status"].clone(),
                          "latest_invoice": sub["latest_invoice"].clone()});
    if let Some(items) = sub["items"]["data"].as_array_mut() {
        for item in items {
            let start = item["current_period_start"].as_i64().unwrap_or(now);
            let end = item["current_period_end"].as_i64().unwrap_or(now);
            let length = (end - start).max(1);
            item["current_period_start"] = json!(end);
            item["current_period_end"] = json!(end + length);
        }
    }
    let customer = sub["customer"].as_str().unwrap_or_default().to_owned();
    let email = st
        .get(&customer)
        .and_then(|c| c["email"].as_str())
        .map(str::to_owned);
    let invoice_id = ids::stripe("in_");
    let number = st.next_invoice_number(&customer);
    let seed = InvoiceSeed {
        id: &invoice_id,
        number: &number,
        subscription: &sub,
        email: email.as_deref(),
        base_url,
    };
    let mut invoice = objects::invoice(&seed, false, now);
    invoice["billing_reason"] = json!("subscription_cycle");
    let finalized = invoice.clone();
    let kind = match outcome {
        Outcome::Pay => {
            let (pi, charge) = (ids::stripe("pi_"), ids::stripe("ch_"));
            let pay = Payment {
                customer: &customer,
                payment_intent: &pi,
                charge: &charge,
                amount: invoice["amount_due"].as_i64().unwrap_or(0),
                currency: invoice["currency"].as_str().unwrap_or("usd"),
                metadata: sub["metadata"].clone(),
            };
            st.insert(objects::charge(&pay, true, now));
            st.insert(objects::payment_intent(&pay, true, now));
            invoice["payment_intent"] = json!(pi);
            invoice["charge"] = json!(charge);
            sub["status"] = json!("active");
            "invoice.paid"
        }
        Outcome::Fail => {
            sub["status"] = json!("past_due");
            "invoice.payment_failed"
        }
    };
    invoice_status(&mut invoice, kind, now);
    sub["latest_invoice"] = json!(invoice_id);
    st.insert(invoice.clone());
    st.insert(sub.clone());
    Ok(vec![
        envelope(
            None,
            "customer.subscription.updated",
            sub,
            Some(previous),
            now,
        ),
        envelope(None, "invoice.finalized", finalized, None, now),
        envelope(None, kind, invoice, None, now),
    ])
}
