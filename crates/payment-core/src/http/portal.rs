//! `POST /portal`: Stripe's billing portal for the caller's customer (payment methods, invoices,
//! plan changes and cancellation on Stripe's hosted pages).

use actix_web::{post, web};
use kernel::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, caller};

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = payment::PortalRequest)]
pub struct PortalBody {
    /// Where the portal sends the customer back: an http(s) URL on the origin of
    /// `PUBLIC_BASE_URL` or of `PAYMENT_PORTAL_RETURN_URL`. Default `PAYMENT_PORTAL_RETURN_URL`,
    /// then the built-in `/payment/return` page.
    #[schema(max_length = 2048)]
    pub return_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::PortalSession)]
pub struct PortalResponse {
    /// Stripe's portal: send the customer there (the link is valid for a short time, so open a
    /// session each time it is needed).
    pub url: String,
    /// Stripe's session id (`bps_...`).
    pub id: String,
    /// Where the portal sends the customer back.
    pub return_url: String,
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    request_body(content = PortalBody, description = "Optional: no body uses the default return URL"),
    responses(
        (status = 200, body = PortalResponse),
        (status = 400, description = "Stripe refused the request (its message; e.g. no portal configuration saved in test mode)"),
        (status = 401, description = "Not authenticated, or Stripe refused the secret key"),
        (status = 409, description = "No billing account yet: the caller has no Stripe customer (a first checkout creates it)"),
        (status = 422, description = "return_url is not an http(s) URL on an allowed origin, or the body cannot be read"),
        (status = 502, description = "Stripe failed or could not be reached"),
        (status = 503, description = "Payment provider not configured: STRIPE_SECRET_KEY is not set"),
    )
)]
#[post("/portal")]
pub async fn portal(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    body: kernel::http::OptionalJson<PortalBody>,
) -> Result<web::Json<PortalResponse>, ApiError> {
    let body = body.0.unwrap_or_default();
    let session = state
        .service
        .portal(caller(&user), body.return_url.as_deref())
        .await?;
    Ok(web::Json(PortalResponse {
        url: session.url,
        id: session.id,
        return_url: session.return_url,
    }))
}
