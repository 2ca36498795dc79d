//! NUL characters: PostgreSQL cannot store them, so every text field refuses them with a 422
//! naming the field, the same on both backends; in an import only the post carrying one fails.

use super::*;

kernel::backend_tests! {
    nul_characters_are_refused_by_field,
    an_imported_post_with_a_nul_fails_alone,
}

async fn nul_characters_are_refused_by_field(db: TestDb) {
    let c = ctx(db).await;
    for (field, body) in [
        ("title", json!({"title": "a\u{0}b"})),
        ("content", json!({"title": "T", "content": "x\u{0}"})),
        ("excerpt", json!({"title": "T", "excerpt": "\u{0}"})),
        ("seo_title", json!({"title": "T", "seo_title": "\u{0}"})),
    ] {
        let r = c.post("/posts", Some(ADMIN), body).await;
        assert_invalid(r, field).await;
    }
    let r = c
        .post("/tags", Some(ADMIN), json!({"name": "tag\u{0}"}))
        .await;
    assert_invalid(r, "name").await;
    let post = c.create_titled("Clean").await;
    let r = c
        .put(
            &format!("/posts/{}", post["id"]),
            Some(ADMIN),
            json!({"content": "\u{0}"}),
        )
        .await;
    assert_invalid(r, "content").await;
    // Lookups by a slug with a NUL find nothing rather than failing.
    assert_eq!(
        c.get("/posts/a%00b", None).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.get("/posts?tag=a%00b", None).await.status(),
        StatusCode::OK
    );
}

async fn an_imported_post_with_a_nul_fails_alone(db: TestDb) {
    let c = ctx(db).await;
    let posts = json!([
        {"title": "Fine", "slug": "fine", "content": "ok"},
        {"title": "Broken", "slug": "broken", "content": "bad\u{0}content"},
        {"title": "Author", "slug": "author", "content": "ok", "author_name": "A\u{0}"},
    ]);
    let result = c
        .import("", "posts.json", serde_json::to_vec(&posts).unwrap())
        .await;
    assert_eq!(result["created"], 1, "{result}");
    assert_eq!(result["failed"], 2, "{result}");
    let messages = result["errors"].to_string();
    assert!(
        messages.contains("content must not contain NUL"),
        "{messages}"
    );
    assert!(messages.contains("must not contain NUL"), "{messages}");
}
