//! The disputes and early fraud warnings.

use actix_web::{get, web};
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, StatusQuery, caller};
use crate::store::DisputeRow;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::Dispute)]
pub struct DisputeResponse {
    pub id: i64,
    pub transaction_id: Option<i64>,
    pub provider_dispute_id: String,
    pub status: String,
    pub reason: String,
    pub amount: i64,
    pub currency: String,
    pub evidence_due_by: Option<Timestamp>,
    pub event_type: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<DisputeRow> for DisputeResponse {
    fn from(d: DisputeRow) -> Self {
        DisputeResponse {
            id: d.id,
            transaction_id: d.transaction_id,
            provider_dispute_id: d.provider_dispute_id,
            status: d.status,
            reason: d.reason,
            amount: d.amount,
            currency: d.currency,
            evidence_due_by: d.evidence_due_by.map(Timestamp),
            event_type: d.event_type,
            created_at: Timestamp(d.created_at),
            updated_at: Timestamp(d.updated_at),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::DisputeList)]
pub struct DisputeListResponse {
    pub disputes: Vec<DisputeResponse>,
    pub total: usize,
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(StatusQuery),
    responses((status = 200, body = DisputeListResponse), (status = 401))
)]
#[get("/disputes")]
pub async fn disputes(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    query: web::Query<StatusQuery>,
) -> Result<web::Json<DisputeListResponse>, ApiError> {
    let status = query.into_inner().status.filter(|s| !s.is_empty());
    let rows = state
        .service
        .disputes(caller(&user), status.as_deref())
        .await?;
    Ok(web::Json(DisputeListResponse {
        total: rows.len(),
        disputes: rows.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(("dispute_id" = i64, Path)),
    responses((status = 200, body = DisputeResponse), (status = 401), (status = 404, description = "Dispute not found"))
)]
#[get("/disputes/{dispute_id}")]
pub async fn dispute(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    id: web::Path<i64>,
) -> Result<web::Json<DisputeResponse>, ApiError> {
    let row = state
        .service
        .dispute(caller(&user), id.into_inner())
        .await?;
    Ok(web::Json(row.into()))
}
