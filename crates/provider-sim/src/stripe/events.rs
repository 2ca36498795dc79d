//! Stripe events: built for any type (filling in coherent objects), signed `t=...,v1=...` and
//! delivered to the webhook URL, with knobs for the ways real deliveries go wrong.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::State;
use super::objects::{self, API_VERSION, InvoiceSeed, Payment, SubscriptionSeed};
use crate::delivery::{self, Delivery};
use crate::journal::Provider;
use crate::state::{Sim, lock, now};
use crate::{ids, signing};

/// The event types Keel handles; the builder accepts any other type too.
pub const EVENT_TYPES: [&str; 16] = [
    "checkout.session.completed",
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "invoice.finalized",
    "invoice.paid",
    "invoice.payment_failed",
    "invoice.voided",
    "invoice.marked_uncollectible",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "charge.refunded",
    "radar.early_fraud_warning.created",
    "charge.dispute.created",
    "charge.dispute.updated",
    "charge.dispute.closed",
];

/// An event to build: its type, fields merged (deeply) into `data.object`, optional
/// `previous_attributes` and an optional fixed event id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventSpec {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub object: Value,
    #[serde(default)]
    pub previous_attributes: Option<Value>,
    #[serde(default)]
    pub id: Option<String>,
}

impl EventSpec {
    pub fn new(kind: &str) -> EventSpec {
        EventSpec {
            kind: kind.to_owned(),
            ..EventSpec::default()
        }
    }

    /// Fields merged into `data.object` (e.g. `{"charge": "ch_..."}` to tie a dispute to a charge).
    pub fn object(mut self, object: Value) -> EventSpec {
        self.object = object;
        self
    }

    pub fn previous_attributes(mut self, previous: Value) -> EventSpec {
        self.previous_attributes = Some(previous);
        self
    }

    pub fn id(mut self, id: &str) -> EventSpec {
        self.id = Some(id.to_owned());
        self
    }
}

/// How events are delivered. The default is a correct delivery to the configured webhook URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeliveryOptions {
    /// Deliver here instead of the configured webhook URL.
    pub url: Option<String>,
    /// Sign with a secret that is not the webhook secret.
    pub wrong_secret: bool,
    /// Use a timestamp 10 minutes old (outside Stripe's 300 s tolerance).
    pub stale: bool,
    /// Send two `v1` values: one made with another secret, then the right one.
    pub two_v1: bool,
    /// Send no `Stripe-Signature` header.
    pub no_signature: bool,
    /// Change the body after signing it.
    pub tamper: bool,
    /// Deliver every event twice (same id, same body).
    pub duplicate: bool,
    /// Deliver the events last first.
    pub out_of_order: bool,
}

/// The ids and amounts an event's objects share.
struct Seeds {
    customer: String,
    email: Option<String>,
    payment_intent: String,
    charge: String,
    subscription: String,
    amount: i64,
    currency: String,
    /// A dispute named by the spec's `id` (dispute events then update it).
    dispute: Option<Value>,
    /// An invoice named by the spec's `id` (invoice events then move it on).
    invoice: Option<String>,
}

/// Builds an event of any type and registers the objects it names (customer, charge, payment
/// intent, subscription, ...) so that API calls about them succeed later.
pub fn build_event(sim: &Sim, spec: &EventSpec) -> Value {
    let now = now();
    let mut st = lock(&sim.stripe);
    let seeds = seeds(&st, spec);
    let (mut object, previous) = default_object(&st, &sim.base_url, &spec.kind, &seeds, now);
    merge(&mut object, &spec.object);
    register(&mut st, &spec.kind, &object, &seeds, now);
    envelope(
        spec.id.clone(),
        &spec.kind,
        object,
        spec.previous_attributes.clone().or(previous),
        now,
    )
}

/// The event envelope around `object`.
pub fn envelope(
    id: Option<String>,
    kind: &str,
    object: Value,
    previous: Option<Value>,
    now: i64,
) -> Value {
    let mut data = json!({ "object": object });
    if let Some(previous) = previous {
        data["previous_attributes"] = previous;
    }
    json!({
        "id": id.unwrap_or_else(|| ids::stripe("evt_")),
        "object": "event",
        "api_version": API_VERSION,
        "created": now,
        "livemode": false,
        "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null},
        "type": kind,
        "data": data,
    })
}

