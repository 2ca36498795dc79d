//! The hosted checkout page: Pay and Fail buttons complete the session and deliver the events
//! Stripe would send.

use actix_web::HttpResponse;
use actix_web::http::header;
use actix_web::web::{self, Bytes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::api::{money, start_subscription};
use super::objects::{self, InvoiceSeed, Payment};
use super::{DeliveryOptions, State, deliver, events::envelope};
use crate::delivery::Delivery;
use crate::html::{escape, page as html_page};
use crate::state::{Sim, lock, now};
use crate::{form, ids};

/// How the customer leaves the checkout page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The card is charged: `checkout.session.completed` plus `payment_intent.succeeded`, or for
    /// subscriptions `customer.subscription.created`, `invoice.finalized` and `invoice.paid`.
    Pay,
    /// The card is declined: `payment_intent.payment_failed`; the session stays open.
    Fail,
}

/// Completes an open checkout session and delivers the matching events.
pub async fn complete_checkout(
    sim: &Sim,
    id: &str,
    outcome: Outcome,
    email: Option<&str>,
    options: &DeliveryOptions,
) -> Result<Vec<Delivery>, String> {
    let events = complete(
        &mut lock(&sim.stripe),
        &sim.base_url,
        id,
        outcome,
        email,
        now(),
    )?;
    Ok(deliver(sim, events, options).await)
}

