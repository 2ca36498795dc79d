//! The transactions (charges and refunds) and refunding one.

use actix_web::{HttpResponse, get, post, web};
use kernel::pagination::PageParams;
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, StatusQuery, caller};
use crate::store::{ListedTransaction, TransactionRow};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::Transaction)]
pub struct TransactionResponse {
    pub id: i64,
    pub provider_transaction_id: String,
    /// `charge` or `refund`.
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    pub description: String,
    pub created_at: Timestamp,
}

/// [`TransactionResponse`] written from a borrowed row (a page served from the read cache is
/// shared, not copied).
#[derive(Serialize)]
struct TransactionView<'a> {
    id: i64,
    provider_transaction_id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    status: &'a str,
    amount: i64,
    currency: &'a str,
    description: &'a str,
    created_at: Timestamp,
}

impl<'a> From<&'a ListedTransaction> for TransactionView<'a> {
    fn from(t: &'a ListedTransaction) -> Self {
        TransactionView {
            id: t.id,
            provider_transaction_id: &t.provider_transaction_id,
            kind: &t.kind,
            status: &t.status,
            amount: t.amount,
            currency: &t.currency,
            description: &t.description,
            created_at: Timestamp(t.created_at),
        }
    }
}

/// [`TransactionListResponse`] written from a borrowed page.
#[derive(Serialize)]
struct TransactionListView<'a> {
    transactions: Vec<TransactionView<'a>>,
    total: i64,
    page: i64,
    page_size: i64,
}

impl From<TransactionRow> for TransactionResponse {
    fn from(t: TransactionRow) -> Self {
        TransactionResponse {
            id: t.id,
            provider_transaction_id: t.provider_transaction_id,
            kind: t.kind,
            status: t.status,
            amount: t.amount,
            currency: t.currency,
            description: t.description,
            created_at: Timestamp(t.created_at),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = payment::TransactionList)]
pub struct TransactionListResponse {
    pub transactions: Vec<TransactionResponse>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = payment::RefundRequest)]
pub struct RefundBody {
    /// Smallest currency unit; omit for everything not yet refunded.
    #[schema(minimum = 1)]
    pub amount: Option<i64>,
    /// `requested_by_customer`, `duplicate`, `fraudulent` (sent to Stripe), or a free note.
    pub reason: Option<String>,
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(PageParams, StatusQuery),
    responses((status = 200, body = TransactionListResponse), (status = 401))
)]
#[get("/transactions")]
pub async fn transactions(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    page: web::Query<PageParams>,
    query: web::Query<StatusQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = page.into_inner().resolve()?;
    let status = query.into_inner().status.filter(|s| !s.is_empty());
    let (caller, status) = (caller(&user), status.as_deref());
    let list = match state.service.cached_transactions(caller, status, page) {
        Some(list) => list,
        None => state.service.transactions(caller, status, page).await?,
    };
    let body = match list.body.get() {
        Some(body) => body.clone(),
        None => {
            let body = serde_json::to_vec(&TransactionListView {
                transactions: list.rows.iter().map(TransactionView::from).collect(),
                total: list.total,
                page: page.page,
                page_size: page.page_size,
            })
            .map_err(ApiError::internal)?;
            list.body.get_or_init(|| body.into()).clone()
        }
    };
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(("transaction_id" = i64, Path)),
    responses((status = 200, body = TransactionResponse), (status = 401), (status = 404, description = "Transaction not found"))
)]
#[get("/transactions/{transaction_id}")]
pub async fn transaction(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    id: web::Path<i64>,
) -> Result<web::Json<TransactionResponse>, ApiError> {
    let row = state
        .service
        .transaction(caller(&user), id.into_inner())
        .await?;
    Ok(web::Json(row.into()))
}

#[utoipa::path(
    tag = "payment",
    security(("bearer" = [])),
    params(("transaction_id" = i64, Path)),
    request_body = RefundBody,
    responses(
        (status = 200, body = TransactionResponse),
        (status = 400, description = "A refund cannot be refunded, or Stripe refused"),
        (status = 401), (status = 404, description = "Transaction not found"),
        (status = 409, description = "Transaction already fully refunded"),
        (status = 422, description = "amount outside 1..what is not yet refunded"),
        (status = 502), (status = 503),
    )
)]
#[post("/refund/{transaction_id}")]
pub async fn refund(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    id: web::Path<i64>,
    body: kernel::http::OptionalJson<RefundBody>,
) -> Result<web::Json<TransactionResponse>, ApiError> {
    // No body at all refunds what is not yet refunded; a body that cannot be read is a 422.
    let body = body.0.unwrap_or_default();
    let row = state
        .service
        .refund(caller(&user), id.into_inner(), body.amount, body.reason)
        .await?;
    Ok(web::Json(row.into()))
}
