//! `POST /webhook`: Stripe's signed events.

use actix_web::{HttpRequest, HttpResponse, post, web};
use kernel::ApiError;
use serde_json::json;

use super::PaymentState;

/// Stripe's events, signed in `Stripe-Signature`.
#[utoipa::path(
    tag = "payment",
    request_body(content = String, content_type = "application/json"),
    responses(
        (status = 200, description = "{\"status\": \"processed\", \"event_type\": ..., \"duplicate\": true when seen before}"),
        (status = 400, description = "Invalid payload"),
        (status = 500, description = "The event could not be stored: Stripe retries it"),
    )
)]
#[post("/webhook")]
pub async fn webhook(
    req: HttpRequest,
    state: web::Data<PaymentState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let signature = req
        .headers()
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let receipt = state.service.webhook(signature.as_deref(), &body).await?;
    let mut answer = json!({"status": "processed", "event_type": receipt.event_type});
    if receipt.duplicate {
        answer["duplicate"] = json!(true);
    }
    Ok(HttpResponse::Ok().json(answer))
}
