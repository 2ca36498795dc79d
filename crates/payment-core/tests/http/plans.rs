//! The entitlements the module lends the others: a user's plan follows their subscription as its
//! webhook events arrive (paid, cancelled at the period's end, deleted), named by `PAYMENT_PLANS`
//! or by the subscription's own `plan_name`.

use kernel::plans::Plan;
use provider_sim::EventSpec;
use serde_json::json;

use super::*;

kernel::backend_tests! {
    a_paid_subscription_gives_its_plan_until_it_is_deleted,
    an_unlisted_price_gives_its_plan_name_and_the_newest_current_subscription_counts,
}

async fn plan(c: &Ctx, user: i64) -> Plan {
    c.entitlements.plan(user).await.unwrap()
}

async fn a_paid_subscription_gives_its_plan_until_it_is_deleted(db: TestDb) {
    let c = start(&db, |config| {
        config.plans = payment_core::config::parse_plans("price_monthly=pro").unwrap();
    })
    .await;
    assert_eq!(plan(&c, 1).await, Plan::free());
    c.pay(ALICE, "subscription", "price_monthly").await;
    let alice = plan(&c, 1).await;
    assert_eq!(alice.name, "pro");
    let (_, subs) = c.call("GET", "/subscriptions", Some(ALICE), None).await;
    let sub = &subs["subscriptions"][0];
    // The API shows the subscription as before: its plan_name is the price's.
    assert_eq!(sub["plan_name"], "price_monthly");
    assert_eq!(
        alice.until.map(|t| kernel::time::format(&t)).as_deref(),
        sub["current_period_end"].as_str()
    );
    assert_eq!(plan(&c, 2).await, Plan::free(), "Bob paid nothing");
    // Cancelled at the period's end: the plan lasts until then.
    let id = sub["id"].as_i64().unwrap();
    let (status, _) = c
        .call(
            "POST",
            &format!("/subscriptions/{id}/cancel"),
            Some(ALICE),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(plan(&c, 1).await.name, "pro");
    // The period ends: Stripe deletes the subscription and says so.
    let provider_id = sub["provider_subscription_id"].as_str().unwrap();
    let deliveries = c
        .sim
        .deliver_stripe_events(
            &[EventSpec::new("customer.subscription.deleted").object(json!({"id": provider_id}))],
            &DeliveryOptions::default(),
        )
        .await;
    assert_eq!(deliveries[0].status, Some(200), "{deliveries:?}");
    assert_eq!(plan(&c, 1).await, Plan::free());
    let (_, subs) = c.call("GET", "/subscriptions", Some(ALICE), None).await;
    assert_eq!(subs["subscriptions"][0]["status"], "canceled");
}

async fn an_unlisted_price_gives_its_plan_name_and_the_newest_current_subscription_counts(
    db: TestDb,
) {
    let c = start(&db, |config| {
        config.plans = payment_core::config::parse_plans("Team=team").unwrap();
    })
    .await;
    // Not listed: the subscription's plan_name (the simulator's prices have no nickname).
    c.pay(ALICE, "subscription", "price_yearly").await;
    assert_eq!(plan(&c, 1).await.name, "price_yearly");
    // A newer subscription whose price has a nickname, listed by that name; trialing counts.
    let sub = |status: &str| {
        json!({"id": "sub_team", "customer": "cus_team", "status": status,
               "cancel_at_period_end": false, "metadata": {"user_id": "1"},
               "items": {"data": [{"current_period_start": 1_800_000_000,
                                   "current_period_end": 1_802_592_000,
                                   "price": {"id": "price_team", "nickname": "Team"}}]}})
    };
    let (status, _) = send_event(
        &c,
        event(
            "evt_t1",
            "customer.subscription.created",
            100,
            sub("trialing"),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let team = plan(&c, 1).await;
    assert_eq!(team.name, "team");
    assert_eq!(
        team.until.map(|t| t.and_utc().timestamp()),
        Some(1_802_592_000)
    );
    // Past due is not current: the older subscription gives the plan again.
    send_event(
        &c,
        event(
            "evt_t2",
            "customer.subscription.updated",
            200,
            sub("past_due"),
        ),
    )
    .await;
    assert_eq!(plan(&c, 1).await.name, "price_yearly");
    // Active again: the newest current subscription gives the plan.
    send_event(
        &c,
        event(
            "evt_t3",
            "customer.subscription.updated",
            300,
            sub("active"),
        ),
    )
    .await;
    assert_eq!(plan(&c, 1).await.name, "team");
}
