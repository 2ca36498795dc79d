//! Whole flows across modules, over HTTP against the composed `keel` server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel::testing::{PASSWORD, TestConfig, login, register, run_command, sign_up, sign_up_user};
use kernel::testing::TestDb;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Promotes a user with `keel users set-role`, run in this process on the same database.
async fn make_admin(db: &TestDb, email: &str) {
    let config = TestConfig::new(db).build();
    run_command(&config, &["users", "set-role", email, "admin"])
        .await
        .expect("users set-role");
}

kernel::backend_tests! {
    an_admin_deactivates_a_user_who_then_cannot_log_in,
    a_signed_in_author_publishes_a_post_the_public_reads,
    a_signed_in_user_runs_a_background_task,
    a_scheduled_post_is_published_by_the_task_worker,
    a_paid_plan_sets_the_ai_budget_until_the_subscription_ends,
}

async fn an_admin_deactivates_a_user_who_then_cannot_log_in(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let (client, base) = (&s.client, s.base_url.as_str());
    assert_eq!(
        register(client, base, "admin@example.com", PASSWORD).await,
        StatusCode::CREATED
    );
    let (user, _) = sign_up_user(client, base, "user@example.com", Some("Flow")).await;

    make_admin(&db, "admin@example.com").await;

    let admin_token = login(client, base, "admin@example.com", PASSWORD).await;
    let me: Value = s
        .client
        .get(s.url("/auth/me"))
        .bearer_auth(&admin_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["role"], "admin");

    let r = s
        .client
        .patch(s.url(&format!("/auth/users/{}", user["id"])))
        .bearer_auth(&admin_token)
        .json(&json!({"is_active": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = s
        .client
        .post(s.url("/auth/token"))
        .form(&[("username", "user@example.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "Inactive user");
}

async fn a_signed_in_author_publishes_a_post_the_public_reads(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let client = &s.client;
    let post =
        json!({"title": "Hello, Café", "content": "# Hi\n\nFirst post.", "excerpt": "greeting"});
    // Writing needs a signed-in user (BLOG_PROTECTION defaults to basic when auth is mounted).
    let r = client
        .post(s.url("/api/v1/blog/posts"))
        .json(&post)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        r.json::<Value>().await.unwrap()["detail"],
        "Not authenticated"
    );

    let (writer, token) = sign_up_user(
        &s.client,
        &s.base_url,
        "writer@example.com",
        Some("Wendy Writer"),
    )
    .await;
    let token = token.as_str();

    let r = client
        .post(s.url("/api/v1/blog/posts"))
        .bearer_auth(token)
        .json(&post)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let created: Value = r.json().await.unwrap();
    assert_eq!(created["slug"], "hello-cafe");
    assert_eq!(created["status"], "draft");
    assert_eq!(created["author_id"], writer["id"]);
    assert_eq!(created["author_name"], "Wendy Writer");

    // A draft is not public.
    let r = client
        .get(s.url("/api/v1/blog/posts/hello-cafe"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = client
        .post(s.url(&format!("/api/v1/blog/posts/{}/publish", created["id"])))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let list: Value = client
        .get(s.url("/api/v1/blog/posts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["total"], 1);
    assert_eq!(list["posts"][0]["title"], "Hello, Café");
    let one = client
        .get(s.url("/api/v1/blog/posts/hello-cafe"))
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), StatusCode::OK);
}

async fn a_signed_in_user_runs_a_background_task(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let client = &s.client;
    let body = json!({"task_name": "io_simulation_task", "queue_type": "load_test"});
    let r = client
        .post(s.url("/api/v1/tasks/enqueue"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "task endpoints need a user when auth is mounted"
    );
    let token = sign_up(&s.client, &s.base_url, "ops@example.com").await;
    let token = token.as_str();
    let r = client
        .post(s.url("/api/v1/tasks/enqueue"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let queued: Value = r.json().await.unwrap();
    assert_eq!(queued["status"], "queued");
    let id = queued["task_id"].as_str().unwrap();
    // The embedded worker runs it; poll until it is finished (bounded).
    let mut finished = None;
    for _ in 0..300 {
        let r = client
            .get(s.url(&format!("/api/v1/tasks/result/{id}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::OK {
            finished = Some(r.json::<Value>().await.unwrap());
            break;
        }
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let finished = finished.expect("the task finished");
    assert_eq!(finished["status"], "completed", "{finished}");
    assert_eq!(finished["task_name"], "io_simulation_task");
}

/// Scheduled publishing through the real tasks module: the blog enqueues a delayed task on the
/// server's queue, the embedded worker runs it at the post's time, and the post becomes public.
/// Without the tasks module, the same request is a 409 naming it.
async fn a_scheduled_post_is_published_by_the_task_worker(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let client = &s.client;
    let token = sign_up(&s.client, &s.base_url, "author@example.com").await;
    let r = client
        .post(s.url("/api/v1/blog/posts"))
        .bearer_auth(&token)
        .json(&json!({"title": "Scheduled"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].clone();
    let at = (chrono::Utc::now() + chrono::Duration::milliseconds(1500))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let r = client
        .post(s.url(&format!("/api/v1/blog/posts/{id}/publish")))
        .bearer_auth(&token)
        .json(&json!({"at": at}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let scheduled: Value = r.json().await.unwrap();
    assert_eq!(
        (
            scheduled["status"].as_str(),
            scheduled["scheduled_at"].as_str()
        ),
        (Some("draft"), Some(at.as_str()))
    );
    let public = s.url("/api/v1/blog/posts/scheduled");
    assert_eq!(
        client.get(&public).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    let mut published = None;
    for _ in 0..300 {
        let r = client.get(&public).send().await.unwrap();
        if r.status() == StatusCode::OK {
            published = Some(r.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let published = published.expect("the scheduled post was published within 30 s");
    assert_eq!(published["status"], "published");
    assert_eq!(published["published_at"], at.as_str());
    assert_eq!(published["scheduled_at"], Value::Null);

    let other = match db.backend {
        kernel::db::Backend::Sqlite => TestDb::sqlite().await,
        kernel::db::Backend::Postgres => TestDb::postgres().await.unwrap(),
    };
    let s = TestConfig::new(&other)
        .modules(&["auth", "blog"])
        .spawn()
        .await;
    let token = sign_up(&s.client, &s.base_url, "author@example.com").await;
    let r = s
        .client
        .post(s.url("/api/v1/blog/posts"))
        .bearer_auth(&token)
        .json(&json!({"title": "Not without tasks"}))
        .send()
        .await
        .unwrap();
    let id = r.json::<Value>().await.unwrap()["id"].clone();
    let r = s
        .client
        .post(s.url(&format!("/api/v1/blog/posts/{id}/publish")))
        .bearer_auth(&token)
        .json(&json!({"at": (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let detail = r.json::<Value>().await.unwrap()["detail"].clone();
    assert!(
        detail.as_str().unwrap().contains("tasks module"),
        "{detail}"
    );
}

/// The whole plan flow against the provider simulator: a subscription paid on the simulator's
/// checkout page makes the user `pro` in `/auth/me` and gives them pro's AI budget, counted in
/// `/ai/usage`; once Stripe deletes the subscription they are back on the free plan, whose budget
/// they have already spent (429 with `Retry-After`).
async fn a_paid_plan_sets_the_ai_budget_until_the_subscription_ends(db: TestDb) {
    let port = keel_tests::support::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let sim = provider_sim::ProviderSim::start(provider_sim::SimConfig {
        webhook_url: Some(format!("{base}/api/v1/payment/webhook")),
        ..Default::default()
    })
    .unwrap();
    let s = TestConfig::new(&db)
        .with(|config| config.port = port)
        .setting(|payment: &mut payment_core::PaymentConfig| {
            payment.secret_key = Some(sim.config().stripe_secret_key.clone());
            payment.webhook_secret = Some(sim.config().stripe_webhook_secret.clone());
            payment.api_base = sim.base_url().to_owned();
            payment.public_base_url = base.clone();
            payment.plans = payment_core::config::parse_plans("price_monthly=pro").unwrap();
        })
        .setting(|ai: &mut ai_core::AiConfig| {
            ai.provider = ai_core::config::provider("openai").unwrap();
            ai.api_keys.insert("openai", "sk-test".into());
            ai.base_urls
                .insert("openai", format!("{}/openai/v1", sim.base_url()));
            ai.daily_tokens.insert("FREE".into(), 6);
            ai.daily_tokens.insert("PRO".into(), 1000);
        })
        .spawn()
        .await;
    let token = sign_up(&s.client, &s.base_url, "payer@example.com").await;
    let get = |path: &str| s.client.get(s.url(path)).bearer_auth(&token).send();
    let json = |r: reqwest::Response| async move { r.json::<Value>().await.unwrap() };
    let chat = |message: &str| {
        s.client
            .post(s.url("/ai/chat"))
            .bearer_auth(&token)
            .json(&json!({"message": message}))
            .send()
    };
    assert_eq!(json(get("/auth/me").await.unwrap()).await["plan"], "free");
    let usage = json(get("/ai/usage").await.unwrap()).await;
    assert_eq!(
        (&usage["plan"], &usage["daily_limit"], &usage["tokens_used"]),
        (&json!("free"), &json!(6), &json!(0))
    );

    // Subscribe and pay on the simulator's page: its signed events reach the webhook.
    let r = s
        .client
        .post(s.url("/api/v1/payment/checkout"))
        .bearer_auth(&token)
        .json(&json!({"price_id": "price_monthly", "mode": "subscription"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let session = json(r).await["session_id"].as_str().unwrap().to_owned();
    let deliveries = sim
        .complete_checkout(&session, provider_sim::Outcome::Pay)
        .await
        .unwrap();
    assert!(
        deliveries.iter().all(|d| d.status == Some(200)),
        "{deliveries:?}"
    );
    assert_eq!(
        json(get("/api/v1/auth/me").await.unwrap()).await["plan"],
        "pro"
    );

    // Pro's budget: two replies of 8 tokens each (the simulator counts a word a token, the
    // prompt's 4 and the echo's 4), more than the free plan's 6.
    for _ in 0..2 {
        assert_eq!(
            chat("one two three four").await.unwrap().status(),
            StatusCode::OK
        );
    }
    let usage = json(get("/api/v1/ai/usage").await.unwrap()).await;
    assert_eq!(
        (
            &usage["plan"],
            &usage["daily_limit"],
            &usage["tokens_used"],
            &usage["remaining"]
        ),
        (&json!("pro"), &json!(1000), &json!(16), &json!(984))
    );

    // The subscription ends: Stripe deletes it and says so.
    let subs = json(get("/api/v1/payment/subscriptions").await.unwrap()).await;
    let subscription = subs["subscriptions"][0]["provider_subscription_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deliveries = sim
        .deliver_stripe_events(
            &[
                provider_sim::EventSpec::new("customer.subscription.deleted")
                    .object(json!({"id": subscription})),
            ],
            &provider_sim::DeliveryOptions::default(),
        )
        .await;
    assert_eq!(deliveries[0].status, Some(200), "{deliveries:?}");
    assert_eq!(json(get("/auth/me").await.unwrap()).await["plan"], "free");
    let usage = json(get("/ai/usage").await.unwrap()).await;
    assert_eq!(
        (
            &usage["plan"],
            &usage["daily_limit"],
            &usage["tokens_used"],
            &usage["remaining"]
        ),
        (&json!("free"), &json!(6), &json!(16), &json!(0))
    );
    let r = chat("one more").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
    let detail = json(r).await["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.starts_with(
            "AI quota exceeded: the free plan allows 6 tokens a day and 16 were used today"
        ),
        "{detail}"
    );
}
