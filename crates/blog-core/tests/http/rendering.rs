//! Markdown rendered when a post is written: `content_html` and the derived excerpt.

use super::*;

kernel::backend_tests! {
    posts_carry_their_rendered_html,
    excerpts_are_derived_only_when_none_is_given,
    imported_posts_are_rendered,
    posts_stored_before_rendering_are_rendered_at_start,
}

async fn posts_carry_their_rendered_html(db: TestDb) {
    let c = ctx(db).await;
    let post = c
        .create(json!({
            "title": "Rendered",
            "content": "## Part one\n\nSome **bold** text <script>alert(1)</script>\n\n- [x] done\n",
        }))
        .await;
    let html = post["content_html"].as_str().unwrap();
    assert!(html.contains("<h2>Part one</h2>"), "{html}");
    assert!(html.contains("<strong>bold</strong>"), "{html}");
    assert!(
        html.contains("&lt;script&gt;"),
        "raw HTML is escaped: {html}"
    );
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains("checkbox"), "task lists: {html}");
    // A content change renders again; a change to anything else keeps the rendering.
    let id = &post["id"];
    let r = c
        .put(
            &format!("/posts/{id}"),
            Some(ADMIN),
            json!({"content": "_new_"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let updated: Value = r.json().await.unwrap();
    assert_eq!(updated["content_html"], "<p><em>new</em></p>\n");
    let r = c
        .put(
            &format!("/posts/{id}"),
            Some(ADMIN),
            json!({"title": "Renamed"}),
        )
        .await;
    let renamed: Value = r.json().await.unwrap();
    assert_eq!(renamed["content_html"], "<p><em>new</em></p>\n");
    // The public read carries it too.
    c.publish(id).await;
    let public: Value = c.get("/posts/rendered", None).await.json().await.unwrap();
    assert_eq!(public["content_html"], "<p><em>new</em></p>\n");
    // Empty content renders to nothing.
    let empty = c.create(json!({"title": "Empty"})).await;
    assert_eq!(empty["content_html"], "");
    assert_eq!(empty["excerpt"], Value::Null);
}

async fn excerpts_are_derived_only_when_none_is_given(db: TestDb) {
    let c = ctx(db).await;
    let derived = c
        .create(json!({"title": "Derived", "content": "# Heading\n\nThe *first* paragraph.\n\nAnd more."}))
        .await;
    assert_eq!(derived["excerpt"], "The first paragraph. And more.");
    let given = c
        .create(json!({"title": "Given", "content": "Body text.", "excerpt": "Mine"}))
        .await;
    assert_eq!(given["excerpt"], "Mine");
    // Clearing the excerpt shows the derived one again; the export keeps only what was given.
    let id = &given["id"];
    let r = c
        .put(
            &format!("/posts/{id}"),
            Some(ADMIN),
            json!({"excerpt": null}),
        )
        .await;
    let cleared: Value = r.json().await.unwrap();
    assert_eq!(cleared["excerpt"], "Body text.");
    let export: Value = c
        .get("/export?format=json", Some(ADMIN))
        .await
        .json()
        .await
        .unwrap();
    for post in export.as_array().unwrap() {
        assert_eq!(post["excerpt"], Value::Null, "{post}");
        assert!(post.get("content_html").is_none(), "{post}");
    }
}

async fn imported_posts_are_rendered(db: TestDb) {
    let c = ctx(db).await;
    let md = b"---\ntitle: Imported\n---\nHello *there*.\n".to_vec();
    let result = c.import("", "imported.md", md).await;
    assert_eq!(result["created"], 1, "{result}");
    let post = c.post_by_slug("imported").await;
    assert_eq!(post["content_html"], "<p>Hello <em>there</em>.</p>\n");
    assert_eq!(post["excerpt"], "Hello there.");
    // Overwriting renders the new content.
    let md = b"---\ntitle: Imported\n---\n**Changed**\n".to_vec();
    let result = c.import("?on_conflict=overwrite", "imported.md", md).await;
    assert_eq!(result["updated"], 1, "{result}");
    let post = c.post_by_slug("imported").await;
    assert_eq!(post["content_html"], "<p><strong>Changed</strong></p>\n");
}

/// Rows written before the rendering columns existed have empty HTML: the module renders them
/// when it starts, without touching `updated_at`.
async fn posts_stored_before_rendering_are_rendered_at_start(db: TestDb) {
    let c = ctx(db).await;
    let post = c
        .create(json!({"title": "Old", "content": "Old *content*"}))
        .await;
    let pool = kernel::DbPool::connect(&c.db.url, 1).await.unwrap();
    {
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let cleared: usize = kernel::with_conn!(&mut conn, |c| {
            kernel::diesel::sql_query(
                "UPDATE blog_posts SET content_html = '', derived_excerpt = ''",
            )
            .execute(c)
            .await
        })
        .unwrap();
        assert_eq!(cleared, 1);
    }
    let before = c.post_by_slug("old").await;
    assert_eq!(before["content_html"], "");
    let deps = Deps::new(pool).unwrap();
    BlogModule::build(BlogConfig::default(), &deps)
        .await
        .unwrap();
    let after = c.post_by_slug("old").await;
    assert_eq!(after["content_html"], "<p>Old <em>content</em></p>\n");
    assert_eq!(after["excerpt"], "Old content");
    assert_eq!(after["updated_at"], post["updated_at"]);
}
