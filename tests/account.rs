//! The account lifecycle across modules: auth's verification and reset mails go out through the
//! mailer comms lends it (Resend, here the provider simulator) and land in comms' message log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keel::{Application, Config};
use kernel::module::{BuildModule, Deps};
use kernel::testing::{TestDb, TestServer};
use provider_sim::{ProviderSim, SimConfig, SimHandle};
use reqwest::StatusCode;
use serde_json::{Value, json};

const SECRET: &str = "account-test-secret-account-test!!";

async fn spawn(db: &TestDb, sim: &SimHandle) -> TestServer {
    let mut config = Config {
        port: 0,
        database_url: db.url.clone(),
        http_workers: 2,
        read_cache: db.read_cache,
        ..Config::default()
    };
    config
        .settings
        .set(auth_core::AuthConfig::with_secret(SECRET));
    config.settings.get_mut::<tasks_core::TasksConfig>().backend =
        tasks_core::BackendChoice::Memory;
    let comms = config.settings.get_mut::<comms_core::CommsConfig>();
    comms.resend_api_key = Some(sim.config().resend_api_key.clone());
    comms.resend_from_email = Some("Keel <accounts@example.com>".to_owned());
    comms.resend_api_base = sim.base_url().to_owned();
    comms.timeout = Duration::from_secs(5);
    let app = Application::build(config).await.expect("the server starts");
    let port = app.port();
    let (server, worker) = app.into_parts();
    TestServer::start(server, port).hold(worker)
}

/// The `n`th email (from 1) of `kind` the simulator received for `to`, waited for: the mails go
/// out after the answers.
async fn mail(sim: &SimHandle, to: &str, kind: &str, n: usize) -> provider_sim::Email {
    for _ in 0..200 {
        let found: Vec<provider_sim::Email> = sim
            .outbox()
            .emails
            .into_iter()
            .filter(|e| e.to == [to] && e.tags[0] == json!({"name": "kind", "value": kind}))
            .collect();
        if found.len() >= n {
            return found[n - 1].clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no email {n} of kind {kind} to {to}");
}

/// The token of an email's link.
fn token(email: &provider_sim::Email) -> String {
    let text = email.text.as_deref().unwrap_or_default();
    let at = text.find("token=").expect("a link with a token") + "token=".len();
    text[at..at + 64].to_owned()
}

async fn post_json(s: &TestServer, path: &str, body: Value) -> (StatusCode, Value) {
    let r = s.client.post(s.url(path)).json(&body).send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn login(s: &TestServer, email: &str, password: &str) -> (StatusCode, Value) {
    let r = s
        .client
        .post(s.url("/auth/token"))
        .form(&[("username", email), ("password", password)])
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

kernel::backend_tests! {
    a_user_verifies_then_resets_a_forgotten_password_by_mail,
}

async fn a_user_verifies_then_resets_a_forgotten_password_by_mail(db: TestDb) {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let s = spawn(&db, &sim).await;
    // Addresses of their own: the mail limits count per address in the deployment's Redis,
    // which outlives the test.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let address = &format!("ada-{run}@example.com");
    let unknown_address = format!("nobody-{run}@example.com");

    // Register: the verification mail lands in the simulator's outbox.
    let (status, user) = post_json(
        &s,
        "/auth/register",
        json!({"email": address, "password": "password123", "full_name": "Ada"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(user["email_verified"], false);
    let verification = mail(&sim, address, "verify_email", 1).await;
    assert_eq!(verification.from, "Keel <accounts@example.com>");
    assert_eq!(verification.subject, "Verify your e-mail address");
    let verify_token = token(&verification);
    assert!(verification.text.as_deref().unwrap().contains(&format!(
        "http://localhost:8000/verify-email?token={verify_token}"
    )));
    let (status, verified) = post_json(&s, "/auth/verify", json!({"token": verify_token})).await;
    assert_eq!(status, StatusCode::OK, "{verified}");
    assert_eq!(verified["email_verified"], true);

    // Sign in: an access token and a refresh token.
    let (status, session) = login(&s, address, "password123").await;
    assert_eq!(status, StatusCode::OK);
    let old_access = session["access_token"].as_str().unwrap().to_owned();
    let old_refresh = session["refresh_token"].as_str().unwrap().to_owned();

    // Forgot, then reset with the mailed token.
    let (status, _) = post_json(
        &s,
        "/api/v1/auth/password/forgot",
        json!({"email": address}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let reset_mail = mail(&sim, address, "password_reset", 1).await;
    assert_eq!(reset_mail.subject, "Reset your password");
    let reset_token = token(&reset_mail);
    let (status, body) = post_json(
        &s,
        "/auth/password/reset",
        json!({"token": reset_token, "password": "a-new-password-42"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The old refresh token and the old access token are refused; the old password too.
    let r = s
        .client
        .post(s.url("/auth/refresh"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &old_refresh),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "invalid_grant");
    let r = s
        .client
        .get(s.url("/auth/me"))
        .bearer_auth(&old_access)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        r.json::<Value>().await.unwrap()["detail"],
        "Could not validate credentials"
    );
    // The old token is refused by the other modules too (they use auth's authenticator).
    let r = s
        .client
        .post(s.url("/api/v1/tasks/enqueue"))
        .bearer_auth(&old_access)
        .json(&json!({"task_name": "io_simulation_task"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        login(&s, address, "password123").await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, fresh) = login(&s, address, "a-new-password-42").await;
    assert_eq!(status, StatusCode::OK);
    let fresh_access = fresh["access_token"].as_str().unwrap();
    let me: Value = s
        .client
        .get(s.url("/auth/me"))
        .bearer_auth(fresh_access)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["email"], address.as_str());

    // The reset token works once; an unknown address gets the same answer and no mail.
    let (status, _) = post_json(
        &s,
        "/auth/password/reset",
        json!({"token": reset_token, "password": "yet-another-pass-1"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let emails_before = sim.outbox().emails.len();
    let (status, unknown) = post_json(
        &s,
        "/auth/password/forgot",
        json!({"email": unknown_address}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(
        unknown["message"],
        "If an account with this address exists, a password reset link has been sent"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sim.outbox().emails.len(), emails_before);

    // Both mails are in comms' message log (an administrator reads it), without their links.
    // The role is changed behind the server's back: its user cache holds the old one for up to a
    // second (READ_CACHE).
    make_admin(&db, address).await;
    let (_, admin) = login(&s, address, "a-new-password-42").await;
    let mut log = Value::Null;
    for _ in 0..100 {
        log = s
            .client
            .get(s.url("/api/v1/comms/messages?channel=email"))
            .bearer_auth(admin["access_token"].as_str().unwrap())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if log["total"] != 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(log["total"], 2, "{log}");
    let subjects: Vec<&str> = log["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert!(m["preview"].is_null(), "{m}");
            m["subject"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        subjects,
        ["Reset your password", "Verify your e-mail address"]
    );
}

/// Promotes a user the way `keel users set-role` does: the auth service on the same database.
async fn make_admin(db: &TestDb, email: &str) {
    let pool = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let deps = Deps::new(pool).unwrap();
    let module = auth_core::AuthModule::build(auth_core::AuthConfig::with_secret(SECRET), &deps)
        .await
        .unwrap();
    let user = module
        .service()
        .find_by_email(email)
        .await
        .unwrap()
        .unwrap();
    let patch = auth_core::UserPatch {
        role: Some(kernel::Role::Admin),
        ..Default::default()
    };
    module
        .service()
        .update_user(None, user.id, patch)
        .await
        .unwrap();
}
