//! `GET /invoices`: the caller's Stripe invoices, as the webhook's events told them.

use actix_web::{get, web};
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, StatusPage, caller};
use crate::store::InvoiceRow;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::Invoice)]
pub struct InvoiceResponse {
    pub id: i64,
    /// Stripe's invoice id (`in_...`).
    pub provider_invoice_id: String,
    /// The subscription it bills, if any.
    pub provider_subscription_id: Option<String>,
    /// Stripe's invoice number (none for a draft).
    pub number: Option<String>,
    /// `draft`, `open`, `paid`, `uncollectible` or `void`.
    pub status: String,
    /// Smallest currency unit.
    pub amount_due: i64,
    pub amount_paid: i64,
    pub amount_remaining: i64,
    pub currency: String,
    /// Stripe's hosted page of the invoice (to view, pay or download it).
    pub hosted_invoice_url: Option<String>,
    pub invoice_pdf: Option<String>,
    /// The period its first line covers.
    pub period_start: Option<Timestamp>,
    pub period_end: Option<Timestamp>,
    /// When Stripe created the invoice.
    pub created: Timestamp,
    /// When the newest event about it was stored.
    pub updated_at: Timestamp,
}

impl From<InvoiceRow> for InvoiceResponse {
    fn from(i: InvoiceRow) -> Self {
        InvoiceResponse {
            id: i.id,
            provider_invoice_id: i.provider_invoice_id,
            provider_subscription_id: i.provider_subscription_id,
            number: i.number,
            status: i.status,
            amount_due: i.amount_due,
            amount_paid: i.amount_paid,
            amount_remaining: i.amount_remaining,
            currency: i.currency,
            hosted_invoice_url: i.hosted_invoice_url,
            invoice_pdf: i.invoice_pdf,
            period_start: i.period_start.map(Timestamp),
            period_end: i.period_end.map(Timestamp),
            created: Timestamp(i.invoice_created),
            updated_at: Timestamp(i.updated_at),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::InvoiceList)]
pub struct InvoiceListResponse {
    pub invoices: Vec<InvoiceResponse>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(StatusPage),
    responses(
        (status = 200, body = InvoiceListResponse),
        (status = 401, description = "Not authenticated, Could not validate credentials, or Inactive user"),
        (status = 422, description = "page, page_size or status invalid"),
    )
)]
#[get("/invoices")]
pub async fn invoices(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    query: web::Query<StatusPage>,
) -> Result<web::Json<InvoiceListResponse>, ApiError> {
    let (page, status) = query.into_inner().resolve()?;
    let (rows, total) = state
        .service
        .invoices(caller(&user), status.as_deref(), page)
        .await?;
    Ok(web::Json(InvoiceListResponse {
        invoices: rows.into_iter().map(Into::into).collect(),
        total,
        page: page.page,
        page_size: page.page_size,
    }))
}
