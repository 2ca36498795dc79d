//! The [`Entitlements`] this module lends the others: a user's plan, from their active or
//! trialing subscription, named by `PAYMENT_PLANS`.
//!
//! The subscription rows are the ones the webhook keeps current (`customer.subscription.*`), so
//! the plan follows Stripe: a subscription that is cancelled and has ended (`.deleted`, status
//! `canceled`) no longer counts. One cancelled at the period's end counts until that end, and not
//! after it even when its `.deleted` event is late.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::NaiveDateTime;
use kernel::DbPool;
use kernel::plans::{Entitlements, EntitlementsError, Plan};

use crate::store::{self, SubscriptionRow};

/// A user's plan from the payment module's subscription rows.
pub(crate) struct SubscriptionPlans {
    pool: DbPool,
    /// `PAYMENT_PLANS`: price id (or `plan_name`) → plan.
    plans: Arc<BTreeMap<String, String>>,
}

impl SubscriptionPlans {
    pub(crate) fn new(pool: DbPool, plans: BTreeMap<String, String>) -> Self {
        SubscriptionPlans {
            pool,
            plans: Arc::new(plans),
        }
    }
}

fn unavailable(e: impl std::fmt::Display) -> EntitlementsError {
    EntitlementsError(format!("subscriptions unreadable: {e}"))
}

#[async_trait::async_trait]
impl Entitlements for SubscriptionPlans {
    async fn plan(&self, user_id: i64) -> Result<Plan, EntitlementsError> {
        let mut pooled = self.pool.read().await.map_err(unavailable)?;
        // Every subscription of the user, newest first (a user has few).
        let rows = store::list_subscriptions(&mut pooled.conn(), Some(user_id), None)
            .await
            .map_err(unavailable)?;
        Ok(current_plan(&self.plans, &rows, kernel::time::now()))
    }
}

/// Whether a subscription gives its plan at `now`: active or trialing, and not cancelled at a
/// period's end that has passed.
fn current(sub: &SubscriptionRow, now: NaiveDateTime) -> bool {
    let ended = sub.cancel_at_period_end && sub.current_period_end.is_some_and(|end| end <= now);
    matches!(sub.status.as_str(), "active" | "trialing") && !ended
}

/// The plan a subscription gives: `PAYMENT_PLANS`' name for its price, else for its
/// `plan_name`, else its `plan_name` itself.
pub(crate) fn plan_name(plans: &BTreeMap<String, String>, sub: &SubscriptionRow) -> String {
    sub.price_id
        .as_ref()
        .and_then(|price| plans.get(price))
        .or_else(|| plans.get(&sub.plan_name))
        .cloned()
        .unwrap_or_else(|| sub.plan_name.clone())
}

/// The plan of the first of `subscriptions` (newest first) that is current; free when none is.
pub(crate) fn current_plan(
    plans: &BTreeMap<String, String>,
    subscriptions: &[SubscriptionRow],
    now: NaiveDateTime,
) -> Plan {
    subscriptions
        .iter()
        .find(|sub| current(sub, now))
        .map(|sub| Plan {
            name: plan_name(plans, sub),
            until: sub.current_period_end,
        })
        .unwrap_or_else(Plan::free)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> NaiveDateTime {
        chrono::DateTime::from_timestamp(seconds, 0)
            .map(|t| t.naive_utc())
            .unwrap_or_default()
    }

    fn sub(id: i64, price: Option<&str>, plan_name: &str) -> SubscriptionRow {
        SubscriptionRow {
            id,
            user_id: Some(1),
            provider_customer_id: Some("cus_1".into()),
            provider_subscription_id: format!("sub_{id}"),
            plan_name: plan_name.into(),
            status: "active".into(),
            current_period_start: Some(at(1_000)),
            current_period_end: Some(at(2_000)),
            cancel_at_period_end: false,
            event_created: 0,
            created_at: at(1_000),
            updated_at: at(1_000),
            price_id: price.map(str::to_owned),
        }
    }

    #[test]
    fn the_price_names_the_plan_then_the_plan_name_then_the_row_itself() {
        let plans: BTreeMap<String, String> = [("price_monthly", "pro"), ("Team", "team")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(
            plan_name(&plans, &sub(1, Some("price_monthly"), "Monthly")),
            "pro"
        );
        assert_eq!(
            plan_name(&plans, &sub(1, Some("price_team"), "Team")),
            "team"
        );
        // A row stored before prices were kept, whose plan_name is the price id.
        assert_eq!(plan_name(&plans, &sub(1, None, "price_monthly")), "pro");
        assert_eq!(
            plan_name(&plans, &sub(1, Some("price_x"), "Extra")),
            "Extra"
        );
        assert_eq!(
            plan_name(
                &BTreeMap::new(),
                &sub(1, Some("price_monthly"), "price_monthly")
            ),
            "price_monthly"
        );
    }

    #[test]
    fn the_newest_subscription_that_has_not_ended_gives_the_plan() {
        let plans: BTreeMap<String, String> = [("price_a", "a"), ("price_b", "b")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(current_plan(&plans, &[], at(1_500)), Plan::free());
        let newest = sub(2, Some("price_b"), "B");
        let older = sub(1, Some("price_a"), "A");
        let plan = current_plan(&plans, &[newest.clone(), older.clone()], at(1_500));
        assert_eq!((plan.name.as_str(), plan.until), ("b", Some(at(2_000))));
        // Cancelled at the period's end: counts until the end, not after.
        let cancelled = SubscriptionRow {
            cancel_at_period_end: true,
            ..newest
        };
        let both = [cancelled.clone(), older];
        assert_eq!(current_plan(&plans, &both, at(1_999)).name, "b");
        assert_eq!(current_plan(&plans, &both, at(2_000)).name, "a");
        assert_eq!(current_plan(&plans, &[cancelled], at(2_001)), Plan::free());
        // Without a known period end, a subscription Stripe calls active counts.
        let open_ended = SubscriptionRow {
            cancel_at_period_end: true,
            current_period_end: None,
            ..sub(3, None, "C")
        };
        assert_eq!(current_plan(&plans, &[open_ended], at(9_999)).name, "C");
        // Only active and trialing subscriptions count.
        for (status, counts) in [
            ("trialing", true),
            ("past_due", false),
            ("unpaid", false),
            ("incomplete", false),
            ("canceled", false),
        ] {
            let row = SubscriptionRow {
                status: status.into(),
                ..sub(4, Some("price_a"), "A")
            };
            let expected = if counts { "a" } else { "free" };
            assert_eq!(
                current_plan(&plans, &[row], at(1_500)).name,
                expected,
                "{status}"
            );
        }
    }
}
