//! Stripe's billing portal: `POST /v1/billing_portal/sessions` and the page its `url` opens (the
//! customer's subscriptions, which they may cancel at the period's end, and invoices), and the
//! hosted invoice pages that invoices' `hosted_invoice_url` and `invoice_pdf` name.

use actix_web::HttpResponse;
use actix_web::http::header;
use actix_web::web;
use serde_json::{Value, json};

use super::api::{money, update_subscription};
use super::{ApiError, DeliveryOptions, State, deliver, invalid, missing_param, no_such, objects};
use crate::form::str_at;
use crate::html::{escape, page as html_page};
use crate::ids;
use crate::state::{Sim, lock, now};

/// The account's default portal configuration, which sessions use unless they name another.
pub const DEFAULT_CONFIGURATION: &str = "bpc_provider_sim_default";

/// `POST /v1/billing_portal/sessions`: `customer` (required, known), `return_url` (an absolute
/// http(s) URL), `configuration` (a known `bpc_...`).
pub(super) fn create_session(
    st: &mut State,
    base_url: &str,
    p: &Value,
    now: i64,
) -> Result<Value, ApiError> {
    let customer = str_at(p, "customer").ok_or_else(|| missing_param("customer"))?;
    if st.get_kind(customer, "customer").is_none() {
        return Err(no_such("customer", customer, "customer"));
    }
    let return_url = str_at(p, "return_url");
    if let Some(url) = return_url {
        let valid = reqwest::Url::parse(url)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
        if !valid || url.len() > 5000 {
            return Err(invalid(
                "url_invalid",
                "Not a valid URL",
                Some("return_url"),
            ));
        }
    }
    let configuration = str_at(p, "configuration").unwrap_or(DEFAULT_CONFIGURATION);
    if st
        .get_kind(configuration, "billing_portal.configuration")
        .is_none()
    {
        return Err(no_such("configuration", configuration, "configuration"));
    }
    let id = ids::stripe("bps_");
    let session = objects::portal_session(
        &id,
        customer,
        configuration,
        return_url,
        &format!("{base_url}/billing_portal/{id}"),
        now,
    );
    st.insert(session.clone());
    Ok(session)
}

fn html(status: u16, title: &str, body: &str) -> HttpResponse {
    let status =
        actix_web::http::StatusCode::from_u16(status).unwrap_or(actix_web::http::StatusCode::OK);
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(html_page(title, body))
}

