//! The auth module over real HTTP, on SQLite and (with TEST_DATABASE_URL) PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use auth_core::{AuthConfig, AuthModule, UserPatch};
use kernel::mail::Mailer;
use kernel::module::{BuildModule, Deps};
use kernel::testing::{TestDb, TestServer, spawn_modules};
use kernel::{DbPool, Role};
use reqwest::StatusCode;
use serde_json::{Value, json};

mod cancellation;
mod lifecycle;
mod oauth;
mod reset;
mod sessions;

const SECRET: &str = "test-secret-test-secret-test-secret!";

struct Ctx {
    server: TestServer,
    module: Arc<AuthModule>,
    pool: DbPool,
    db: TestDb,
}

async fn start(db: TestDb, config: AuthConfig) -> Ctx {
    start_with(db, config, None).await
}

/// The module alone, lent `mailer` as the composer would lend comms' (late: the registry is
/// sealed once the module is built).
async fn start_with(db: TestDb, config: AuthConfig, mailer: Option<Arc<dyn Mailer>>) -> Ctx {
    let pool = db.migrated_pool(&[auth_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool.clone()).expect("dependencies");
    deps.read_cache = db.read_cache;
    if let Some(mailer) = mailer {
        deps = deps.with::<dyn Mailer>(mailer);
    }
    let module = Arc::new(
        AuthModule::build(config, &deps)
            .await
            .expect("auth module builds"),
    );
    deps.capabilities.seal();
    let server = spawn_modules(vec![module.clone()]);
    Ctx {
        server,
        module,
        pool,
        db,
    }
}

async fn ctx(db: TestDb) -> Ctx {
    start(db, AuthConfig::with_secret(SECRET)).await
}

impl Ctx {
    async fn register(&self, body: Value) -> reqwest::Response {
        self.server
            .client
            .post(self.server.url("/auth/register"))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn login(&self, email: &str, password: &str) -> reqwest::Response {
        self.server
            .client
            .post(self.server.url("/auth/token"))
            .form(&[("username", email), ("password", password)])
            .send()
            .await
            .unwrap()
    }

    /// Registers and logs in; returns (user id, token).
    async fn user(&self, email: &str) -> (i64, String) {
        let r = self
            .register(json!({"email": email, "password": "password123"}))
            .await;
        assert_eq!(r.status(), StatusCode::CREATED);
        let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
        let r = self.login(email, "password123").await;
        assert_eq!(r.status(), StatusCode::OK);
        let token = r.json::<Value>().await.unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_owned();
        (id, token)
    }

    async fn admin(&self, email: &str) -> (i64, String) {
        let (id, token) = self.user(email).await;
        let patch = UserPatch {
            role: Some(Role::Admin),
            ..Default::default()
        };
        self.module
            .service()
            .update_user(None, id, patch)
            .await
            .unwrap();
        (id, token)
    }

    async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut req = self.server.client.get(self.server.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    async fn patch(&self, path: &str, token: &str, body: Value) -> reqwest::Response {
        self.server
            .client
            .patch(self.server.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

async fn detail(r: reqwest::Response) -> Value {
    r.json::<Value>().await.unwrap()["detail"].clone()
}

fn is_utc_micros(v: &Value) -> bool {
    let s = v.as_str().unwrap_or_default();
    s.ends_with('Z') && s.len() == "2026-11-21T15:27:40.254637Z".len()
}

kernel::backend_tests! {
    nul_characters_are_refused_by_field,
    admin_routes_authenticate_before_reading_the_body,
    register_returns_201_and_the_user,
    duplicate_emails_are_refused_case_insensitively,
    validation_lists_every_failing_field,
    login_issues_a_bearer_token_for_me,
    wrong_password_and_unknown_user_are_the_same_401,
    inactive_users_cannot_log_in_or_use_tokens,
    bad_tokens_are_refused,
    a_token_for_a_deleted_user_is_refused,
    admin_endpoints_need_the_admin_role,
    admins_list_and_deactivate_users,
    malformed_requests_are_4xx_not_500,
    rate_limits_answer_429_with_retry_after,
}

async fn register_returns_201_and_the_user(db: TestDb) {
    let c = ctx(db).await;
    let r = c
        .register(json!({"email": "  Ada@Example.COM ", "password": "password123", "full_name": "Ada Lovelace"}))
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let user: Value = r.json().await.unwrap();
    assert_eq!(user["email"], "Ada@example.com");
    assert_eq!(user["full_name"], "Ada Lovelace");
    assert_eq!(user["is_active"], true);
    assert_eq!(user["role"], "user");
    assert!(user["id"].as_i64().is_some());
    assert!(
        is_utc_micros(&user["created_at"]) && is_utc_micros(&user["updated_at"]),
        "{user}"
    );
    let keys: Vec<&String> = user.as_object().unwrap().keys().collect();
    assert!(keys.iter().all(|k| !k.contains("password")), "{keys:?}");
    // The address logs in whatever its case.
    assert_eq!(
        c.login("ada@EXAMPLE.com", "password123").await.status(),
        StatusCode::OK
    );
    // is_active may be given.
    let r = c
        .register(
            json!({"email": "off@example.com", "password": "password123", "is_active": false}),
        )
        .await;
    assert_eq!(r.json::<Value>().await.unwrap()["is_active"], false);
}

async fn duplicate_emails_are_refused_case_insensitively(db: TestDb) {
    let c = ctx(db).await;
    c.user("grace@example.com").await;
    let r = c
        .register(json!({"email": "GRACE@example.com", "password": "password123"}))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(detail(r).await, "Email already registered");
}

async fn validation_lists_every_failing_field(db: TestDb) {
    let c = ctx(db).await;
    let r = c
        .register(json!({"email": "not-an-email", "password": "short", "full_name": ""}))
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail(r).await,
        json!([
            {"field": "email", "message": "Invalid email format"},
            {"field": "password", "message": "Password too short"},
            {"field": "full_name", "message": "Full name must be 1 to 100 characters"},
        ])
    );
    let r = c
        .register(json!({"email": "a@example.com", "password": "x".repeat(73), "full_name": "n".repeat(101)}))
        .await;
    assert_eq!(
        detail(r).await,
        json!([
            {"field": "password", "message": "Password too long"},
            {"field": "full_name", "message": "Full name must be 1 to 100 characters"},
        ])
    );
    let r = c.register(json!({})).await;
    assert_eq!(
        detail(r).await,
        json!([
            {"field": "email", "message": "Field required"},
            {"field": "password", "message": "Field required"},
        ])
    );
    // Exactly 8 characters and exactly 72 bytes are fine.
    let ok = c
        .register(json!({"email": "b@example.com", "password": "12345678"}))
        .await;
    assert_eq!(ok.status(), StatusCode::CREATED);
    let ok = c
        .register(json!({"email": "c@example.com", "password": "y".repeat(72)}))
        .await;
    assert_eq!(ok.status(), StatusCode::CREATED);
    // Nothing was written for the refused ones.
    assert_eq!(
        c.login("a@example.com", "x").await.status(),
        StatusCode::UNAUTHORIZED
    );
}

async fn login_issues_a_bearer_token_for_me(db: TestDb) {
    let c = ctx(db).await;
    c.register(json!({"email": "me@example.com", "password": "password123", "full_name": "Me"}))
        .await;
    let r = c.login("me@example.com", "password123").await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["token_type"], "bearer");
    let token = body["access_token"].as_str().unwrap();
    let header = jsonwebtoken::decode_header(token).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::HS256);
    let claims = jsonwebtoken::decode::<Value>(
        token,
        &jsonwebtoken::DecodingKey::from_secret(SECRET.as_bytes()),
        &jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256),
    )
    .unwrap()
    .claims;
    for claim in ["sub", "iat", "exp", "jti"] {
        assert!(claims.get(claim).is_some(), "claim {claim} in {claims}");
    }
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        30 * 60
    );
    let me = c.get("/auth/me", Some(token)).await;
    assert_eq!(me.status(), StatusCode::OK);
    let me: Value = me.json().await.unwrap();
    assert_eq!(me["email"], "me@example.com");
    assert_eq!(me["full_name"], "Me");
    assert_eq!(claims["sub"], me["id"].to_string());
}

async fn wrong_password_and_unknown_user_are_the_same_401(db: TestDb) {
    let c = ctx(db).await;
    c.user("known@example.com").await;
    let before = c.module.password_checks();
    for (email, password) in [
        ("known@example.com", "wrong-password"),
        ("nobody@example.com", "password123"),
    ] {
        let r = c.login(email, password).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        assert_eq!(detail(r).await, "Incorrect email or password");
    }
    // The unknown address cost a bcrypt verification too (no enumeration by timing).
    assert_eq!(c.module.password_checks() - before, 2);
}

async fn inactive_users_cannot_log_in_or_use_tokens(db: TestDb) {
    let c = ctx(db).await;
    c.register(
        json!({"email": "sleepy@example.com", "password": "password123", "is_active": false}),
    )
    .await;
    let r = c.login("sleepy@example.com", "password123").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(detail(r).await, "Inactive user");
    // A wrong password does not reveal that the account exists.
    let r = c.login("sleepy@example.com", "wrong-password").await;
    assert_eq!(detail(r).await, "Incorrect email or password");
    // A token issued before deactivation stops working.
    let (id, token) = c.user("later@example.com").await;
    let patch = UserPatch {
        is_active: Some(false),
        ..Default::default()
    };
    c.module
        .service()
        .update_user(None, id, patch)
        .await
        .unwrap();
    let r = c.get("/auth/me", Some(&token)).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(detail(r).await, "Inactive user");
}

async fn bad_tokens_are_refused(db: TestDb) {
    let c = ctx(db).await;
    let (id, token) = c.user("tok@example.com").await;
    let r = c.get("/auth/me", None).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(detail(r).await, "Not authenticated");

    let now = chrono::Utc::now().timestamp();
    let sign = |secret: &str, exp: i64| {
        let claims = json!({"sub": id.to_string(), "iat": now - 7200, "exp": exp, "jti": "j"});
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let expired = sign(SECRET, now - 3600);
    let foreign = sign("some-other-secret-some-other-secret", now + 3600);
    let mut tampered = token.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    for bad in [
        expired.as_str(),
        foreign.as_str(),
        tampered.as_str(),
        "garbage",
        "a.b.c",
    ] {
        let r = c.get("/auth/me", Some(bad)).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{bad}");
        assert_eq!(detail(r).await, "Could not validate credentials", "{bad}");
    }
    // The well-signed, unexpired one still works.
    assert_eq!(
        c.get("/auth/me", Some(&sign(SECRET, now + 600)))
            .await
            .status(),
        StatusCode::OK
    );
}

async fn a_token_for_a_deleted_user_is_refused(db: TestDb) {
    let url = db.url.clone();
    let c = ctx(db).await;
    let (id, token) = c.user("gone@example.com").await;
    let pool = kernel::DbPool::connect(&url, 1).await.unwrap();
    assert_eq!(auth_core::testing::delete_user(&pool, id).await.unwrap(), 1);
    let r = c.get("/auth/me", Some(&token)).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(detail(r).await, "Could not validate credentials");
}

async fn admin_endpoints_need_the_admin_role(db: TestDb) {
    let c = ctx(db).await;
    let (id, token) = c.user("plain@example.com").await;
    assert_eq!(
        c.get("/auth/users", None).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let r = c.get("/auth/users", Some(&token)).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(detail(r).await, "Insufficient permissions");
    let r = c
        .patch(
            &format!("/auth/users/{id}"),
            &token,
            json!({"role": "admin"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Moderators are not admins either.
    let patch = UserPatch {
        role: Some(Role::Moderator),
        ..Default::default()
    };
    c.module
        .service()
        .update_user(None, id, patch)
        .await
        .unwrap();
    assert_eq!(
        c.get("/auth/users", Some(&token)).await.status(),
        StatusCode::FORBIDDEN
    );
}

async fn admins_list_and_deactivate_users(db: TestDb) {
    let c = ctx(db).await;
    let (admin_id, admin) = c.admin("boss@example.com").await;
    let (user_id, user_token) = c.user("worker@example.com").await;
    c.user("third@example.com").await;

    let r = c.get("/auth/users?page=1&page_size=2", Some(&admin)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let list: Value = r.json().await.unwrap();
    assert_eq!(list["total"], 3);
    assert_eq!(list["page"], 1);
    assert_eq!(list["page_size"], 2);
    assert_eq!(list["users"].as_array().unwrap().len(), 2);
    assert_eq!(list["users"][0]["role"], "admin");
    let r = c.get("/auth/users?page=2&page_size=2", Some(&admin)).await;
    assert_eq!(
        r.json::<Value>().await.unwrap()["users"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        c.get("/auth/users?page_size=101", Some(&admin))
            .await
            .status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        c.get("/auth/users?page=0", Some(&admin)).await.status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );

    let r = c
        .patch(
            &format!("/auth/users/{user_id}"),
            &admin,
            json!({"is_active": false}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["is_active"], false);
    let r = c.login("worker@example.com", "password123").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(detail(r).await, "Inactive user");
    assert_eq!(
        c.get("/auth/me", Some(&user_token)).await.status(),
        StatusCode::UNAUTHORIZED
    );

    let r = c
        .patch(
            &format!("/auth/users/{user_id}"),
            &admin,
            json!({"is_active": true, "role": "moderator"}),
        )
        .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["is_active"].clone(), body["role"].clone()),
        (json!(true), json!("moderator"))
    );

    let r = c
        .patch(
            &format!("/auth/users/{admin_id}"),
            &admin,
            json!({"is_active": false}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        detail(r).await,
        "Admins cannot deactivate or demote themselves"
    );
    let r = c
        .patch(
            &format!("/auth/users/{admin_id}"),
            &admin,
            json!({"role": "user"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = c
        .patch("/auth/users/999999", &admin, json!({"is_active": false}))
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(detail(r).await, "User not found");
    let r = c
        .patch(&format!("/auth/users/{user_id}"), &admin, json!({}))
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = c
        .patch(
            &format!("/auth/users/{user_id}"),
            &admin,
            json!({"role": "root"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(detail(r).await.is_array());
    let r = c
        .patch("/auth/users/abc", &admin, json!({"is_active": true}))
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

async fn malformed_requests_are_4xx_not_500(db: TestDb) {
    let c = ctx(db).await;
    let url = c.server.url("/auth/register");
    let client = &c.server.client;
    let r = client
        .post(&url)
        .header("content-type", "application/json")
        .body("{\"email\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let d = detail(r).await;
    assert!(
        d[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Malformed JSON"),
        "{d}"
    );
    let r = client
        .post(&url)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail(r).await[0]["message"],
        "Content-Type must be application/json"
    );
    let r = client
        .post(&url)
        .json(&json!({"email": 5, "password": "password123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let big = format!("{{\"email\": \"{}\"}}", "a".repeat(10 * 1024 * 1024));
    let r = client
        .post(&url)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(detail(r).await.as_str().unwrap().contains("1048576"));
    // Login takes a form, not JSON; and both of its fields.
    let r = client
        .post(c.server.url("/auth/token"))
        .json(&json!({"username": "a@example.com", "password": "password123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = client
        .post(c.server.url("/auth/token"))
        .form(&[("username", "a@example.com")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail(r).await,
        json!([{"field": "password", "message": "Field required"}])
    );
    let r = client.put(c.server.url("/auth/me")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(detail(r).await, "Method Not Allowed");
}

async fn rate_limits_answer_429_with_retry_after(db: TestDb) {
    let mut config = AuthConfig::with_secret(SECRET);
    config.rate_limit = true;
    let c = start(db, config).await;
    for i in 0..5 {
        let r = c
            .register(json!({"email": format!("u{i}@example.com"), "password": "password123"}))
            .await;
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let r = c
        .register(json!({"email": "u6@example.com", "password": "password123"}))
        .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry));
    assert_eq!(
        detail(r).await,
        "Too many requests. Please try again later."
    );
    for _ in 0..10 {
        assert_eq!(
            c.login("u0@example.com", "wrong-password").await.status(),
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        c.login("u0@example.com", "password123").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// With a Redis pool the counters are shared: two limiters on one Redis count together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rate_limits_are_shared_between_instances() {
    let Ok(url) = std::env::var("TEST_REDIS_URL") else {
        eprintln!("TEST_REDIS_URL is not set: Redis rate-limit test skipped");
        return;
    };
    use auth_core::rate_limit::{Action, RateLimiter};
    let pool = || {
        deadpool_redis::Config::from_url(url.clone())
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .unwrap()
    };
    let (a, b) = (RateLimiter::Redis(pool()), RateLimiter::Redis(pool()));
    let ip = format!("test-{}", uuid_like());
    for i in 0..10 {
        let limiter = if i % 2 == 0 { &a } else { &b };
        assert!(limiter.check(Action::Login, &ip).await.is_ok());
    }
    assert!(a.check(Action::Login, &ip).await.is_err());
    assert!(b.check(Action::Login, &ip).await.is_err());
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    )
}

/// PostgreSQL cannot store a NUL character: every text field refuses one with a 422 naming it,
/// the same on both backends, before anything reaches the database.
async fn nul_characters_are_refused_by_field(db: TestDb) {
    let c = ctx(db).await;
    let r = c
        .register(
            json!({"email": "nul@example.com", "password": "password123", "full_name": "A\u{0}"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail(r).await,
        json!([{"field": "full_name", "message": "Must not contain NUL characters"}])
    );
    let r = c
        .register(json!({"email": "nul@example.com", "password": "password\u{0}123"}))
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(detail(r).await[0]["field"], "password");
    let r = c
        .register(json!({"email": "n\u{0}ul@example.com", "password": "password123"}))
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(detail(r).await[0]["field"], "email");
    let r = c.login("nul\u{0}@example.com", "password123").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        detail(r).await,
        json!([{"field": "username", "message": "Must not contain NUL characters"}])
    );
}

/// Without a token the answer is 401 whatever the body: the caller is checked first.
async fn admin_routes_authenticate_before_reading_the_body(db: TestDb) {
    let c = ctx(db).await;
    for body in [None, Some("{\"role\": "), Some("{\"role\": \"root\"}")] {
        let mut req = c.server.client.patch(c.server.url("/auth/users/1"));
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{body:?}");
        assert_eq!(detail(r).await, "Not authenticated");
    }
    let (_, token) = c.user("plain@example.com").await;
    let r = c
        .patch("/auth/users/1", &token, json!({"role": "root"}))
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}
