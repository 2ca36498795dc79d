//! `POST /checkout`: a Stripe checkout session.

use actix_web::{post, web};
use kernel::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, caller};
use crate::service::CheckoutRequest;

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = payment::CheckoutRequest)]
pub struct CheckoutBody {
    /// Stripe's price id.
    pub price_id: Option<String>,
    /// At least 1 (default 1).
    #[schema(minimum = 1)]
    pub quantity: Option<i64>,
    /// `payment` or `subscription`.
    pub mode: Option<String>,
    /// May hold `{CHECKOUT_SESSION_ID}`; default `PAYMENT_SUCCESS_URL`, then the built-in page.
    pub success_url: Option<String>,
    pub cancel_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::CheckoutResponse)]
pub struct CheckoutResponse {
    pub session_id: String,
    pub checkout_url: String,
    /// `stripe`.
    pub provider_key: String,
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    request_body = CheckoutBody,
    responses(
        (status = 200, body = CheckoutResponse),
        (status = 400, description = "Stripe refused the request (its message)"),
        (status = 401, description = "Not authenticated, or Stripe refused the secret key"),
        (status = 422, description = "mode, price_id or quantity invalid"),
        (status = 502, description = "Stripe failed or could not be reached"),
        (status = 503, description = "Payment provider not configured: STRIPE_SECRET_KEY is not set"),
    )
)]
#[post("/checkout")]
pub async fn checkout(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    body: kernel::http::Json<CheckoutBody>,
) -> Result<web::Json<CheckoutResponse>, ApiError> {
    let body = body.into_inner();
    let request = CheckoutRequest {
        price_id: body.price_id,
        quantity: body.quantity,
        mode: body.mode,
        success_url: body.success_url,
        cancel_url: body.cancel_url,
    };
    let email = user.user().map(|p| p.email.clone());
    let session = state
        .service
        .checkout(caller(&user), email, request)
        .await?;
    Ok(web::Json(CheckoutResponse {
        session_id: session.session_id,
        checkout_url: session.checkout_url,
        provider_key: "stripe".to_owned(),
    }))
}
