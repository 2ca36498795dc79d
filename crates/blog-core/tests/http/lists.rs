//! Lists.

use super::*;

kernel::backend_tests! {
    public_and_editor_lists_order_and_filter,
    pagination_edges,
    public_answers_from_stored_json_equal_the_editor_answers,
}

async fn public_and_editor_lists_order_and_filter(db: TestDb) {
    let c = ctx(db).await;
    c.tag("Rust").await;
    let a = c.create(json!({"title": "A", "tag_slugs": ["rust"]})).await;
    let b = c.create_titled("B").await;
    let cc = c.create(json!({"title": "C", "tag_slugs": ["rust"]})).await;
    let d = c.create_titled("D").await;
    let e = c.create_titled("E").await;
    // Published in the order B, A, C: the public list is newest publication first.
    c.publish(&b["id"]).await;
    c.publish(&a["id"]).await;
    c.publish(&cc["id"]).await;
    c.archive(&d["id"]).await;
    assert_eq!(
        c.public_slugs("").await,
        (vec!["c".into(), "a".into(), "b".into()], 3)
    );
    assert_eq!(
        c.public_slugs("?tag=rust").await,
        (vec!["c".into(), "a".into()], 2)
    );
    assert_eq!(
        c.public_slugs("?tag=Rust").await,
        (vec!["c".into(), "a".into()], 2)
    );
    assert_eq!(c.public_slugs("?tag=unknown").await, (vec![], 0));
    // Re-publishing keeps the order (published_at does not move).
    c.publish(&b["id"]).await;
    assert_eq!(c.public_slugs("").await.0, ["c", "a", "b"]);
    // The editor list: every status, newest creation first; status and tag filters.
    let admin = |query: &'static str| {
        let c = &c;
        async move {
            let r = c.get(&format!("/admin/posts{query}"), Some(ADMIN)).await;
            assert_eq!(r.status(), StatusCode::OK);
            let body: Value = r.json().await.unwrap();
            (slugs(&body["posts"]), body["total"].as_i64().unwrap())
        }
    };
    assert_eq!(
        admin("").await,
        (
            vec!["e".into(), "d".into(), "c".into(), "b".into(), "a".into()],
            5
        )
    );
    assert_eq!(admin("?status=draft").await, (vec!["e".into()], 1));
    assert_eq!(admin("?status=archived").await, (vec!["d".into()], 1));
    assert_eq!(
        admin("?status=published&tag=rust").await,
        (vec!["c".into(), "a".into()], 2)
    );
    assert_invalid(
        c.get("/admin/posts?status=live", Some(ADMIN)).await,
        "status",
    )
    .await;
    let _ = e;
    // A published post by slug carries its tags.
    let r = c.get("/posts/a", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let post: Value = r.json().await.unwrap();
    assert_eq!(slugs(&post["tags"]), ["rust"]);
}

async fn pagination_edges(db: TestDb) {
    let c = ctx(db).await;
    for i in 0..3 {
        let post = c.create_titled(&format!("P{i}")).await;
        c.publish(&post["id"]).await;
    }
    for (list, token) in [("/posts", None), ("/admin/posts", Some(ADMIN))] {
        let page = |query: String| {
            let c = &c;
            async move {
                let r = c.get(&format!("{list}{query}"), token).await;
                let status = r.status();
                (status, r.json::<Value>().await.unwrap())
            }
        };
        let (status, body) = page("?page=2&page_size=2".into()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            (body["posts"].as_array().unwrap().len(), &body["total"]),
            (1, &json!(3))
        );
        assert_eq!((&body["page"], &body["page_size"]), (&json!(2), &json!(2)));
        // Past the end: empty, with the true total.
        let (status, body) = page("?page=5&page_size=2".into()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            (body["posts"].clone(), &body["total"]),
            (json!([]), &json!(3))
        );
        // Defaults.
        let (_, body) = page(String::new()).await;
        assert_eq!(
            (&body["page"], &body["page_size"], &body["total"]),
            (&json!(1), &json!(20), &json!(3))
        );
        // page_size 100 is the maximum; 101, 0 and page 0 are 422s naming the parameter.
        let (status, body) = page("?page_size=100".into()).await;
        assert_eq!(
            (status, body["page_size"].clone()),
            (StatusCode::OK, json!(100))
        );
        for (query, field) in [
            ("?page_size=101", "page_size"),
            ("?page_size=0", "page_size"),
            ("?page=0", "page"),
            ("?page=-1", "page"),
        ] {
            let r = c.get(&format!("{list}{query}"), token).await;
            assert_invalid(r, field).await;
        }
        let r = c.get(&format!("{list}?page=abc"), token).await;
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    }
}

