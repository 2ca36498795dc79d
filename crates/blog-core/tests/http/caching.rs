//! HTTP caching of the public reads: strong ETags, If-None-Match (lists, weak tags, `*`) answered
//! with 304 and no body, Cache-Control, and Last-Modified on posts.

use super::*;

kernel::backend_tests! {
    every_public_read_has_validators_and_answers_304,
    a_write_changes_the_tag_and_a_stale_tag_gets_the_body,
    cache_control_is_a_setting,
    a_304_comes_from_the_read_cache_without_the_database,
}

/// The public reads of a blog with one published, tagged post.
const READS: [&str; 7] = [
    "/posts",
    "/posts?tag=rust",
    "/posts/cached",
    "/tags",
    "/feed.atom",
    "/feed.rss",
    "/sitemap.xml",
];

async fn with_a_post(c: &Ctx) -> Value {
    c.tag("Rust").await;
    let post = c
        .create(json!({"title": "Cached", "content": "Body", "tag_slugs": ["rust"]}))
        .await;
    c.publish(&post["id"]).await
}

async fn conditional(c: &Ctx, path: &str, if_none_match: &str) -> reqwest::Response {
    c.req(reqwest::Method::GET, path, None)
        .header("If-None-Match", if_none_match)
        .send()
        .await
        .unwrap()
}

fn etag_of(r: &reqwest::Response) -> String {
    r.headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn every_public_read_has_validators_and_answers_304(db: TestDb) {
    let c = ctx(db).await;
    let post = with_a_post(&c).await;
    for path in READS {
        let r = c.get(path, None).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let etag = etag_of(&r);
        // Strong (no W/), quoted, 128 bits in hex.
        assert!(
            etag.len() == 34 && etag.starts_with('"') && etag.ends_with('"'),
            "{path}: {etag:?}"
        );
        assert_eq!(
            r.headers()["cache-control"],
            "public, max-age=0, must-revalidate",
            "{path}"
        );
        let last_modified = r.headers().get("last-modified").cloned();
        assert_eq!(last_modified.is_some(), path == "/posts/cached", "{path}");
        let body = r.bytes().await.unwrap();
        assert!(!body.is_empty());
        // The same body again: the same tag.
        assert_eq!(etag_of(&c.get(path, None).await), etag, "{path}");
        let opaque = etag.trim_matches('"');
        for matching in [
            etag.clone(),
            format!("W/{etag}"),
            format!("\"other\", {etag}"),
            format!("W/\"a,b\",W/{etag} , \"z\""),
            "*".to_owned(),
        ] {
            let r = conditional(&c, path, &matching).await;
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path} {matching}");
            assert_eq!(etag_of(&r), etag, "{path}");
            assert_eq!(
                r.headers()["cache-control"],
                "public, max-age=0, must-revalidate"
            );
            assert_eq!(r.headers().get("last-modified").cloned(), last_modified);
            assert!(
                r.bytes().await.unwrap().is_empty(),
                "{path}: a 304 has no body"
            );
        }
        for other in [
            "\"other\"".to_owned(),
            opaque.to_owned(), // not quoted: not an entity tag
            format!("\"{}\"", &opaque[1..]),
            "\"\"".to_owned(),
            format!("{etag} junk"),
            "garbage, \"x".to_owned(),
        ] {
            let r = conditional(&c, path, &other).await;
            if other.ends_with(" junk") {
                // The field is invalid after the matching tag: a match was already found.
                assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path} {other}");
                continue;
            }
            assert_eq!(r.status(), StatusCode::OK, "{path} {other}");
            assert_eq!(r.bytes().await.unwrap(), body, "{path}");
        }
    }
    // Last-Modified is the post's updated_at, as an HTTP date.
    let r = c.get("/posts/cached", None).await;
    let updated: chrono::DateTime<chrono::Utc> =
        post["updated_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        r.headers()["last-modified"],
        updated
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string()
            .as_str()
    );
    // Not found: no validators, and If-None-Match: * does not turn it into a 304.
    let r = conditional(&c, "/posts/nothing-here", "*").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(r.headers().get("etag").is_none());
    // The editor list is not cached.
    let r = c.get("/admin/posts", Some(ADMIN)).await;
    assert!(r.headers().get("etag").is_none());
}

async fn a_write_changes_the_tag_and_a_stale_tag_gets_the_body(db: TestDb) {
    let c = ctx(db).await;
    let post = with_a_post(&c).await;
    let mut before = Vec::new();
    for path in READS {
        before.push(etag_of(&c.get(path, None).await));
    }
    let r = c
        .put(
            &format!("/posts/{}", post["id"]),
            Some(ADMIN),
            json!({"title": "Cached, renamed"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    for (path, old) in READS.iter().zip(&before) {
        let r = conditional(&c, path, old).await;
        if *path == "/tags" {
            // It shows no post: unchanged.
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path}");
            continue;
        }
        if *path == "/sitemap.xml" {
            // It shows the time of the change to the second only: it may not have changed.
            continue;
        }
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let now = etag_of(&r);
        assert_ne!(&now, old, "{path}");
        assert!(!r.bytes().await.unwrap().is_empty());
        assert_eq!(
            conditional(&c, path, &now).await.status(),
            StatusCode::NOT_MODIFIED
        );
    }
}

async fn cache_control_is_a_setting(db: TestDb) {
    let config = BlogConfig {
        cache_control: "public, max-age=300".into(),
        ..BlogConfig::default()
    };
    let c = start(db, config, true).await;
    with_a_post(&c).await;
    for path in READS {
        let r = c.get(path, None).await;
        assert_eq!(
            r.headers()["cache-control"],
            "public, max-age=300",
            "{path}"
        );
        let r = conditional(&c, path, &etag_of(&r)).await;
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(r.headers()["cache-control"], "public, max-age=300");
    }
}

/// With the read cache on, a revalidation is answered from the cached entry (its tag was made with
/// the body): while every database connection is held, a matching `If-None-Match` still gets its
/// 304 at once. (Several tries: the entry lives 900 ms, and a slow machine may let one expire.)
async fn a_304_comes_from_the_read_cache_without_the_database(db: TestDb) {
    if !db.read_cache {
        return; // READ_CACHE=false: every request reads the database, by design
    }
    let c = ctx(db).await;
    with_a_post(&c).await;
    let mut from_cache = false;
    for _ in 0..5 {
        let etag = etag_of(&c.get("/posts/cached", None).await);
        let held = kernel::testing::hold_every_connection(&c.pool).await;
        let lock = kernel::testing::WriteLock::take_all(&c.db.url, "blog_posts").await;
        let answer = c
            .req(reqwest::Method::GET, "/posts/cached", None)
            .header("If-None-Match", &etag)
            .timeout(std::time::Duration::from_millis(500))
            .send()
            .await;
        lock.release().await;
        drop(held);
        if let Ok(r) = answer {
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
            from_cache = true;
            break;
        }
    }
    assert!(from_cache, "no 304 came without the database");
}
