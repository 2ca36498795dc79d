//! One module crate embedded alone in a plain actix-web app, as another Rust project would: the
//! blog module without auth (open by design) and with auth-core's authenticator (guarded).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use actix_web::HttpServer;
use blog_core::{BlogConfig, BlogModule};
use keel::testing::sign_up;
use kernel::module::{BodyLimits, BuildModule, Deps, Module, mount};
use kernel::testing::{TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};
use utoipa_actix_web::AppExt;

/// Serves `modules` the way the blog crate's doctest shows: `kernel::http::app` plus `mount`.
fn serve(modules: Vec<Arc<dyn Module>>) -> TestServer {
    let server = HttpServer::new(move || {
        let app = kernel::http::app(BodyLimits::default()).into_utoipa_app();
        modules.iter().fold(app, mount).into_app()
    })
    .workers(1)
    .disable_signals()
    .bind(("127.0.0.1", 0))
    .unwrap();
    let port = server.addrs()[0].port();
    TestServer::start(server.run(), port)
}

kernel::backend_tests! {
    blog_alone_is_open,
    blog_with_an_authenticator_needs_a_token,
}

async fn blog_alone_is_open(db: TestDb) {
    let pool = db.migrated_pool(&[blog_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool).unwrap();
    deps.read_cache = db.read_cache;
    let blog = BlogModule::build(BlogConfig::default(), &deps)
        .await
        .unwrap();
    let s = serve(vec![Arc::new(blog)]);
    let r = s
        .client
        .post(s.url("/api/v1/blog/posts"))
        .json(&json!({"title": "Embedded", "content": "Hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let r = s
        .client
        .post(s.url(&format!("/api/v1/blog/posts/{id}/publish")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let list: Value = s
        .client
        .get(s.url("/api/v1/blog/posts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["total"], 1);
    // The kernel's error handling is installed: unknown routes and bad bodies get `detail`.
    let r = s.client.get(s.url("/nowhere")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "Not Found");
    let r = s
        .client
        .post(s.url("/api/v1/blog/tags"))
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
}

async fn blog_with_an_authenticator_needs_a_token(db: TestDb) {
    let pool = db
        .migrated_pool(&[auth_core::MIGRATIONS, blog_core::MIGRATIONS])
        .await;
    let mut deps = Deps::new(pool).unwrap();
    deps.read_cache = db.read_cache;
    let auth = auth_core::AuthModule::build(
        auth_core::AuthConfig::with_secret("embedding-test-secret-embedding-test"),
        &deps,
    )
    .await
    .unwrap();
    let deps = deps.with_authenticator(auth.authenticator());
    let blog = BlogModule::build(BlogConfig::default(), &deps)
        .await
        .unwrap();
    let s = serve(vec![Arc::new(auth), Arc::new(blog)]);
    let post = |token: Option<String>| {
        let req = s
            .client
            .post(s.url("/api/v1/blog/tags"))
            .json(&json!({"name": format!("Tag {}", token.is_some())}));
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
        .send()
    };
    let r = post(None).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        r.json::<Value>().await.unwrap()["detail"],
        "Not authenticated"
    );
    let token = sign_up(&s.client, &s.base_url, "embed@example.com").await;
    assert_eq!(
        post(Some(token.clone())).await.unwrap().status(),
        StatusCode::CREATED
    );
    // A malformed body beside a valid token: the body's 422, and the token lookup that was under
    // way when the body failed finishes on its own task (on SQLite it used to panic, 500).
    for _ in 0..20 {
        let r = s
            .client
            .post(s.url("/api/v1/blog/tags"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body("{\"name\": ")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    }
}
