//! `GET /ai/usage`: the caller's plan, daily budget and tokens spent today.

use actix_web::{get, web};
use kernel::identity;
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{AiState, UserQuery, caller};
use crate::budget::Quota;

/// The caller's budget today.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ai::Usage)]
pub struct UsageResponse {
    /// The identifier tokens are counted under: the token's user id, or the `user_id` sent.
    pub user_id: String,
    /// The caller's plan (`free` without an account's paid one).
    pub plan: String,
    /// The UTC day counted (`YYYY-MM-DD`).
    #[schema(example = "2026-11-25")]
    pub day: String,
    /// Tokens spent today: what the provider reported, or estimated from characters (4 to a
    /// token) when it reported nothing.
    pub tokens_used: i64,
    /// The plan's tokens a day (`AI_DAILY_TOKENS_<PLAN>`); null when unlimited.
    pub daily_limit: Option<i64>,
    /// Tokens left today (0 once spent); null when unlimited.
    pub remaining: Option<i64>,
    /// When the count starts again: the next midnight UTC.
    pub resets_at: Timestamp,
}

impl From<Quota> for UsageResponse {
    fn from(q: Quota) -> Self {
        UsageResponse {
            remaining: q.remaining(),
            user_id: q.user_id,
            plan: q.plan,
            day: q.day.to_string(),
            tokens_used: q.used,
            daily_limit: q.limit,
            resets_at: Timestamp(q.resets_at),
        }
    }
}

#[utoipa::path(
    tag = "ai",
    operation_id = "ai_usage",
    params(UserQuery),
    responses(
        (status = 200, body = UsageResponse),
        (status = 400, description = "A user_id over 255 characters or with a NUL"),
        (status = 401, description = "A bearer token that does not validate, or an account's id as user_id without its token"),
        (status = 503, description = "The caller's plan cannot be read"),
    )
)]
#[get("/usage")]
pub async fn usage(
    user: identity::Caller,
    state: web::Data<AiState>,
    query: web::Query<UserQuery>,
) -> Result<web::Json<UsageResponse>, ApiError> {
    let caller = caller(&user, query.into_inner().user_id)?;
    let quota = state.service.usage(&caller).await?;
    Ok(web::Json(quota.into()))
}
