//! The built-in pages Stripe sends the payer back to.

use actix_web::{HttpResponse, get, web};
use serde::Deserialize;
use utoipa::IntoParams;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn page(title: &str, body: &str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
             <body><h1>{title}</h1><p>{body}</p></body></html>"
        ))
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    pub session_id: Option<String>,
}

/// Where checkout returns after a payment (the built-in page).
#[utoipa::path(tag = "payment", params(SessionQuery), responses((status = 200, content_type = "text/html")))]
#[get("/success")]
pub async fn success_page(query: web::Query<SessionQuery>) -> HttpResponse {
    let reference = query
        .into_inner()
        .session_id
        .map(|id| format!(" Reference: {}.", escape(&id)))
        .unwrap_or_default();
    page(
        "Payment received",
        &format!("Thank you: your payment went through.{reference}"),
    )
}

/// Where checkout returns when the payer gives up (the built-in page).
#[utoipa::path(tag = "payment", responses((status = 200, content_type = "text/html")))]
#[get("/cancel")]
pub async fn cancel_page() -> HttpResponse {
    page(
        "Payment cancelled",
        "No payment was taken. You can start again at any time.",
    )
}

/// Where Stripe's billing portal sends the customer back by default (the built-in page).
#[utoipa::path(tag = "payment", responses((status = 200, content_type = "text/html")))]
#[get("/return")]
pub async fn return_page() -> HttpResponse {
    page(
        "Billing updated",
        "You are back from the billing portal. Any change you made there shows here shortly.",
    )
}
