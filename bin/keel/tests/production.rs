//! What a production deployment depends on: `APP_ENV=production` refuses to start with unsafe
//! settings (naming every one at once), the CORS defaults, and the body limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use keel::testing::TestConfig;
use kernel::testing::{TestDb, TestServer};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// A key of 40 bytes that appears nowhere else.
const OWN_KEY: &str = "a-production-key-of-forty-bytes-7f3c9e1d";

/// `keel migrate` in `dir` on SQLite, with nothing from the test's own environment but `vars`.
/// Returns (success, stdout, stderr).
fn migrate(dir: &Path, vars: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    cmd.arg("migrate")
        .current_dir(dir)
        .env_clear()
        .env("DATABASE_URL", "sqlite://keel.db");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run keel");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every unsafe setting alone is refused by name, before the database is touched.
#[test]
fn each_unsafe_setting_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let production = ("APP_ENV", "production");
    let key = ("SECRET_KEY", OWN_KEY);
    for (vars, setting) in [
        (vec![production], "SECRET_KEY"),
        (vec![production, ("SECRET_KEY", "short")], "SECRET_KEY"),
        (
            vec![production, ("SECRET_KEY", &"k".repeat(31))],
            "SECRET_KEY",
        ),
        (
            vec![
                production,
                ("SECRET_KEY", "bench-secret-bench-secret-bench-secret"),
            ],
            "SECRET_KEY",
        ),
        (vec![production, key, ("BCRYPT_COST", "9")], "BCRYPT_COST"),
        (
            vec![
                production,
                key,
                ("STRIPE_WEBHOOK_SECRET", "whsec_provider_sim"),
            ],
            "STRIPE_WEBHOOK_SECRET",
        ),
        (
            vec![
                production,
                key,
                (
                    "RESEND_WEBHOOK_SECRET",
                    "whsec_cHJvdmlkZXItc2ltLXJlc2VuZC1ob29r",
                ),
            ],
            "RESEND_WEBHOOK_SECRET",
        ),
        (
            vec![
                production,
                key,
                ("TWILIO_AUTH_TOKEN", "0123456789abcdef0123456789abcdef"),
            ],
            "TWILIO_AUTH_TOKEN",
        ),
        (
            vec![
                production,
                key,
                ("KEEL_MODULES", "blog"),
                ("BLOG_PROTECTION", "role"),
            ],
            "BLOG_PROTECTION",
        ),
        // Any spelling of production.
        (vec![("APP_ENV", "Production")], "SECRET_KEY"),
    ] {
        let (ok, stdout, stderr) = migrate(dir, &vars);
        assert!(!ok, "{vars:?} should be refused: {stdout}");
        assert!(
            stderr.contains(&format!("  {setting}: ")) && stderr.contains("APP_ENV"),
            "{vars:?}: {stderr}"
        );
        assert!(stderr.contains("1 unsafe setting:"), "{vars:?}: {stderr}");
    }
    assert!(
        !dir.join("keel.db").exists(),
        "a refused start must not touch the database"
    );
}

/// One run names every problem, each with what to set.
#[test]
fn every_problem_is_named_in_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = migrate(
        tmp.path(),
        &[
            ("APP_ENV", "production"),
            ("SECRET_KEY", "short"),
            ("BCRYPT_COST", "4"),
            ("STRIPE_WEBHOOK_SECRET", "whsec_provider_sim"),
            (
                "RESEND_WEBHOOK_SECRET",
                "whsec_cHJvdmlkZXItc2ltLXJlc2VuZC1ob29r",
            ),
            ("TWILIO_AUTH_TOKEN", "0123456789abcdef0123456789abcdef"),
            ("KEEL_MODULES", "blog,comms,payment"),
            ("BLOG_PROTECTION", "basic"),
        ],
    );
    assert!(!ok);
    assert!(stderr.contains("6 unsafe settings:"), "{stderr}");
    for (setting, advice) in [
        ("SECRET_KEY", "at least 32 bytes"),
        ("BCRYPT_COST", "set 10 or more"),
        (
            "STRIPE_WEBHOOK_SECRET",
            "set the signing secret Stripe shows",
        ),
        ("RESEND_WEBHOOK_SECRET", "set the one Resend shows"),
        ("TWILIO_AUTH_TOKEN", "set the one Twilio shows"),
        ("BLOG_PROTECTION", "mount auth"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{setting}: ")))
            .unwrap_or_else(|| panic!("{setting} is not named: {stderr}"));
        assert!(line.contains(advice), "{line}");
    }
}

