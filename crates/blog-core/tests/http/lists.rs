//! Lists.

use super::*;

kernel::backend_tests! {
    public_and_editor_lists_order_and_filter,
    pagination_edges,
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
