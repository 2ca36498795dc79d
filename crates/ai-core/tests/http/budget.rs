//! Daily token budgets: each caller's plan (an account's from the entitlements, the free plan
//! otherwise), `GET /ai/usage`, the 429 with `Retry-After` before the provider is asked (chat and
//! both stream forms), the count from the provider's usage or estimated from characters, and no
//! count lost when replies land at once.

use kernel::plans::{Entitlements, EntitlementsError, Plan};

use super::*;

kernel::backend_tests! {
    each_plan_has_its_budget_and_a_spent_one_is_429_before_the_provider_is_asked,
    tokens_are_estimated_from_characters_when_the_provider_reports_none,
    without_entitlements_every_caller_has_the_free_plan,
    concurrent_replies_are_all_counted,
    a_stream_that_breaks_off_counts_what_was_streamed,
}

/// The account of [`TOKEN`] (user 7) is on `pro`; user 8 cannot be read; others are free.
struct StubEntitlements;

#[async_trait::async_trait]
impl Entitlements for StubEntitlements {
    async fn plan(&self, user_id: i64) -> Result<Plan, EntitlementsError> {
        match user_id {
            7 => Ok(Plan {
                name: "pro".into(),
                until: None,
            }),
            8 => Err(EntitlementsError("the plans store is down".into())),
            _ => Ok(Plan::free()),
        }
    }
}

const UNREADABLE: &str = "token-of-user-8";

struct Unreadable;

