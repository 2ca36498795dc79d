//! The subscriptions and cancelling one at the end of its period.

use actix_web::{get, post, web};
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, StatusQuery, caller};
use crate::store::SubscriptionRow;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::Subscription)]
pub struct SubscriptionResponse {
    pub id: i64,
    pub provider_subscription_id: String,
    pub plan_name: String,
    pub status: String,
    pub current_period_start: Option<Timestamp>,
    pub current_period_end: Option<Timestamp>,
    pub cancel_at_period_end: bool,
}

impl From<SubscriptionRow> for SubscriptionResponse {
    fn from(s: SubscriptionRow) -> Self {
        SubscriptionResponse {
            id: s.id,
            provider_subscription_id: s.provider_subscription_id,
            plan_name: s.plan_name,
            status: s.status,
            current_period_start: s.current_period_start.map(Timestamp),
            current_period_end: s.current_period_end.map(Timestamp),
            cancel_at_period_end: s.cancel_at_period_end,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::SubscriptionList)]
pub struct SubscriptionListResponse {
    pub subscriptions: Vec<SubscriptionResponse>,
    pub total: usize,
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(StatusQuery),
    responses((status = 200, body = SubscriptionListResponse), (status = 401))
)]
#[get("/subscriptions")]
pub async fn subscriptions(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    query: web::Query<StatusQuery>,
) -> Result<web::Json<SubscriptionListResponse>, ApiError> {
    let status = query.into_inner().status.filter(|s| !s.is_empty());
    let rows = state
        .service
        .subscriptions(caller(&user), status.as_deref())
        .await?;
    Ok(web::Json(SubscriptionListResponse {
        total: rows.len(),
        subscriptions: rows.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(("subscription_id" = i64, Path)),
    responses(
        (status = 200, body = SubscriptionResponse),
        (status = 401), (status = 404, description = "Subscription not found"),
        (status = 502), (status = 503),
    )
)]
#[post("/subscriptions/{subscription_id}/cancel")]
pub async fn cancel(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    id: web::Path<i64>,
) -> Result<web::Json<SubscriptionResponse>, ApiError> {
    let row = state.service.cancel(caller(&user), id.into_inner()).await?;
    Ok(web::Json(row.into()))
}
