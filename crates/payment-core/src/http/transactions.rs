//! The transactions (charges and refunds) and refunding one.

use actix_web::{HttpResponse, get, post, web};
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PaymentState, PaymentUser, StatusPage, caller};
use crate::store::TransactionRow;

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
    params(StatusPage),
    responses((status = 200, body = TransactionListResponse), (status = 401))
)]
#[get("/transactions")]
pub async fn transactions(
    user: PaymentUser,
    state: web::Data<PaymentState>,
    query: web::Query<StatusPage>,
) -> Result<HttpResponse, ApiError> {
    let (page, status) = query.into_inner().resolve()?;
    let (caller, status) = (caller(&user), status.as_deref());
    let body = match state.service.cached_transactions_json(caller, status, page) {
        Some(body) => body,
        None => {
            state
                .service
                .transactions_json(caller, status, page)
                .await?
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::DateTime;
    use proptest::prelude::*;

    use super::*;
    use crate::store::ListedTransaction;
    use crate::view::{self, Shown};

    fn listed() -> impl Strategy<Value = ListedTransaction> {
        // Any text: quotes, backslashes, control characters, any Unicode.
        let text = || any::<String>();
        // Microseconds from the year 1 to 9999, and beyond it (chrono's own writer).
        let micros = -62_135_596_800_000_000i64..300_000_000_000_000_000;
        (
            any::<i64>(),
            text(),
            text(),
            text(),
            any::<i64>(),
            text(),
            text(),
            micros,
        )
            .prop_map(
                |(id, kind, status, currency, amount, description, provider_id, micros)| {
                    ListedTransaction {
                        id,
                        kind,
                        status,
                        amount,
                        currency,
                        description,
                        provider_transaction_id: provider_id,
                        created_at: DateTime::from_timestamp_micros(micros).unwrap().naive_utc(),
                    }
                },
            )
    }

    proptest! {
        // Nothing is written into the source tree (a failure prints its input).
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn a_page_of_stored_json_is_written_as_serde_writes_its_response(
            rows in proptest::collection::vec(listed(), 0..4),
            (total, page, page_size) in (any::<i64>(), any::<i64>(), any::<i64>()),
        ) {
            let stored: Vec<String> = rows.iter().map(|t| Shown::from(t).to_json()).collect();
            prop_assert!(stored.iter().all(|json| view::is_spliceable(json)));
            let by_hand = view::page_json(
                rows.iter().zip(&stored).map(|(t, json)| (t.id, json.as_str())),
                total,
                page,
                page_size,
            );
            let by_serde = serde_json::to_vec(&TransactionListResponse {
                transactions: rows
                    .iter()
                    .map(|t| TransactionResponse {
                        id: t.id,
                        provider_transaction_id: t.provider_transaction_id.clone(),
                        kind: t.kind.clone(),
                        status: t.status.clone(),
                        amount: t.amount,
                        currency: t.currency.clone(),
                        description: t.description.clone(),
                        created_at: Timestamp(t.created_at),
                    })
                    .collect(),
                total,
                page,
                page_size,
            })
            .unwrap();
            prop_assert_eq!(by_hand.as_ref(), by_serde.as_slice());
        }
    }
}