/// The public list and post are written from each post's stored JSON; the editor list builds
/// every post from its columns. With posts created in the order they are published, the two lists
/// of published posts are the same bytes (escapes, Unicode, nulls, derived excerpts, tags), a post
/// by slug is the same bytes as its place in the list, and so is a post whose stored JSON a hand
/// edit has cleared.
async fn public_answers_from_stored_json_equal_the_editor_answers(db: TestDb) {
    let c = ctx(db).await;
    c.tag("Ünïcode \"tag\"").await;
    c.tag("plain").await;
    let bodies = [
        json!({"title": "Quotes \" and \\ and \u{1}\u{1f}", "content": "# H\n\nText <b>bold</b> & \u{2028}",
               "tag_slugs": ["unicode-tag", "plain"]}),
        json!({"title": "Emoji 🦀 and ✓", "excerpt": "Own excerpt", "seo_title": "S",
               "seo_description": "D", "hero_image_url": "https://example.com/i.png", "tag_slugs": ["plain"]}),
        json!({"title": "Empty", "content": ""}),
        json!({"title": "Tabs\tand\nlines", "content": "```\ncode only\n```", "excerpt": ""}),
    ];
    let mut ids = Vec::new();
    for body in bodies {
        let post = c.create(body).await;
        c.publish(&post["id"]).await;
        ids.push(post["id"].clone());
    }
    c.create_titled("Draft").await;
    let text = async |path: &str, token: Option<&str>| {
        let r = c.get(path, token).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        r.text().await.unwrap()
    };
    let compare = async || {
        let public = text("/posts?page_size=100", None).await;
        let editor = text("/admin/posts?status=published&page_size=100", Some(ADMIN)).await;
        assert_eq!(public, editor);
        let public = text("/posts?tag=plain", None).await;
        let editor = text("/admin/posts?status=published&tag=plain", Some(ADMIN)).await;
        assert_eq!(public, editor);
        let list = text("/posts?page_size=100", None).await;
        let listed: Value = serde_json::from_str(&list).unwrap();
        for post in listed["posts"].as_array().unwrap() {
            let one = text(&format!("/posts/{}", post["slug"].as_str().unwrap()), None).await;
            assert!(list.contains(&one), "{one}");
        }
        assert_eq!(listed["posts"].as_array().unwrap().len(), 4);
        // The typed reads of the service (for embedders) show the same posts.
        let service = c.module.service();
        let page = kernel::pagination::Page {
            page: 1,
            page_size: 100,
        };
        let typed = service.list_published(page, None).await.unwrap();
        assert_eq!(typed.total, listed["total"].as_i64().unwrap());
        assert_eq!(typed.posts.len(), 4);
        for (post, shown) in typed.posts.iter().zip(listed["posts"].as_array().unwrap()) {
            assert_eq!(json!(post.id), shown["id"]);
            assert_eq!(json!(post.title), shown["title"]);
            let tags: Vec<&str> = post.tags.iter().map(|t| t.slug.as_str()).collect();
            assert_eq!(json!(tags), json!(slugs(&shown["tags"])));
            let one = service.get_published(&post.slug).await.unwrap();
            assert_eq!(&one, post);
        }
    };
    compare().await;
    // A hand edit of a shown field clears the stored JSON (a trigger): the reads then write those
    // posts from their columns, with the edit.
    let pool = kernel::DbPool::connect(&c.db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    let edited: usize = kernel::with_conn!(&mut pooled.conn(), |c| {
        kernel::diesel::sql_query("UPDATE blog_posts SET title = title || ' (edited)' WHERE status = 'published' AND content <> ''")
            .execute(c)
            .await
    })
    .unwrap();
    assert_eq!(edited, 2);
    drop(pooled);
    // Writes by another program are seen within the read cache's second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    compare().await;
    let list = text("/posts?page_size=100", None).await;
    assert_eq!(list.matches(" (edited)").count(), 2, "{list}");
}