fn seeds(st: &State, spec: &EventSpec) -> Seeds {
    let o = &spec.object;
    let text = |key: &str| o.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut s = Seeds {
        customer: text("customer").unwrap_or_else(|| ids::stripe("cus_")),
        email: text("customer_email").or_else(|| Some("customer@example.com".to_owned())),
        payment_intent: text("payment_intent").unwrap_or_else(|| ids::stripe("pi_")),
        charge: text("charge").unwrap_or_else(|| ids::stripe("ch_")),
        subscription: text("subscription").unwrap_or_else(|| ids::stripe("sub_")),
        amount: o.get("amount").and_then(Value::as_i64).unwrap_or(2000),
        currency: text("currency").unwrap_or_else(|| "usd".to_owned()),
        dispute: None,
        invoice: None,
    };
    if let Some(id) = text("id") {
        match spec.kind.as_str() {
            k if k.starts_with("payment_intent.") => s.payment_intent = id,
            "charge.refunded" => s.charge = id,
            k if k.starts_with("customer.subscription.") => s.subscription = id,
            k if k.starts_with("charge.dispute.") => {
                s.dispute = st.get_kind(&id, "dispute").cloned()
            }
            k if k.starts_with("invoice.") => s.invoice = Some(id),
            _ => {}
        }
    }
    if let (Some(dispute), None) = (&s.dispute, text("charge")) {
        s.charge = dispute["charge"].as_str().unwrap_or(&s.charge).to_owned();
    }
    // A known charge (or a known payment intent's charge) supplies the rest of the payment.
    let known = st.get_kind(&s.charge, "charge").or_else(|| {
        let pi = st.get_kind(&s.payment_intent, "payment_intent")?;
        st.get_kind(pi["latest_charge"].as_str()?, "charge")
    });
    if let Some(charge) = known {
        s.charge = charge["id"].as_str().unwrap_or(&s.charge).to_owned();
        if let Some(pi) = charge["payment_intent"].as_str() {
            s.payment_intent = pi.to_owned();
        }
        if let (Some(customer), None) = (charge["customer"].as_str(), text("customer")) {
            s.customer = customer.to_owned();
        }
        if o.get("amount").is_none() {
            s.amount = charge["amount"].as_i64().unwrap_or(s.amount);
            s.currency = charge["currency"]
                .as_str()
                .unwrap_or(&s.currency)
                .to_owned();
        }
    }
    if let Some(subscription) = st.get_kind(&s.subscription, "subscription")
        && let (Some(customer), None) = (subscription["customer"].as_str(), text("customer"))
    {
        s.customer = customer.to_owned();
    }
    s
}

