//! Plans: what a user is entitled to, through the [`Entitlements`] capability (provided by
//! payment, from the user's active or trialing subscription; used by AI budgets and `/auth/me`).

/// The plan of a user without a paid one (and of every user when no module provides
/// [`Entitlements`]).
pub const FREE_PLAN: &str = "free";

/// A user's current plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// The plan's name (`free`, or a name the deployer maps to a price).
    pub name: String,
    /// The end of the paid period, when the plan is a subscription's.
    pub until: Option<chrono::NaiveDateTime>,
}

impl Plan {
    pub fn free() -> Plan {
        Plan {
            name: FREE_PLAN.to_owned(),
            until: None,
        }
    }
}

/// Why a plan could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entitlements unavailable: {0}")]
pub struct EntitlementsError(pub String);

impl From<EntitlementsError> for crate::ApiError {
    /// A plan that cannot be read (its store does not answer) is a 503 with `Retry-After`, the
    /// cause kept for the log: the request may succeed when retried.
    fn from(e: EntitlementsError) -> Self {
        crate::ApiError::service_unavailable(
            "Entitlements temporarily unavailable, try again shortly",
        )
        .header(
            actix_web::http::header::RETRY_AFTER,
            actix_web::http::header::HeaderValue::from(1u32),
        )
        .caused_by(e)
    }
}

/// Tells what a user is entitled to.
#[async_trait::async_trait]
pub trait Entitlements: Send + Sync {
    /// The user's current plan ([`Plan::free`] when they have no paid one).
    async fn plan(&self, user_id: i64) -> Result<Plan, EntitlementsError>;
}

impl crate::capability::Capability for dyn Entitlements {
    const NAME: &'static str = "entitlements (a user's plan)";
}