fn complete(
    st: &mut State,
    base_url: &str,
    id: &str,
    outcome: Outcome,
    email: Option<&str>,
    now: i64,
) -> Result<Vec<Value>, String> {
    let mut session = st
        .get_kind(id, "checkout.session")
        .cloned()
        .ok_or_else(|| format!("No such checkout.session: '{id}'"))?;
    if session["status"] != "open" {
        return Err(format!(
            "Checkout session {id} is already {}.",
            session["status"].as_str().unwrap_or("closed")
        ));
    }
    let extra = st
        .sessions
        .get(id)
        .cloned()
        .ok_or_else(|| format!("No line items for {id}"))?;
    let known_customer = session["customer"].as_str().map(str::to_owned);
    let email = email
        .filter(|e| !e.trim().is_empty())
        .map(|e| e.trim().to_owned())
        .or_else(|| session["customer_email"].as_str().map(str::to_owned))
        .or_else(|| {
            st.get(known_customer.as_deref()?)?["email"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "customer@example.com".to_owned());
    let customer = match known_customer {
        Some(c) => c,
        None => {
            let customer =
                objects::customer(&ids::stripe("cus_"), Some(&email), None, json!({}), now);
            let id = customer["id"].as_str().unwrap_or_default().to_owned();
            st.insert(customer);
            id
        }
    };
    let (pi_id, charge_id) = (ids::stripe("pi_"), ids::stripe("ch_"));
    let currency = session["currency"].as_str().unwrap_or("usd").to_owned();
    let pay = Payment {
        customer: &customer,
        payment_intent: &pi_id,
        charge: &charge_id,
        amount: session["amount_total"].as_i64().unwrap_or(0),
        currency: &currency,
        metadata: extra.payment_intent_metadata.clone(),
    };
    if outcome == Outcome::Fail {
        let pi = objects::payment_intent(&pay, false, now);
        st.insert(objects::charge(&pay, false, now));
        st.insert(pi.clone());
        return Ok(vec![envelope(
            None,
            "payment_intent.payment_failed",
            pi,
            None,
            now,
        )]);
    }
    session["status"] = json!("complete");
    session["customer"] = json!(customer);
    session["customer_details"] =
        json!({"email": email, "name": null, "phone": null, "address": null});
    let mut events = Vec::new();
    match session["mode"].as_str() {
        Some("payment") => {
            let pi = objects::payment_intent(&pay, true, now);
            st.insert(objects::charge(&pay, true, now));
            st.insert(pi.clone());
            session["payment_status"] = json!("paid");
            session["payment_intent"] = json!(pi_id);
            events.push(envelope(None, "payment_intent.succeeded", pi, None, now));
        }
        Some("subscription") => {
            let sub = start_subscription(st, &session, &extra, &customer, now);
            let invoice_id = sub["latest_invoice"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let number = st.next_invoice_number(&customer);
            let seed = InvoiceSeed {
                id: &invoice_id,
                number: &number,
                subscription: &sub,
                email: Some(&email),
                base_url,
            };
            let mut invoice = objects::invoice(&seed, true, now);
            // The first invoice is paid by a payment intent and its charge, which can then be
            // refunded and disputed like a one-off payment.
            let paid = Payment {
                amount: invoice["amount_paid"].as_i64().unwrap_or(0),
                ..pay
            };
            st.insert(objects::charge(&paid, true, now));
            st.insert(objects::payment_intent(&paid, true, now));
            invoice["payment_intent"] = json!(pi_id);
            invoice["charge"] = json!(charge_id);
            st.insert(invoice.clone());
            session["payment_status"] = json!("paid");
            session["subscription"] = sub["id"].clone();
            session["invoice"] = json!(invoice_id);
            events.push(envelope(
                None,
                "customer.subscription.created",
                sub,
                None,
                now,
            ));
            // Stripe finalizes the invoice, then it is paid (both told, as Stripe tells them).
            let mut finalized = invoice.clone();
            finalized["status"] = json!("open");
            finalized["amount_paid"] = json!(0);
            finalized["amount_remaining"] = invoice["amount_due"].clone();
            finalized["status_transitions"]["paid_at"] = Value::Null;
            events.push(envelope(None, "invoice.finalized", finalized, None, now));
            events.push(envelope(None, "invoice.paid", invoice, None, now));
        }
        _ => session["payment_status"] = json!("no_payment_required"),
    }
    st.insert(session.clone());
    events.push(envelope(
        None,
        "checkout.session.completed",
        session,
        None,
        now,
    ));
    Ok(events)
}

/// `GET /checkout/{id}`: the hosted payment page.
pub async fn page(sim: web::Data<Sim>, path: web::Path<String>) -> HttpResponse {
    let id = path.into_inner();
    let (session, items) = {
        let st = lock(&sim.stripe);
        let session = st.get_kind(&id, "checkout.session").cloned();
        (
            session,
            st.sessions
                .get(&id)
                .map(|e| e.items.clone())
                .unwrap_or_default(),
        )
    };
    let Some(session) = session else {
        return html(
            404,
            "Checkout",
            &format!("<h1>No such checkout session</h1><p>{}</p>", escape(&id)),
        );
    };
    let currency = session["currency"].as_str().unwrap_or("usd");
    let rows: String = items
        .iter()
        .map(|(price, quantity)| {
            let every = price
                .recurring
                .as_deref()
                .map(|i| format!(" / {i}"))
                .unwrap_or_default();
            format!(
                "<tr><td>{}</td><td>{quantity}</td><td>{}{}</td></tr>",
                escape(if price.product_name.is_empty() {
                    &price.id
                } else {
                    &price.product_name
                }),
                money(price.unit_amount * quantity, &price.currency),
                escape(&every)
            )
        })
        .collect();
    let total = money(session["amount_total"].as_i64().unwrap_or(0), currency);
    let mut body = format!(
        "<h1>Checkout (simulated Stripe)</h1><p>Session <code>{}</code>, mode <b>{}</b>, status <b>{}</b></p>\
         <table><tr><th>Item</th><th>Quantity</th><th>Amount</th></tr>{rows}\
         <tr><th colspan=\"2\">Total</th><th>{total}</th></tr></table>",
        escape(&id),
        escape(session["mode"].as_str().unwrap_or("")),
        escape(session["status"].as_str().unwrap_or("")),
    );
    if session["status"] == "open" {
        let email = session["customer_email"].as_str().unwrap_or("");
        body.push_str(&format!(
            "<form method=\"post\" action=\"/checkout/{id}/pay\">\
             <p><label>Email <input type=\"email\" name=\"email\" value=\"{}\" placeholder=\"customer@example.com\"></label></p>\
             <p><button class=\"pay\" type=\"submit\">Pay {total}</button>\
             <button class=\"fail\" type=\"submit\" formaction=\"/checkout/{id}/fail\">Fail (card declined)</button></p></form>",
            escape(email),
            id = escape(&id),
        ));
    }
    if let Some(cancel) = session["cancel_url"].as_str() {
        body.push_str(&format!(
            "<p><a href=\"{}\">Cancel and go back</a></p>",
            escape(cancel)
        ));
    }
    html(200, "Checkout", &body)
}

/// `POST /checkout/{id}/pay|fail` from the page's buttons.
pub async fn submit(
    sim: web::Data<Sim>,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> HttpResponse {
    let (id, outcome) = path.into_inner();
    let outcome = match outcome.as_str() {
        "pay" => Outcome::Pay,
        "fail" => Outcome::Fail,
        _ => return html(404, "Checkout", "<h1>Not found</h1>"),
    };
    let email = form::pairs(&body)
        .into_iter()
        .find(|(k, _)| k == "email")
        .map(|(_, v)| v);
    let deliveries = match complete_checkout(
        &sim,
        &id,
        outcome,
        email.as_deref(),
        &DeliveryOptions::default(),
    )
    .await
    {
        Ok(deliveries) => deliveries,
        Err(message) => {
            return html(
                400,
                "Checkout",
                &format!("<h1>Cannot complete</h1><p>{}</p>", escape(&message)),
            );
        }
    };
    let session = lock(&sim.stripe).get(&id).cloned().unwrap_or(Value::Null);
    if outcome == Outcome::Pay {
        if let Some(success) = session["success_url"].as_str() {
            let target = success.replace("{CHECKOUT_SESSION_ID}", &id);
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, target))
                .finish();
        }
        return html(
            200,
            "Paid",
            &format!(
                "<h1>Payment succeeded</h1>{}",
                deliveries_table(&deliveries)
            ),
        );
    }
    let mut body = format!(
        "<h1>Your card was declined.</h1><p><a href=\"/checkout/{}\">Try again</a></p>",
        escape(&id)
    );
    if let Some(cancel) = session["cancel_url"].as_str() {
        body.push_str(&format!(
            "<p><a href=\"{}\">Cancel and go back</a></p>",
            escape(cancel)
        ));
    }
    body.push_str(&deliveries_table(&deliveries));
    html(200, "Declined", &body)
}

fn deliveries_table(deliveries: &[Delivery]) -> String {
    let rows: String = deliveries
        .iter()
        .map(|d| {
            let status = d
                .status
                .map_or_else(|| d.error.clone().unwrap_or_default(), |s| s.to_string());
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(d.kind.as_deref().unwrap_or("")),
                escape(&d.url),
                escape(&status)
            )
        })
        .collect();
    format!(
        "<h2>Events delivered</h2><table><tr><th>Event</th><th>To</th><th>Answer</th></tr>{rows}</table>"
    )
}

fn html(status: u16, title: &str, body: &str) -> HttpResponse {
    let status =
        actix_web::http::StatusCode::from_u16(status).unwrap_or(actix_web::http::StatusCode::OK);
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(html_page(title, body))
}