fn default_object(
    st: &State,
    base_url: &str,
    kind: &str,
    s: &Seeds,
    now: i64,
) -> (Value, Option<Value>) {
    let pay = Payment {
        customer: &s.customer,
        payment_intent: &s.payment_intent,
        charge: &s.charge,
        amount: s.amount,
        currency: &s.currency,
        metadata: json!({}),
    };
    let charge = || {
        st.get_kind(&s.charge, "charge")
            .cloned()
            .unwrap_or_else(|| objects::charge(&pay, true, now))
    };
    let subscription = || {
        st.get_kind(&s.subscription, "subscription")
            .cloned()
            .unwrap_or_else(|| {
                let items = [(st.first_recurring_price(), 1)];
                let seed = SubscriptionSeed {
                    id: &s.subscription,
                    customer: &s.customer,
                    items: &items,
                    latest_invoice: None,
                    metadata: json!({}),
                };
                objects::subscription(&seed, now)
            })
    };
    let dispute = |status: &str| {
        let mut dispute = s
            .dispute
            .clone()
            .unwrap_or_else(|| objects::dispute(&charge(), status, now));
        dispute["status"] = json!(status);
        dispute
    };
    match kind {
        "checkout.session.completed" => (
            json!({
                "id": ids::stripe("cs_test_"),
                "object": "checkout.session",
                "mode": "payment",
                "status": "complete",
                "payment_status": "paid",
                "client_reference_id": null,
                "customer": s.customer,
                "customer_details": {"email": s.email, "name": null, "phone": null, "address": null},
                "customer_email": s.email,
                "metadata": {},
                "amount_subtotal": s.amount,
                "amount_total": s.amount,
                "currency": s.currency,
                "payment_intent": s.payment_intent,
                "subscription": null,
                "invoice": null,
                "created": now,
                "livemode": false,
            }),
            None,
        ),
        "payment_intent.succeeded" => (objects::payment_intent(&pay, true, now), None),
        "payment_intent.payment_failed" => (objects::payment_intent(&pay, false, now), None),
        "invoice.paid"
        | "invoice.payment_failed"
        | "invoice.finalized"
        | "invoice.voided"
        | "invoice.marked_uncollectible" => {
            let id = s.invoice.clone().unwrap_or_else(|| ids::stripe("in_"));
            let mut invoice = st.get_kind(&id, "invoice").cloned().unwrap_or_else(|| {
                let number = st.next_invoice_number(&s.customer);
                let sub = subscription();
                let seed = InvoiceSeed {
                    id: &id,
                    number: &number,
                    subscription: &sub,
                    email: s.email.as_deref(),
                    base_url,
                };
                objects::invoice(&seed, false, now)
            });
            invoice_status(&mut invoice, kind, now);
            (invoice, None)
        }
        "customer.subscription.created" => (subscription(), None),
        "customer.subscription.updated" => {
            let mut sub = subscription();
            let previous = json!({"cancel_at_period_end": sub["cancel_at_period_end"], "cancel_at": sub["cancel_at"]});
            sub["cancel_at_period_end"] = json!(true);
            sub["cancel_at"] = sub["items"]["data"][0]["current_period_end"].clone();
            (sub, Some(previous))
        }
        "customer.subscription.deleted" => {
            let mut sub = subscription();
            sub["status"] = json!("canceled");
            sub["canceled_at"] = json!(now);
            sub["ended_at"] = json!(now);
            sub["cancellation_details"]["reason"] = json!("cancellation_requested");
            (sub, None)
        }
        "charge.refunded" => {
            let mut charge = charge();
            charge["amount_refunded"] = charge["amount"].clone();
            charge["refunded"] = json!(true);
            (charge, None)
        }
        "radar.early_fraud_warning.created" => (objects::early_fraud_warning(&charge(), now), None),
        "charge.dispute.created" => (dispute("needs_response"), None),
        "charge.dispute.updated" => (
            dispute("under_review"),
            Some(json!({"status": "needs_response"})),
        ),
        "charge.dispute.closed" => (dispute("won"), None),
        other => {
            let object = other.rsplit_once('.').map_or(other, |(head, _)| head);
            (
                json!({"id": ids::stripe("obj_"), "object": object, "created": now, "livemode": false}),
                None,
            )
        }
    }
}

/// Moves an invoice to the state an event about it tells: paid, open after a failed attempt, open
/// when finalized, void or uncollectible.
pub(super) fn invoice_status(invoice: &mut Value, kind: &str, now: i64) {
    let due = invoice["amount_due"].as_i64().unwrap_or(0);
    let (status, paid) = match kind {
        "invoice.paid" => ("paid", due),
        "invoice.voided" => ("void", 0),
        "invoice.marked_uncollectible" => ("uncollectible", 0),
        _ => ("open", 0),
    };
    invoice["status"] = json!(status);
    invoice["amount_paid"] = json!(paid);
    invoice["amount_remaining"] = json!(if status == "open" || status == "uncollectible" {
        due - paid
    } else {
        0
    });
    let transition = match status {
        "paid" => Some("paid_at"),
        "void" => Some("voided_at"),
        "uncollectible" => Some("marked_uncollectible_at"),
        _ => None,
    };
    if let Some(field) = transition {
        invoice["status_transitions"][field] = json!(now);
    }
    if kind == "invoice.payment_failed" {
        invoice["attempted"] = json!(true);
        invoice["attempt_count"] = json!(invoice["attempt_count"].as_i64().unwrap_or(0).max(1));
        invoice["next_payment_attempt"] = json!(now + 3 * 24 * 3600);
    }
}