#[async_trait::async_trait]
impl Authenticator for Unreadable {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let user = |user_id| Principal {
            user_id,
            email: format!("{user_id}@example.com"),
            full_name: None,
            role: Role::User,
            is_active: true,
        };
        match token {
            TOKEN => Ok(user(7)),
            UNREADABLE => Ok(user(8)),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

/// The module with budgets `free` and `pro`, an authenticator, and (`entitled`) the stub
/// entitlements.
async fn start_budgets(db: &TestDb, free: i64, pro: i64, entitled: bool) -> Ctx {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let config = config(&sim, |c| {
        c.daily_tokens.insert("FREE".into(), free);
        c.daily_tokens.insert("PRO".into(), pro);
    });
    let pool = db.migrated_pool(&[ai_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool)
        .unwrap()
        .with_authenticator(Arc::new(Unreadable));
    if entitled {
        deps = deps.with::<dyn Entitlements>(Arc::new(StubEntitlements));
    }
    let server = spawn_modules(vec![Arc::new(
        AiModule::build(config, &deps).await.unwrap(),
    )]);
    Ctx { server, sim }
}

impl Ctx {
    /// Any request with an optional bearer token: (status, Retry-After, body).
    async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Option<String>, Value) {
        let url = self.server.url(&format!("/ai{path}"));
        let mut req = match method {
            "GET" => self.server.client.get(url),
            _ => self.server.client.post(url),
        };
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = res.text().await.unwrap();
        (
            status,
            retry_after,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn usage(&self, query: &str, token: Option<&str>) -> Value {
        let (status, _, body) = self
            .send("GET", &format!("/usage{query}"), token, None)
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

fn today() -> (String, String) {
    let now = chrono::Utc::now().naive_utc();
    let next = now.date().succ_opt().unwrap().and_hms_opt(0, 0, 0).unwrap();
    (now.date().to_string(), kernel::time::format(&next))
}

async fn each_plan_has_its_budget_and_a_spent_one_is_429_before_the_provider_is_asked(db: TestDb) {
    let c = start_budgets(&db, 10, 1000, true).await;
    let (day, midnight) = today();
    // An account on pro, and an anonymous caller on the free plan, before anything is spent.
    let pro = c.usage("", Some(TOKEN)).await;
    assert_eq!(
        pro,
        json!({"user_id": "7", "plan": "pro", "day": day, "tokens_used": 0,
               "daily_limit": 1000, "remaining": 1000, "resets_at": midnight})
    );
    let anonymous = c.usage("", None).await;
    assert_eq!(
        (
            &anonymous["user_id"],
            &anonymous["plan"],
            &anonymous["daily_limit"]
        ),
        (&json!("api-user"), &json!("free"), &json!(10))
    );
    // The simulator reports its usage: a word a token, the prompt's and the reply's (an echo).
    let (status, _, _) = c
        .send(
            "POST",
            "/chat",
            Some(TOKEN),
            Some(json!({"message": "one two three"})),
        )
        .await;
    assert_eq!(status, 200);
    let pro = c.usage("", Some(TOKEN)).await;
    assert_eq!(
        (&pro["tokens_used"], &pro["remaining"]),
        (&json!(6), &json!(994))
    );
    // The free plan's 10: 6 used, then 6 more (the reply that crosses the limit counts whole).
    for message in ["a b c", "d e f"] {
        let (status, _, body) = c
            .send("POST", "/chat", None, Some(json!({"message": message})))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let free = c.usage("?user_id=api-user", None).await;
    assert_eq!(
        (&free["tokens_used"], &free["remaining"]),
        (&json!(12), &json!(0))
    );
    // Spent: every route that asks the provider answers 429 first, and the provider is not asked.
    let asked = c.sim.journal_for(Provider::Openai).len();
    let expected = format!(
        "AI quota exceeded: the free plan allows 10 tokens a day and 12 were used today; it \
         resets at {}T00:00:00Z (midnight UTC)",
        chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d")
            .unwrap()
            .succ_opt()
            .unwrap()
    );
    for (method, path, body) in [
        ("POST", "/chat", Some(json!({"message": "more"}))),
        ("POST", "/chat/stream", Some(json!({"message": "more"}))),
        ("GET", "/chat/stream?message=more", None),
    ] {
        let (status, retry_after, answer) = c.send(method, path, None, body).await;
        assert_eq!(
            (status, &answer["detail"]),
            (429, &json!(expected)),
            "{path}"
        );
        let seconds: u64 = retry_after.expect("Retry-After").parse().unwrap();
        let to_midnight = kernel::time::now()
            .date()
            .succ_opt()
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            - kernel::time::now();
        assert!((1..=86_400).contains(&seconds), "{seconds}");
        assert!(
            seconds.abs_diff(to_midnight.num_seconds().unsigned_abs()) <= 5,
            "{seconds}"
        );
    }
    assert_eq!(c.sim.journal_for(Provider::Openai).len(), asked);
    // Another caller id has its own count; the account is unaffected.
    let (status, _, _) = c
        .send(
            "POST",
            "/chat",
            None,
            Some(json!({"message": "hi", "user_id": "someone-else"})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _, _) = c
        .send(
            "POST",
            "/chat",
            Some(TOKEN),
            Some(json!({"message": "still fine"})),
        )
        .await;
    assert_eq!(status, 200);
    // Invalid input is still its 400, even when the budget is spent.
    let (status, _, _) = c
        .send("POST", "/chat", None, Some(json!({"message": " "})))
        .await;
    assert_eq!(status, 400);
    // A plan that cannot be read is a 503 with Retry-After, on chat and on /usage.
    for (method, path) in [("POST", "/chat"), ("GET", "/usage")] {
        let body = (method == "POST").then(|| json!({"message": "hello"}));
        let (status, retry_after, answer) = c.send(method, path, Some(UNREADABLE), body).await;
        assert_eq!(
            (status, retry_after.as_deref(), &answer["detail"]),
            (
                503,
                Some("1"),
                &json!("Entitlements temporarily unavailable, try again shortly")
            ),
            "{path}"
        );
    }
    // A user_id that could not be stored is a 400 on /usage too.
    let (status, _, _) = c
        .send(
            "GET",
            &format!("/usage?user_id={}", "x".repeat(256)),
            None,
            None,
        )
        .await;
    assert_eq!(status, 400);
}

async fn tokens_are_estimated_from_characters_when_the_provider_reports_none(db: TestDb) {
    let c = start_budgets(&db, 1000, 1000, true).await;
    c.sim.set_llm_usage(false);
    // 9 characters sent (3 tokens), the same 9 echoed (3 tokens).
    let (status, _, body) = c
        .send(
            "POST",
            "/chat",
            Some(TOKEN),
            Some(json!({"message": "abcdefghi"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(c.usage("", Some(TOKEN)).await["tokens_used"], 6);
    // Continued: the context (9 + 9) and the new 4 characters are sent (22 → 6), 4 echoed (1).
    let id = body["conversation_id"].clone();
    let (status, _, _) = c
        .send(
            "POST",
            "/chat",
            Some(TOKEN),
            Some(json!({"message": "wxyz", "conversation_id": id})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(c.usage("", Some(TOKEN)).await["tokens_used"], 6 + 7);
    // A stream is counted the same way: 5 characters each way (2 + 2).
    let (status, events) = c.stream(json!({"message": "abcde"})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&events).last(), Some(&"complete"));
    assert_eq!(c.usage("", None).await["tokens_used"], 4);
    // With usage reported again, the provider's counts are taken (1 word each way).
    c.sim.set_llm_usage(true);
    c.stream(json!({"message": "abcdefghijklmnop"})).await;
    assert_eq!(c.usage("", None).await["tokens_used"], 4 + 2);
}

async fn without_entitlements_every_caller_has_the_free_plan(db: TestDb) {
    let c = start_budgets(&db, 5, 1000, false).await;
    let usage = c.usage("", Some(TOKEN)).await;
    assert_eq!(
        (&usage["plan"], &usage["daily_limit"]),
        (&json!("free"), &json!(5))
    );
    // The user whose plan could not be read is simply free here.
    assert_eq!(c.usage("", Some(UNREADABLE)).await["plan"], "free");
    let (status, _, _) = c
        .send(
            "POST",
            "/chat",
            Some(TOKEN),
            Some(json!({"message": "one two three"})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, retry_after, _) = c
        .send(
            "POST",
            "/chat",
            Some(TOKEN),
            Some(json!({"message": "again"})),
        )
        .await;
    assert_eq!(status, 429);
    assert!(retry_after.is_some());
    // An account's id as user_id without its token is refused, as for conversations.
    let (status, _, _) = c.send("GET", "/usage?user_id=7", None, None).await;
    assert_eq!(status, 401);
}

async fn concurrent_replies_are_all_counted(db: TestDb) {
    let c = start_budgets(&db, 1_000_000, 1_000_000, true).await;
    let replies = (0..12).map(|i| {
        let c = &c;
        async move {
            c.send(
                "POST",
                "/chat",
                Some(TOKEN),
                Some(json!({"message": format!("one two {i}")})),
            )
            .await
            .0
        }
    });
    let statuses = futures_util::future::join_all(replies).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    // Each reply: 3 words sent, 3 echoed.
    assert_eq!(c.usage("", Some(TOKEN)).await["tokens_used"], 12 * 6);
}

async fn a_stream_that_breaks_off_counts_what_was_streamed(db: TestDb) {
    let c = start_budgets(&db, 1000, 1000, true).await;
    c.sim.push_fault(
        Provider::Openai,
        Fault::action(provider_sim::FaultAction::Disconnect),
    );
    let message = "word ".repeat(10);
    let (status, events) = c.stream(json!({"message": message})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&events).last(), Some(&"error"), "{events:?}");
    let streamed: String = events
        .iter()
        .filter(|(name, _)| name == "chunk")
        .map(|(_, data)| data["content"].as_str().unwrap())
        .collect();
    // Nothing was reported before the break: the prompt (the message as sent) and the part
    // streamed are estimated.
    let expected = message.chars().count().div_ceil(4) + streamed.chars().count().div_ceil(4);
    assert_eq!(c.usage("", None).await["tokens_used"], expected);
}