/// A production configuration without those problems starts; the same unsafe values outside
/// production start too (development and tests use them).
#[test]
fn safe_production_settings_start_and_other_environments_are_not_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (ok, stdout, stderr) = migrate(
        dir,
        &[
            ("APP_ENV", "production"),
            ("SECRET_KEY", OWN_KEY),
            ("BCRYPT_COST", "10"),
            ("BLOG_PROTECTION", "role"),
            ("STRIPE_SECRET_KEY", "sk_live_only_this_account_has_it"),
            ("STRIPE_WEBHOOK_SECRET", "whsec_only_this_endpoint_has_it"),
            (
                "RESEND_WEBHOOK_SECRET",
                "whsec_b25seS10aGlzLWFjY291bnQtaGFzLWl0",
            ),
            ("TWILIO_AUTH_TOKEN", "f00dfeedf00dfeedf00dfeedf00dfeed"),
            // Not refused: see docs/security.md (no credentials are allowed cross-origin).
            ("CORS_ORIGINS", "*"),
        ],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("migrations applied"), "{stdout}");
    let unsafe_values = [
        ("SECRET_KEY", "short"),
        ("BCRYPT_COST", "4"),
        ("STRIPE_WEBHOOK_SECRET", "whsec_provider_sim"),
        ("KEEL_MODULES", "blog"),
        ("BLOG_PROTECTION", "basic"),
    ];
    for env in [None, Some("development")] {
        let mut vars = unsafe_values.to_vec();
        if let Some(env) = env {
            vars.push(("APP_ENV", env));
        }
        let (ok, _, stderr) = migrate(dir, &vars);
        assert!(ok, "APP_ENV={env:?}: {stderr}");
    }
}

/// The server on SQLite with no module mounted, `origins` as `CORS_ORIGINS`.
async fn spawn(db: &TestDb, origins: &[&str]) -> TestServer {
    TestConfig::new(db)
        .modules(&[])
        .http_workers(1)
        .with(|c| c.cors_origins = origins.iter().map(|o| (*o).to_owned()).collect())
        .spawn()
        .await
}

/// A browser's preflight for a GET with a bearer token, and the GET itself, from `origin`.
async fn from_origin(s: &TestServer, origin: &str) -> (StatusCode, HeaderMap, HeaderMap) {
    let preflight = s
        .client
        .request(reqwest::Method::OPTIONS, s.url("/health/live"))
        .header("origin", origin)
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .send()
        .await
        .unwrap();
    let status = preflight.status();
    let preflight = preflight.headers().clone();
    let get = s
        .client
        .get(s.url("/health/live"))
        .header("origin", origin)
        .send()
        .await
        .unwrap();
    (status, preflight, get.headers().clone())
}

