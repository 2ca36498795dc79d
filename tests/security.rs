//! Secrets never reach the logs: a full run of `keel serve` at debug level, JSON logs, every
//! module against the provider simulator, with the logs searched for every configured secret,
//! password and issued token. See docs/testing.md ("Fault and multi-process tests").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use base64::Engine;
use keel::testing::{login, register};
use keel_tests::keel_bin;
use keel_tests::support::{Keel, client, eventually, free_port, read_events};
use provider_sim::{CallbackOptions, DeliveryOptions, EventSpec, Fault, Outcome, Provider};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A value no log line could hold by chance.
fn unique(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// Register, log in (right and wrong password), use tokens (good and tampered), refresh, ask for a
/// password reset (the account mails carry tokens), make an admin
/// from the command line, change a user, send email, SMS and a call (with signed and wrongly
/// signed status callbacks), check out and pay (with signed and wrongly signed Stripe webhooks),
/// refund, chat with the AI (plain, streamed, and refused by the provider), enqueue a task; then
/// neither the server's log nor the command line's output holds `SECRET_KEY`, a provider key or
/// token, a webhook secret, a password, an issued access token (whole or its signature), a
/// refresh token or a mailed token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_logs() {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let random_bytes = || uuid::Uuid::new_v4().into_bytes();
    let resend_secret_key =
        base64::engine::general_purpose::STANDARD.encode([random_bytes(), random_bytes()].concat());
    let sim = provider_sim::ProviderSim::start(provider_sim::SimConfig {
        webhook_url: Some(format!("{base}/api/v1/payment/webhook")),
        resend_webhook_url: Some(format!("{base}/api/v1/comms/webhooks/resend")),
        stripe_secret_key: unique("sk_test_"),
        stripe_webhook_secret: unique("whsec_"),
        resend_api_key: unique("re_"),
        resend_webhook_secret: format!("whsec_{resend_secret_key}"),
        twilio_auth_token: uuid::Uuid::new_v4().simple().to_string(),
        ai_api_key: Some(unique("sk-ai-")),
        ..Default::default()
    })
    .unwrap();
    let config = sim.config().clone();
    let secret_key = unique("signing-key-") + &unique("-");
    let user_password = unique("pw-user-");
    let admin_password = unique("pw-admin-");
    let wrong_password = unique("pw-wrong-");

    let data = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", data.path().join("keel.db").display());
    let mut keel = Keel::serve(keel_bin!())
        .envs(sim.settings())
        .env("DATABASE_URL", &database_url)
        .env("PORT", port)
        .env("PUBLIC_BASE_URL", &base)
        .env("SECRET_KEY", &secret_key)
        .env("RUST_LOG", "debug")
        .env("LOG_FORMAT", "json")
        .env("AI_PROVIDER", "openai")
        .env("AI_CONVERSATION_STORE", "database")
        .spawn()
        .ready()
        .await;
    let http = client(Duration::from_secs(30));

    // An address of its own: the mail limits count per address in the deployment's Redis, which
    // outlives the test.
    let email = format!("user-{}@example.com", uuid::Uuid::new_v4().simple());
    let email = email.as_str();

    // Auth: register, a wrong password, a login, tokens good and tampered.
    assert_eq!(
        register(&http, &base, email, &user_password).await,
        StatusCode::CREATED
    );
    assert_eq!(
        register(&http, &base, email, &user_password).await,
        StatusCode::BAD_REQUEST,
        "the same email twice"
    );
    let r = http
        .post(format!("{base}/api/v1/auth/token"))
        .form(&[("username", email), ("password", &wrong_password)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let token = login(&http, &base, email, &user_password).await;
    let me = http
        .get(format!("{base}/api/v1/auth/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), StatusCode::OK);
    let user: Value = me.json().await.unwrap();
    let tampered = format!("{token}x");
    let r = http
        .get(format!("{base}/api/v1/auth/me"))
        .bearer_auth(&tampered)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // A refresh token rotated once, and the account mails, whose links carry tokens: the
    // verification mail of the registration and a reset mail (left unused).
    let pair: Value = http
        .post(format!("{base}/api/v1/auth/token"))
        .form(&[("username", email), ("password", &user_password)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let first_refresh = pair["refresh_token"].as_str().unwrap().to_owned();
    let r = http
        .post(format!("{base}/auth/refresh"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &first_refresh),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let second_refresh = r.json::<Value>().await.unwrap()["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = http
        .post(format!("{base}/auth/password/forgot"))
        .json(&json!({"email": email}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let mail_token = |kind: &'static str| {
        let sim = &sim;
        async move {
            let email =
                sim.outbox().emails.into_iter().find(|e| {
                    e.to == [email] && e.tags[0] == json!({"name": "kind", "value": kind})
                })?;
            let text = email.text?;
            let at = text.find("token=")? + "token=".len();
            Some(text[at..at + 64].to_owned())
        }
    };
    let verify_token = eventually("the verification mail", Duration::from_secs(10), || {
        mail_token("verify_email")
    })
    .await;
    let reset_token = eventually("the reset mail", Duration::from_secs(10), || {
        mail_token("password_reset")
    })
    .await;

    // An admin made on the command line (password from the environment), who changes the user.
    let (ok, cli_output) = Keel::new(
        keel_bin!(),
        &[
            "users",
            "create",
            "--email",
            "admin@example.com",
            "--role",
            "admin",
        ],
    )
    .envs(sim.settings())
    .env("DATABASE_URL", &database_url)
    .env("SECRET_KEY", &secret_key)
    .env("KEEL_USER_PASSWORD", &admin_password)
    .env("RUST_LOG", "debug")
    .run()
    .await;
    assert!(ok, "{cli_output}");
    let admin = login(&http, &base, "admin@example.com", &admin_password).await;
    let r = http
        .patch(format!("{base}/api/v1/auth/users/{}", user["id"]))
        .bearer_auth(&admin)
        .json(&json!({"role": "moderator"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // Communications: each channel, with the providers' signed callbacks and refused ones.
    let send = |path: &str, body: Value| {
        http.post(format!("{base}/api/v1/comms{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let email: Value = send(
        "/email/send",
        json!({"to": "a@example.com", "subject": "Hi", "text": "Hello"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let sms: Value = send("/sms/send", json!({"to": "+15005550010", "body": "Hello"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let call = send(
        "/call/make",
        json!({"to": "+15005550010", "twiml_url": "https://example.com/twiml"}),
    )
    .await
    .unwrap();
    assert_eq!(call.status(), StatusCode::OK);
    let wrong = CallbackOptions {
        wrong_secret: true,
        ..Default::default()
    };
    let refused = sim
        .twilio_status_callback_with(sms["sid"].as_str().unwrap(), "delivered", &wrong)
        .await
        .unwrap();
    assert!(refused.iter().all(|d| !d.accepted()), "{refused:?}");
    let refused = sim
        .resend_event(email["id"].as_str().unwrap(), "email.delivered", &wrong)
        .await
        .unwrap();
    assert!(refused.iter().all(|d| !d.accepted()), "{refused:?}");
    eventually(
        "signed Resend and Twilio callbacks are accepted",
        Duration::from_secs(20),
        || async {
            let deliveries = sim.deliveries();
            let accepted = |p: Provider| deliveries.iter().any(|d| d.provider == p && d.accepted());
            (accepted(Provider::Resend) && accepted(Provider::Twilio)).then_some(())
        },
    )
    .await;

    // Payment: checkout, pay (signed webhooks), a wrongly signed webhook, a refund.
    let r = http
        .post(format!("{base}/api/v1/payment/checkout"))
        .bearer_auth(&token)
        .json(&json!({"price_id": "price_one_time", "mode": "payment"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let session: Value = r.json().await.unwrap();
    let paid = sim
        .complete_checkout(session["session_id"].as_str().unwrap(), Outcome::Pay)
        .await
        .unwrap();
    assert!(
        !paid.is_empty() && paid.iter().all(|d| d.accepted()),
        "{paid:?}"
    );
    let refused = sim
        .deliver_stripe_events(
            &[EventSpec::new("payment_intent.succeeded")],
            &DeliveryOptions {
                wrong_secret: true,
                ..Default::default()
            },
        )
        .await;
    assert!(refused.iter().all(|d| d.status == Some(400)), "{refused:?}");
    let transactions: Value = http
        .get(format!("{base}/api/v1/payment/transactions"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paid_id = transactions["transactions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|t| t["status"] == "succeeded"))
        .map(|t| t["id"].clone())
        .unwrap_or_else(|| panic!("a paid transaction: {transactions}"));
    let r = http
        .post(format!("{base}/api/v1/payment/refund/{paid_id}"))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "{}",
        r.text().await.unwrap_or_default()
    );

    // AI: a reply, a stream, and a key the provider refuses.
    let r = http
        .post(format!("{base}/ai/chat"))
        .bearer_auth(&token)
        .json(&json!({"message": "Hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let stream = http
        .post(format!("{base}/ai/chat/stream"))
        .bearer_auth(&token)
        .json(&json!({"message": "Hello again"}))
        .send()
        .await
        .unwrap();
    let events = read_events(stream).await;
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("complete"));
    sim.push_fault(Provider::Openai, Fault::status(401));
    let r = http
        .post(format!("{base}/ai/chat"))
        .bearer_auth(&token)
        .json(&json!({"message": "Refused"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);

    // A background task.
    let r = http
        .post(format!("{base}/api/v1/tasks/enqueue"))
        .bearer_auth(&admin)
        .json(&json!({"task_name": "io_simulation_task"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    keel.sigterm();
    let exit = keel.wait_exit(Duration::from_secs(30)).await;
    assert!(exit.is_some_and(|s| s.success()), "{exit:?}");
    let logs = format!("{}\n{cli_output}", keel.logs());

    // The run was logged at debug level, every module's routes included, and the secrets were
    // really used (the providers received them).
    assert!(
        logs.contains("\"level\":\"DEBUG\""),
        "debug lines are logged"
    );
    for route in [
        "/api/v1/auth/token",
        "/api/v1/comms/webhooks/resend",
        "/api/v1/comms/webhooks/twilio/status",
        "/api/v1/payment/webhook",
        "/api/v1/payment/refund/",
        "/ai/chat/stream",
        "/api/v1/tasks/enqueue",
    ] {
        assert!(logs.contains(route), "{route} is in the log");
    }
    let twilio_basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        config.twilio_account_sid, config.twilio_auth_token
    ));
    let sent = |provider: Provider, needle: &str| {
        sim.journal_for(provider)
            .iter()
            .any(|e| e.headers.iter().any(|(_, v)| v.contains(needle)))
    };
    let ai_key = config.ai_api_key.clone().unwrap();
    assert!(sent(Provider::Stripe, &config.stripe_secret_key));
    assert!(sent(Provider::Resend, &config.resend_api_key));
    assert!(sent(Provider::Twilio, &twilio_basic));
    assert!(sent(Provider::Openai, &ai_key));

    let signature = |jwt: &str| jwt.rsplit('.').next().unwrap().to_owned();
    let secrets = [
        ("SECRET_KEY", secret_key.clone()),
        ("STRIPE_SECRET_KEY", config.stripe_secret_key.clone()),
        (
            "STRIPE_WEBHOOK_SECRET",
            config.stripe_webhook_secret.clone(),
        ),
        ("RESEND_API_KEY", config.resend_api_key.clone()),
        ("RESEND_WEBHOOK_SECRET", resend_secret_key.clone()),
        ("TWILIO_AUTH_TOKEN", config.twilio_auth_token.clone()),
        ("Twilio Basic credentials", twilio_basic),
        ("OPENAI_API_KEY", ai_key),
        ("the user's password", user_password.clone()),
        ("the admin's password", admin_password.clone()),
        ("a wrong password", wrong_password.clone()),
        ("the user's access token", token.clone()),
        ("the user's token signature", signature(&token)),
        ("the admin's access token", admin.clone()),
        ("the admin's token signature", signature(&admin)),
        ("a used refresh token", first_refresh),
        ("a live refresh token", second_refresh),
        ("a verification token", verify_token),
        ("a password-reset token", reset_token),
    ];
    for (what, secret) in &secrets {
        let leaks: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains(secret.as_str()))
            .collect();
        assert!(leaks.is_empty(), "{what} is in the log: {leaks:#?}");
    }
}
