//! Protection.

use super::*;

kernel::backend_tests! {
    role_protection,
    basic_protection,
    no_protection,
    without_auth_writes_are_open,
}

/// Every write-level request, with a body where it takes one.
async fn write_requests(c: &Ctx, token: Option<&str>) -> Vec<(String, StatusCode, Value)> {
    let post = c
        .create_titled(&format!("target {}", token.unwrap_or("none")))
        .await;
    let tag = c.tag(&format!("tag {}", token.unwrap_or("none"))).await;
    let (p, t) = (post["id"].clone(), tag["id"].clone());
    let requests = vec![
        (
            "GET /admin/posts".to_owned(),
            c.get("/admin/posts", token).await,
        ),
        (
            "POST /posts".into(),
            c.post(
                "/posts",
                token,
                json!({"title": format!("new {}", token.unwrap_or("none"))}),
            )
            .await,
        ),
        (
            "PUT /posts".into(),
            c.put(&format!("/posts/{p}"), token, json!({"title": "changed"}))
                .await,
        ),
        (
            "POST publish".into(),
            c.post_empty(&format!("/posts/{p}/publish"), token).await,
        ),
        (
            "POST archive".into(),
            c.post_empty(&format!("/posts/{p}/archive"), token).await,
        ),
        (
            "POST /tags".into(),
            c.post(
                "/tags",
                token,
                json!({"name": format!("t {}", token.unwrap_or("none"))}),
            )
            .await,
        ),
        (
            "PUT /tags".into(),
            c.put(
                &format!("/tags/{t}"),
                token,
                json!({"name": format!("renamed {}", token.unwrap_or("none"))}),
            )
            .await,
        ),
        (
            "GET /export".into(),
            c.get("/export?format=json", token).await,
        ),
        (
            "POST /import".into(),
            c.upload("", token, "x.md", b"# Imported\n".to_vec()).await,
        ),
        (
            "DELETE /tags".into(),
            c.delete(&format!("/tags/{t}"), token).await,
        ),
        (
            "DELETE /posts".into(),
            c.delete(&format!("/posts/{p}"), token).await,
        ),
    ];
    let mut out = Vec::new();
    for (name, r) in requests {
        let status = r.status();
        let www = r
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = if status == StatusCode::NO_CONTENT
            || name == "GET /export" && status == StatusCode::OK
        {
            Value::Null
        } else {
            r.json().await.unwrap()
        };
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(www.as_deref(), Some("Bearer"), "{name}");
        }
        out.push((name, status, body));
    }
    out
}

fn assert_all(results: &[(String, StatusCode, Value)], status: StatusCode, detail: Option<&str>) {
    for (name, got, body) in results {
        assert_eq!(*got, status, "{name}: {body}");
        if let Some(detail) = detail {
            assert_eq!(body["detail"], detail, "{name}");
        }
    }
}

fn assert_all_succeed(results: &[(String, StatusCode, Value)]) {
    for (name, got, body) in results {
        assert!(got.is_success(), "{name}: {got} {body}");
    }
}

async fn assert_public_reads_open(c: &Ctx) {
    assert_eq!(c.get("/posts", None).await.status(), StatusCode::OK);
    assert_eq!(c.get("/tags", None).await.status(), StatusCode::OK);
    let post = c.create_titled("Public read").await;
    c.publish(&post["id"]).await;
    assert_eq!(
        c.get("/posts/public-read", None).await.status(),
        StatusCode::OK
    );
}

async fn role_protection(db: TestDb) {
    let c = ctx_with(db, Protection::Role).await;
    assert_eq!(c.module.protection(), Protection::Role);
    assert_all(
        &write_requests(&c, None).await,
        StatusCode::UNAUTHORIZED,
        Some("Not authenticated"),
    );
    assert_all(
        &write_requests(&c, Some("forged")).await,
        StatusCode::UNAUTHORIZED,
        Some("Could not validate credentials"),
    );
    assert_all(
        &write_requests(&c, Some(INACTIVE)).await,
        StatusCode::UNAUTHORIZED,
        Some("Inactive user"),
    );
    assert_all(
        &write_requests(&c, Some(USER)).await,
        StatusCode::FORBIDDEN,
        Some("Insufficient permissions"),
    );
    assert_all_succeed(&write_requests(&c, Some(MODERATOR)).await);
    assert_all_succeed(&write_requests(&c, Some(ADMIN)).await);
    assert_public_reads_open(&c).await;
    let r = c
        .post(
            "/posts",
            Some(MODERATOR),
            json!({"title": "By the moderator"}),
        )
        .await;
    assert_eq!(
        r.json::<Value>().await.unwrap()["author_name"],
        "Mo Moderator"
    );
}

async fn basic_protection(db: TestDb) {
    let c = ctx(db).await;
    assert_eq!(
        c.module.protection(),
        Protection::Basic,
        "the default with auth"
    );
    assert_all(
        &write_requests(&c, None).await,
        StatusCode::UNAUTHORIZED,
        Some("Not authenticated"),
    );
    assert_all(
        &write_requests(&c, Some("forged")).await,
        StatusCode::UNAUTHORIZED,
        Some("Could not validate credentials"),
    );
    assert_all(
        &write_requests(&c, Some(INACTIVE)).await,
        StatusCode::UNAUTHORIZED,
        Some("Inactive user"),
    );
    assert_all_succeed(&write_requests(&c, Some(USER)).await);
    assert_all_succeed(&write_requests(&c, Some(ADMIN)).await);
    assert_public_reads_open(&c).await;
}

async fn no_protection(db: TestDb) {
    let c = ctx_with(db, Protection::None).await;
    assert_all_succeed(&write_requests(&c, None).await);
    assert_all_succeed(&write_requests(&c, Some(USER)).await);
    assert_all_succeed(&write_requests(&c, Some(ADMIN)).await);
    // Anonymous posts have no author; a valid token still names the author.
    let anonymous: Value = c
        .post("/posts", None, json!({"title": "Anon"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&anonymous["author_id"], &anonymous["author_name"]),
        (&Value::Null, &Value::Null)
    );
    let named: Value = c
        .post("/posts", Some(ADMIN), json!({"title": "Named"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(named["author_name"], "Ada Admin");
    let forged = c
        .post("/posts", Some("forged"), json!({"title": "Forged"}))
        .await;
    assert_eq!(forged.status(), StatusCode::CREATED);
    assert_public_reads_open(&c).await;
}

async fn without_auth_writes_are_open(db: TestDb) {
    // Even BLOG_PROTECTION=role falls back to none when auth is not mounted.
    let config = BlogConfig {
        protection: Some(Protection::Role),
        ..BlogConfig::default()
    };
    assert!(config.check(false).is_err());
    let c = start(db, config, false).await;
    assert_eq!(c.module.protection(), Protection::None);
    assert_all_succeed(&write_requests(&c, None).await);
    let post: Value = c
        .post("/posts", None, json!({"title": "Open"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&post["author_id"], &post["author_name"]),
        (&Value::Null, &Value::Null)
    );
    assert_public_reads_open(&c).await;
}