const ALLOW_ORIGIN: &str = "access-control-allow-origin";
const ALLOW_CREDENTIALS: &str = "access-control-allow-credentials";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cors_origins_no_origin_is_allowed() {
    let db = TestDb::sqlite().await;
    let s = spawn(&db, &[]).await;
    let (_, preflight, get) = from_origin(&s, "https://app.example.com").await;
    assert!(preflight.get(ALLOW_ORIGIN).is_none(), "{preflight:?}");
    assert!(get.get(ALLOW_ORIGIN).is_none(), "{get:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_origins_are_allowed_without_credentials_and_others_are_not() {
    let db = TestDb::sqlite().await;
    let s = spawn(&db, &["https://app.example.com"]).await;
    let (status, preflight, get) = from_origin(&s, "https://app.example.com").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(preflight[ALLOW_ORIGIN], "https://app.example.com");
    assert!(
        preflight["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization"),
        "{preflight:?}"
    );
    assert_eq!(get[ALLOW_ORIGIN], "https://app.example.com");
    assert!(preflight.get(ALLOW_CREDENTIALS).is_none(), "{preflight:?}");
    assert!(get.get(ALLOW_CREDENTIALS).is_none(), "{get:?}");
    let (status, preflight, get) = from_origin(&s, "https://evil.example").await;
    assert!(!status.is_success(), "{status}");
    assert!(preflight.get(ALLOW_ORIGIN).is_none(), "{preflight:?}");
    assert!(get.get(ALLOW_ORIGIN).is_none(), "{get:?}");
}

/// `*` lets any page call the API, but never with the browser's credentials (cookies, HTTP
/// authentication): a page can only send a bearer token it already holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_allows_any_origin_without_credentials() {
    let db = TestDb::sqlite().await;
    let s = spawn(&db, &["*"]).await;
    let (status, preflight, get) = from_origin(&s, "https://anywhere.example").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(preflight[ALLOW_ORIGIN], "https://anywhere.example");
    assert_eq!(get[ALLOW_ORIGIN], "https://anywhere.example");
    assert!(preflight.get(ALLOW_CREDENTIALS).is_none(), "{preflight:?}");
    assert!(get.get(ALLOW_CREDENTIALS).is_none(), "{get:?}");
}

/// JSON and form bodies stop at `MAX_JSON_BYTES` with a 413 naming it; the raw bodies of the
/// signed webhooks stop at actix-web's 256 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_their_limit_are_413() {
    let db = TestDb::sqlite().await;
    let s = TestConfig::new(&db)
        .modules(&["auth", "payment"])
        .http_workers(1)
        .with(|c| c.max_json_bytes = 2048)
        .secret_key(OWN_KEY)
        .setting(|p: &mut payment_core::PaymentConfig| {
            p.webhook_secret = Some("whsec_only_this_endpoint_has_it".to_owned());
        })
        .spawn()
        .await;
    let detail = |r: reqwest::Response| async move {
        let status = r.status();
        (
            status,
            r.json::<serde_json::Value>().await.unwrap()["detail"].clone(),
        )
    };
    let too_large = (
        StatusCode::PAYLOAD_TOO_LARGE,
        serde_json::json!("Request body too large: the limit is 2048 bytes"),
    );
    let json = format!(r#"{{"email": "{}"}}"#, "a".repeat(2048));
    let r = s
        .client
        .post(s.url("/auth/register"))
        .header("content-type", "application/json")
        .body(json)
        .send()
        .await
        .unwrap();
    assert_eq!(detail(r).await, too_large);
    let form = format!("username={}&password=x", "a".repeat(2048));
    let r = s
        .client
        .post(s.url("/auth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(detail(r).await, too_large);
    // Under the limit, the body is read and judged on its content.
    let r = s
        .client
        .post(s.url("/auth/register"))
        .json(&serde_json::json!({"email": "a@example.com", "password": "password123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let webhook = |size: usize| {
        s.client
            .post(s.url("/api/v1/payment/webhook"))
            .header("stripe-signature", "t=1,v1=00")
            .body(vec![b' '; size])
            .send()
    };
    assert_eq!(
        detail(webhook(256 * 1024).await.unwrap()).await,
        (
            StatusCode::BAD_REQUEST,
            serde_json::json!("Invalid payload")
        )
    );
    assert_eq!(
        detail(webhook(256 * 1024 + 1).await.unwrap()).await,
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            serde_json::json!("Payload Too Large")
        )
    );
}