/// Stores the event's object and what it implies (the customer; for successful payments, the
/// payment intent and the charge).
fn register(st: &mut State, kind: &str, object: &Value, s: &Seeds, now: i64) {
    if st.get(&s.customer).is_none() {
        st.insert(objects::customer(
            &s.customer,
            s.email.as_deref(),
            None,
            json!({}),
            now,
        ));
    }
    let paid = matches!(
        kind,
        "checkout.session.completed" | "payment_intent.succeeded" | "charge.refunded"
    ) || kind.starts_with("charge.dispute.")
        || kind.starts_with("radar.early_fraud_warning.");
    if paid && object["mode"].as_str().is_none_or(|m| m == "payment") {
        let pay = Payment {
            customer: &s.customer,
            payment_intent: &s.payment_intent,
            charge: &s.charge,
            amount: s.amount,
            currency: &s.currency,
            metadata: json!({}),
        };
        if st.get(&s.charge).is_none() {
            st.insert(objects::charge(&pay, true, now));
        }
        if st.get(&s.payment_intent).is_none() {
            st.insert(objects::payment_intent(&pay, true, now));
        }
    }
    if kind == "charge.dispute.created"
        && let Some(mut charge) = st.get_kind(&s.charge, "charge").cloned()
    {
        charge["disputed"] = json!(true);
        st.insert(charge);
    }
    if object["id"].is_string() && object["object"].is_string() {
        st.insert(object.clone());
    }
}

/// Deep-merges `patch` into `target` (objects merge key by key; anything else replaces).
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (_, Value::Null) => {}
        (target, patch) => *target = patch.clone(),
    }
}

/// Signs and POSTs each event to the webhook URL, one after the other, and logs each delivery.
pub async fn deliver(sim: &Sim, events: Vec<Value>, options: &DeliveryOptions) -> Vec<Delivery> {
    let mut order = events;
    if options.out_of_order {
        order.reverse();
    }
    let copies = if options.duplicate { 2 } else { 1 };
    let url = options
        .url
        .clone()
        .or_else(|| sim.config.webhook_url.clone());
    let mut out = Vec::new();
    for event in order {
        for _ in 0..copies {
            let delivery = deliver_one(sim, &event, url.as_deref(), options).await;
            sim.record_delivery(delivery.clone());
            out.push(delivery);
        }
    }
    out
}

async fn deliver_one(
    sim: &Sim,
    event: &Value,
    url: Option<&str>,
    options: &DeliveryOptions,
) -> Delivery {
    let body = event.to_string();
    let t = now() - if options.stale { 600 } else { 0 };
    let secret = if options.wrong_secret {
        "whsec_not_the_endpoint_secret"
    } else {
        &sim.config.stripe_webhook_secret
    };
    let mut signature = signing::stripe_header(secret, t, body.as_bytes());
    if options.two_v1 {
        let other = signing::stripe_v1("whsec_rotated_out", t, body.as_bytes());
        signature = format!(
            "t={t},v1={other},v1={}",
            signing::stripe_v1(secret, t, body.as_bytes())
        );
    }
    let sent = if options.tamper {
        body.replacen("\"livemode\":false", "\"livemode\":true", 1)
    } else {
        body
    };
    let mut headers = vec![
        (
            "content-type".to_owned(),
            "application/json; charset=utf-8".to_owned(),
        ),
        (
            "user-agent".to_owned(),
            "Stripe/1.0 (+https://stripe.com/docs/webhooks)".to_owned(),
        ),
    ];
    if !options.no_signature {
        headers.push(("stripe-signature".to_owned(), signature));
    }
    let id = event["id"].as_str().map(str::to_owned);
    let kind = event["type"].as_str().map(str::to_owned);
    match url {
        Some(url) => {
            delivery::post(&sim.client, Provider::Stripe, url, headers, sent, id, kind).await
        }
        None => Delivery {
            provider: Provider::Stripe,
            url: String::new(),
            id,
            kind,
            headers,
            body: sent,
            status: None,
            response: String::new(),
            error: Some("no webhook URL configured".to_owned()),
        },
    }
}
