//! Handlers of `/api/v1/payment`, the built-in `/payment/success` and `/payment/cancel` pages, and
//! their bodies.

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use kernel::identity::{self, Access, need};
use kernel::pagination::PageParams;
use kernel::{ApiError, Role, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::service::{Caller, CheckoutRequest, PaymentService};
use crate::store::{DisputeRow, SubscriptionRow, TransactionRow};

pub struct PaymentState {
    pub service: Arc<dyn PaymentService>,
}

/// The rows a caller sees: a user's own, or every row on an open deployment.
fn caller(access: &Access) -> Caller {
    match access.user_id() {
        Some(id) => Caller::User(id),
        None => Caller::Anyone,
    }
}

/// Every route but the webhook needs an active user when auth is mounted (spec, Payment 1).
type PaymentUser = identity::Caller<need::User>;

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

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatusQuery {
    pub status: Option<String>,
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
) -> Result<web::Json<TransactionListResponse>, ApiError> {
    let page = page.into_inner().resolve()?;
    let status = query.into_inner().status.filter(|s| !s.is_empty());
    let (rows, total) = state
        .service
        .transactions(caller(&user), status.as_deref(), page)
        .await?;
    Ok(web::Json(TransactionListResponse {
        transactions: rows.into_iter().map(Into::into).collect(),
        total,
        page: page.page,
        page_size: page.page_size,
    }))
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
