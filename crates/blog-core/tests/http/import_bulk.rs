//! Imports larger than one chunk of statements (1,000 posts): the same outcome as storing the
//! posts one by one, across chunk boundaries — tags found by slug or by name whatever their
//! case, a slug met twice judged against the post its first item made, and `on_conflict=fail`
//! keeping nothing of any chunk.

use super::*;

kernel::backend_tests! {
    large_imports_resolve_tags_and_repeated_slugs_across_chunks,
    a_late_conflict_under_fail_keeps_nothing_of_any_chunk,
    a_post_with_more_tags_than_one_statement_binds,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// `count` published posts `post-0`...: each tagged `Rust` in one of three spellings, and every
/// third also `Web`.
fn posts(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let rust = ["Rust", "rust", " RUST "][i % 3];
            let mut tags = vec![json!(rust)];
            if i % 3 == 0 {
                tags.push(json!("Web"));
            }
            json!({
                "title": format!("Post {i}"),
                "slug": format!("post-{i}"),
                "content": format!("Body {i}"),
                "status": "published",
                "published_at": "2024-01-01T00:00:00Z",
                "tags": tags,
            })
        })
        .collect()
}

async fn large_imports_resolve_tags_and_repeated_slugs_across_chunks(db: TestDb) {
    let c = ctx(db).await;
    // A tag that exists before, of another slug: the import's `Rust`s (in any case) are found
    // by its name and join it.
    let r = c
        .post(
            "/tags",
            Some(ADMIN),
            json!({"name": "RUST", "slug": "rust-lang"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let rust: Value = r.json().await.unwrap();
    assert_eq!(rust["slug"], "rust-lang");
    let mut batch = posts(2500);
    // `post-10` again, in the third chunk: judged against the post its first item made.
    batch.push(
        json!({"title": "Post 10 again", "slug": "post-10", "content": "Again",
        "status": "published", "tags": ["Rust"]}),
    );
    let bytes = serde_json::to_vec(&batch).unwrap();

    let result = c
        .import("?on_conflict=overwrite", "posts.json", bytes.clone())
        .await;
    assert_eq!(
        result,
        json!({"created": 2500, "updated": 1, "skipped": 0, "failed": 0, "errors": []})
    );
    let (_, total) = c.public_slugs("").await;
    assert_eq!(total, 2500);
    // The kept counts follow single deletes and status changes after the bulk inserts.
    let c = &c;
    let by_slug = |slug: &'static str| async move {
        let r = c.get(&format!("/posts/{slug}"), None).await;
        r.json::<Value>().await.unwrap()["id"].clone()
    };
    let r = c
        .delete(&format!("/posts/{}", by_slug("post-1").await), Some(ADMIN))
        .await;
    assert!(r.status().is_success(), "{}", r.status());
    c.archive(&by_slug("post-2").await).await;
    assert_eq!(c.public_slugs("").await.1, 2498);
    // One statement deleting several posts, of two statuses: each status loses its own.
    let pool = kernel::DbPool::connect(&c.db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    let deleted: usize = kernel::with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query(
            "DELETE FROM blog_posts WHERE slug IN ('post-2', 'post-2497', 'post-2498', 'post-2499')",
        )
        .execute(c)
        .await
    })
    .unwrap();
    assert_eq!(deleted, 4);
    let wrong: Count = kernel::with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query(
            "SELECT COUNT(*) AS n FROM blog_post_counts k \
             WHERE k.posts <> (SELECT COUNT(*) FROM blog_posts p WHERE p.status = k.status)",
        )
        .get_result(c)
        .await
    })
    .unwrap();
    assert_eq!(wrong.n, 0, "the kept counts differ from the posts");
    drop(pooled);
    // Read past the read cache's second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(c.public_slugs("").await.1, 2495);
    let (web, web_total) = c.public_slugs("?tag=web&page_size=1").await;
    assert_eq!((web.len(), web_total), (1, 833));
    let (_, rust_total) = c
        .public_slugs(&format!("?tag={}", rust["slug"].as_str().unwrap()))
        .await;
    assert_eq!(rust_total, 2495);
    let tags = c.get("/tags", None).await.json::<Value>().await.unwrap();
    assert_eq!(tags["total"], 2, "{tags}");
    let again = c
        .get("/posts/post-10", None)
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(again["title"], "Post 10 again");
    assert_eq!(slugs(&again["tags"]), [rust["slug"].as_str().unwrap()]);
    let first = c
        .get("/posts/post-9", None)
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(first["tags"].as_array().unwrap().len(), 2, "{first}");

    // The same file again, skipping: every post exists but the five deleted.
    let result = c.import("", "posts.json", bytes).await;
    assert_eq!(
        result,
        json!({"created": 5, "updated": 0, "skipped": 2496, "failed": 0, "errors": []})
    );
    assert_eq!(c.public_slugs("").await.1, 2500);
}

async fn a_late_conflict_under_fail_keeps_nothing_of_any_chunk(db: TestDb) {
    let c = ctx(db).await;
    c.create(json!({"title": "Taken", "slug": "post-2400"}))
        .await;
    let bytes = serde_json::to_vec(&posts(2500)).unwrap();
    let r = c
        .upload("?on_conflict=fail", Some(ADMIN), "posts.json", bytes)
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"], "Post slug already exists: post-2400");
    assert_eq!(
        (&body["created"], &body["failed"]),
        (&json!(2400), &json!(1))
    );
    let (_, total) = c.public_slugs("").await;
    assert_eq!(total, 0, "nothing of the batch is kept");
    let tags = c.get("/tags", None).await.json::<Value>().await.unwrap();
    assert_eq!(tags["total"], 0, "{tags}");
}

/// More tags than SQLite binds in one statement (32,766): every look-up and insert is chunked.
async fn a_post_with_more_tags_than_one_statement_binds(db: TestDb) {
    let c = ctx(db).await;
    let tags: Vec<String> = (0..35_000).map(|i| format!("Tag {i}")).collect();
    let post = json!([{"title": "Tagged", "slug": "tagged", "content": "Body",
        "status": "published", "published_at": "2024-01-01T00:00:00Z", "tags": tags}]);
    let result = c
        .import("", "tagged.json", serde_json::to_vec(&post).unwrap())
        .await;
    assert_eq!(result["created"], 1, "{result}");
    let stored = c
        .get("/posts/tagged", None)
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(stored["tags"].as_array().unwrap().len(), 35_000);
}