fn date(seconds: &Value) -> String {
    seconds
        .as_i64()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// `GET /billing_portal/{id}`: the customer's subscriptions and invoices.
pub async fn page(sim: web::Data<Sim>, path: web::Path<String>) -> HttpResponse {
    let id = path.into_inner();
    let st = lock(&sim.stripe);
    let Some(session) = st.get_kind(&id, "billing_portal.session").cloned() else {
        return html(
            404,
            "Billing",
            &format!("<h1>No such portal session</h1><p>{}</p>", escape(&id)),
        );
    };
    let customer_id = text(&session, "customer");
    let email = st
        .get(customer_id)
        .map(|c| text(c, "email").to_owned())
        .unwrap_or_default();
    let subscriptions: String = st
        .of_customer("subscription", customer_id)
        .iter()
        .map(|sub| {
            let item = &sub["items"]["data"][0];
            let action = if sub["status"] == "canceled" || sub["cancel_at_period_end"] == true {
                "—".to_owned()
            } else {
                format!(
                    "<form method=\"post\" action=\"/billing_portal/{}/cancel/{}\">\
                     <button class=\"fail\" type=\"submit\">Cancel at period end</button></form>",
                    escape(&id),
                    escape(text(sub, "id"))
                )
            };
            format!(
                "<tr><td><code>{}</code></td><td>{}</td><td>{}{}</td><td>{}</td><td>{action}</td></tr>",
                escape(text(sub, "id")),
                escape(text(&item["price"], "id")),
                escape(text(sub, "status")),
                if sub["cancel_at_period_end"] == true { " (cancels at period end)" } else { "" },
                date(&item["current_period_end"]),
            )
        })
        .collect();
    let invoices: String = st
        .of_customer("invoice", customer_id)
        .iter()
        .map(|inv| {
            format!(
                "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(text(inv, "hosted_invoice_url")),
                escape(text(inv, "number")),
                escape(text(inv, "status")),
                money(
                    inv["amount_due"].as_i64().unwrap_or(0),
                    text(inv, "currency")
                ),
                date(&inv["created"]),
            )
        })
        .collect();
    let back = session["return_url"]
        .as_str()
        .map(|url| {
            format!(
                "<p><a class=\"return\" href=\"{}\">Return</a></p>",
                escape(url)
            )
        })
        .unwrap_or_default();
    html(
        200,
        "Billing",
        &format!(
            "<h1>Billing (simulated Stripe)</h1><p>Customer <code>{}</code> {}</p>\
             <h2>Subscriptions</h2><table><tr><th>Subscription</th><th>Price</th><th>Status</th>\
             <th>Period ends</th><th></th></tr>{subscriptions}</table>\
             <h2>Invoices</h2><table><tr><th>Number</th><th>Status</th><th>Amount</th>\
             <th>Date</th></tr>{invoices}</table>{back}",
            escape(customer_id),
            escape(&email),
        ),
    )
}

/// `POST /billing_portal/{id}/cancel/{subscription}`: the portal's cancel button (at the
/// period's end, as the default configuration says); delivers `customer.subscription.updated`.
pub async fn cancel(sim: web::Data<Sim>, path: web::Path<(String, String)>) -> HttpResponse {
    let (id, subscription) = path.into_inner();
    let events = {
        let mut st = lock(&sim.stripe);
        let session = st.get_kind(&id, "billing_portal.session").cloned();
        let owned = st.get_kind(&subscription, "subscription").is_some_and(|s| {
            session
                .as_ref()
                .is_some_and(|p| p["customer"] == s["customer"])
        });
        if !owned {
            return html(404, "Billing", "<h1>No such subscription</h1>");
        }
        let params = json!({"cancel_at_period_end": "true"});
        match update_subscription(&mut st, &subscription, &params, now()) {
            Ok((_, events)) => events,
            Err(_) => {
                return html(
                    400,
                    "Billing",
                    "<h1>This subscription cannot be cancelled</h1>",
                );
            }
        }
    };
    deliver(&sim, events, &DeliveryOptions::default()).await;
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/billing_portal/{id}")))
        .finish()
}

/// `GET /invoice/{id}`: the hosted invoice page.
pub async fn invoice_page(sim: web::Data<Sim>, path: web::Path<String>) -> HttpResponse {
    let id = path.into_inner();
    let Some(invoice) = lock(&sim.stripe).get_kind(&id, "invoice").cloned() else {
        return html(
            404,
            "Invoice",
            &format!("<h1>No such invoice</h1><p>{}</p>", escape(&id)),
        );
    };
    let currency = text(&invoice, "currency");
    let amount = |key: &str| money(invoice[key].as_i64().unwrap_or(0), currency);
    html(
        200,
        "Invoice",
        &format!(
            "<h1>Invoice {} (simulated Stripe)</h1><table>\
             <tr><th>Status</th><td class=\"status\">{}</td></tr>\
             <tr><th>Amount due</th><td>{}</td></tr><tr><th>Amount paid</th><td>{}</td></tr>\
             <tr><th>Period</th><td>{} – {}</td></tr><tr><th>Customer</th><td>{}</td></tr>\
             </table><p><a href=\"/invoice/{}/pdf\">Download PDF</a></p>",
            escape(text(&invoice, "number")),
            escape(text(&invoice, "status")),
            amount("amount_due"),
            amount("amount_paid"),
            date(&invoice["period_start"]),
            date(&invoice["period_end"]),
            escape(text(&invoice, "customer_email")),
            escape(&id),
        ),
    )
}

/// `GET /invoice/{id}/pdf`: the invoice as a one-page PDF.
pub async fn invoice_pdf(sim: web::Data<Sim>, path: web::Path<String>) -> HttpResponse {
    let id = path.into_inner();
    let Some(invoice) = lock(&sim.stripe).get_kind(&id, "invoice").cloned() else {
        return HttpResponse::NotFound().finish();
    };
    let line = format!(
        "Invoice {} {} {}",
        text(&invoice, "number"),
        text(&invoice, "status"),
        money(
            invoice["amount_due"].as_i64().unwrap_or(0),
            text(&invoice, "currency")
        )
    );
    HttpResponse::Ok()
        .content_type("application/pdf")
        .body(pdf(&line))
}

/// A minimal valid PDF showing one line of text (ASCII; parentheses and backslashes escaped).
fn pdf(line: &str) -> Vec<u8> {
    let safe: String = line
        .chars()
        .filter(char::is_ascii)
        .flat_map(|c| match c {
            '(' | ')' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    let content = format!("BT /F1 14 Tf 72 720 Td ({safe}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
         /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_owned(),
        format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
    ];
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{object}\nendobj\n", i + 1));
    }
    let xref = out.len();
    out.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objects.len() + 1
    ));
    for offset in offsets {
        out.push_str(&format!("{offset:010} 00000 n \n"));
    }
    out.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    out.into_bytes()
}
