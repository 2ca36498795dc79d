//! `GET /status`: the provider and the totals.

use actix_web::{get, web};
use kernel::{ApiError, Role};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, caller};
use crate::service::Caller;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::Status)]
pub struct StatusResponse {
    pub provider: String,
    pub enabled: bool,
    pub is_test_mode: bool,
    pub total_transactions: i64,
    pub total_revenue_cents: i64,
    pub active_subscriptions: i64,
}

/// The provider's state and the totals: with the auth module, an administrator sees the whole
/// deployment's, any other user the totals of their own rows; without it, the deployment's.
#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    responses(
        (status = 200, body = StatusResponse),
        (status = 401, description = "Not authenticated, Could not validate credentials, or Inactive user"),
    )
)]
#[get("/status")]
pub async fn summary(
    user: PaymentUser,
    state: web::Data<PaymentState>,
) -> Result<web::Json<StatusResponse>, ApiError> {
    let scope = if user.has_role(Role::Admin) {
        Caller::Anyone
    } else {
        caller(&user)
    };
    let summary = state.service.summary(scope).await?;
    Ok(web::Json(StatusResponse {
        provider: "stripe".to_owned(),
        enabled: summary.enabled,
        is_test_mode: summary.is_test_mode,
        total_transactions: summary.total_transactions,
        total_revenue_cents: summary.total_revenue_cents,
        active_subscriptions: summary.active_subscriptions,
    }))
}
