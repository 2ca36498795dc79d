//! The suppression list: `GET /suppressions`, `DELETE /suppressions/{address}` (administrators).

use actix_web::{HttpResponse, delete, get, web};
use kernel::pagination::PageParams;
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Administrator, CommsState};
use crate::Channel;
use crate::domain::suppression::Reason;
use crate::error::CommsError;
use crate::service::{Suppression, SuppressionFilter};

/// An address or number the module no longer sends to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::Suppression)]
pub struct SuppressionResponse {
    pub id: i64,
    /// `email` or `sms`.
    pub channel: Channel,
    /// A lower-case email address or an E.164 number.
    pub address: String,
    pub reason: Reason,
    /// The provider's words: the bounce message, the error, the keyword replied.
    pub detail: Option<String>,
    /// The provider's id of the email or SMS that reported it.
    pub provider_id: Option<String>,
    pub created_at: Timestamp,
}

impl From<Suppression> for SuppressionResponse {
    fn from(s: Suppression) -> Self {
        SuppressionResponse {
            id: s.id,
            channel: s.channel,
            address: s.address,
            reason: s.reason,
            detail: s.detail,
            provider_id: s.provider_id,
            created_at: Timestamp(s.created_at),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = comms::SuppressionList)]
pub struct SuppressionListResponse {
    pub suppressions: Vec<SuppressionResponse>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SuppressionQuery {
    /// `email` or `sms`.
    pub channel: Option<String>,
    /// `hard_bounce`, `complaint`, `unsubscribed` or `stop`.
    pub reason: Option<String>,
    /// Entries whose address contains this text (any case).
    pub q: Option<String>,
}

#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    params(PageParams, SuppressionQuery),
    responses(
        (status = 200, body = SuppressionListResponse),
        (status = 400, description = "Unknown channel or reason"),
        (status = 401),
        (status = 403, description = "Insufficient permissions (administrators only)"),
    )
)]
#[get("/suppressions")]
pub async fn list_suppressions(
    _admin: Administrator,
    state: web::Data<CommsState>,
    page: web::Query<PageParams>,
    query: web::Query<SuppressionQuery>,
) -> Result<web::Json<SuppressionListResponse>, ApiError> {
    let page = page.into_inner().resolve()?;
    let query = query.into_inner();
    let channel = match query.channel.as_deref() {
        None | Some("") => None,
        Some(raw) => Some(
            Channel::parse(raw)
                .filter(|c| *c != Channel::Voice)
                .ok_or_else(|| {
                    CommsError::Invalid(format!("Unknown channel: {raw} (email or sms)"))
                })?,
        ),
    };
    let reason = match query.reason.as_deref() {
        None | Some("") => None,
        Some(raw) => Some(Reason::parse(raw).ok_or_else(|| {
            CommsError::Invalid(format!(
                "Unknown reason: {raw} (hard_bounce, complaint, unsubscribed or stop)"
            ))
        })?),
    };
    let filter = SuppressionFilter {
        channel,
        reason,
        contains: query.q,
    };
    let (entries, total) = state.service.suppressions(filter, page).await?;
    Ok(web::Json(SuppressionListResponse {
        suppressions: entries.into_iter().map(SuppressionResponse::from).collect(),
        total,
        page: page.page,
        page_size: page.page_size,
    }))
}

/// Takes an address or number off the list: sends to it go to the provider again. The path
/// holds the address as listed, in any case (`Ada@Example.com`) or spacing of the number
/// (`+1 500 555 0010`; a `+` may be written `%2B`).
#[utoipa::path(
    tag = "comms",
    security(("bearer" = [])),
    params(("address" = String, Path, description = "An email address or an E.164 number")),
    responses(
        (status = 200, body = SuppressionResponse, description = "The removed entry"),
        (status = 400, description = "Invalid address: not an email address nor an E.164 number"),
        (status = 401),
        (status = 403, description = "Insufficient permissions (administrators only)"),
        (status = 404, description = "Suppression not found: <address>"),
    )
)]
#[delete("/suppressions/{address}")]
pub async fn remove_suppression(
    _admin: Administrator,
    state: web::Data<CommsState>,
    address: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let removed = state.service.unsuppress(address.into_inner()).await?;
    Ok(HttpResponse::Ok().json(SuppressionResponse::from(removed)))
}
