//! Posts.

use super::*;

kernel::backend_tests! {
    create_returns_a_draft_with_its_author,
    the_lifecycle_table_row_by_row,
    slugs_are_transliterated_normalized_and_unique,
    every_field_limit_is_a_422_naming_the_field,
    update_changes_only_what_is_present,
    tags_are_unique_by_name_and_slug,
    deleting_posts_and_tags_removes_their_links,
}

async fn create_returns_a_draft_with_its_author(db: TestDb) {
    let c = ctx(db).await;
    let post = c
        .create(
            json!({"title": "Hello", "content": "Body", "excerpt": "Short", "seo_title": "SEO"}),
        )
        .await;
    assert_eq!(post["status"], "draft");
    assert_eq!(post["slug"], "hello");
    assert_eq!(post["content"], "Body");
    assert_eq!(post["excerpt"], "Short");
    assert_eq!(post["seo_title"], "SEO");
    assert_eq!(post["seo_description"], Value::Null);
    assert_eq!(post["published_at"], Value::Null);
    assert_eq!(post["author_id"], 1);
    assert_eq!(post["author_name"], "Ada Admin");
    assert_eq!(post["tags"], json!([]));
    assert!(
        is_utc_micros(&post["created_at"]) && post["created_at"] == post["updated_at"],
        "{post}"
    );
    // Content defaults to empty; a user without a full name is named by their e-mail address.
    let r = c.post("/posts", Some(USER), json!({"title": "Mine"})).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let mine: Value = r.json().await.unwrap();
    assert_eq!(mine["content"], "");
    assert_eq!(mine["author_id"], 3);
    assert_eq!(mine["author_name"], "user@example.com");
    // A draft is not public.
    assert_eq!(
        c.get("/posts/hello", None).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        detail(c.get("/posts/hello", None).await).await,
        "Post not found"
    );
}

async fn the_lifecycle_table_row_by_row(db: TestDb) {
    let c = ctx(db).await;
    // (none) --create--> draft
    let post = c.create_titled("Life").await;
    let id = post["id"].clone();
    assert_eq!(
        (post["status"].as_str(), &post["published_at"]),
        (Some("draft"), &Value::Null)
    );
    // draft --publish--> published, published_at set
    let published = c.publish(&id).await;
    assert_eq!(published["status"], "published");
    assert!(is_utc_micros(&published["published_at"]));
    let first = published["published_at"].clone();
    assert_eq!(c.get("/posts/life", None).await.status(), StatusCode::OK);
    // published --publish--> published, published_at unchanged
    let again = c.publish(&id).await;
    assert_eq!(
        (again["status"].as_str(), &again["published_at"]),
        (Some("published"), &first)
    );
    // any --archive--> archived (published_at kept; no longer public)
    let archived = c.archive(&id).await;
    assert_eq!(
        (archived["status"].as_str(), &archived["published_at"]),
        (Some("archived"), &first)
    );
    assert_eq!(
        c.get("/posts/life", None).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(c.public_slugs("").await, (vec![], 0));
    // archived --publish--> published, published_at set only if never set: kept
    let republished = c.publish(&id).await;
    assert_eq!(
        (republished["status"].as_str(), &republished["published_at"]),
        (Some("published"), &first)
    );
    // archived (never published) --publish--> published_at set now
    let other = c.create_titled("Never published").await;
    let archived = c.archive(&other["id"]).await;
    assert_eq!(
        (archived["status"].as_str(), &archived["published_at"]),
        (Some("archived"), &Value::Null)
    );
    let published = c.publish(&other["id"]).await;
    assert!(is_utc_micros(&published["published_at"]));
    assert!(published["published_at"].as_str() > first.as_str());
    // archive from draft and from archived
    let draft = c.create_titled("Draft").await;
    assert_eq!(c.archive(&draft["id"]).await["status"], "archived");
    assert_eq!(c.archive(&draft["id"]).await["status"], "archived");
    // 404 for unknown posts
    for path in ["/posts/999999/publish", "/posts/999999/archive"] {
        let r = c.post_empty(path, Some(ADMIN)).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(detail(r).await, "Post not found");
    }
}

async fn slugs_are_transliterated_normalized_and_unique(db: TestDb) {
    let c = ctx(db).await;
    assert_eq!(c.create_titled("Café").await["slug"], "cafe");
    assert_eq!(c.create_titled("Привет мир").await["slug"], "privet-mir");
    let cjk = c.create_titled("北京欢迎你").await["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cjk.len() > 3 && cjk.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
        "{cjk}"
    );
    assert_eq!(c.create_titled("!!!").await["slug"], "post");
    assert_eq!(
        c.create(json!({"title": "x", "slug": "  My Custom Slug! "}))
            .await["slug"],
        "my-custom-slug"
    );
    // A derived slug is cut at a dash boundary to 220 characters.
    let long = c.create_titled(&"北".repeat(200)).await["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        long.len() <= 220 && !long.ends_with('-') && long.split('-').all(|w| w == "bei"),
        "{long}"
    );
    assert!(long.len() > 200);
    // A given slug of exactly 220 is kept; 221 is refused, not cut.
    let exact = "a".repeat(220);
    assert_eq!(
        c.create(json!({"title": "x", "slug": exact})).await["slug"],
        exact
    );
    assert_invalid(
        c.post(
            "/posts",
            Some(ADMIN),
            json!({"title": "x", "slug": "b".repeat(221)}),
        )
        .await,
        "slug",
    )
    .await;
    // Collisions: 409 with the contract's text, also for a slug that normalizes to a taken one.
    let r = c
        .post("/posts", Some(ADMIN), json!({"title": "Cafe"}))
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(detail(r).await, "Post slug already exists: cafe");
    let r = c
        .post("/posts", Some(ADMIN), json!({"title": "x", "slug": "CAFÉ"}))
        .await;
    assert_eq!(detail(r).await, "Post slug already exists: cafe");
    // Tags: the same rules, limit 100.
    let tag = c.tag("Ünïcödé Tag").await;
    assert_eq!(tag["slug"], "unicode-tag");
    let r = c
        .post(
            "/tags",
            Some(ADMIN),
            json!({"name": "x", "slug": "c".repeat(101)}),
        )
        .await;
    assert_invalid(r, "slug").await;
    let r = c
        .post("/tags", Some(ADMIN), json!({"name": "北".repeat(80)}))
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let slug = r.json::<Value>().await.unwrap()["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        slug.len() <= 100 && slug.len() > 90 && !slug.ends_with('-'),
        "{slug}"
    );
    // The public page looks the slug up normalized.
    let cafe = c.post_by_slug("cafe").await;
    c.publish(&cafe["id"]).await;
    assert_eq!(
        c.get("/posts/Caf%C3%A9", None).await.status(),
        StatusCode::OK
    );
}

async fn every_field_limit_is_a_422_naming_the_field(db: TestDb) {
    let c = ctx(db).await;
    let limits = [
        ("title", 200),
        ("slug", 220),
        ("excerpt", 500),
        ("seo_title", 200),
        ("seo_description", 320),
        ("hero_image_url", 1024),
    ];
    for (i, (field, max)) in limits.iter().enumerate() {
        // At the limit: accepted (é counts as one character).
        let mut ok = json!({"title": format!("at limit {i}"), "slug": format!("limit-{i}")});
        ok[*field] = json!("é".repeat(*max));
        if *field == "slug" {
            ok[*field] = json!("e".repeat(*max));
        }
        let r = c.post("/posts", Some(ADMIN), ok).await;
        assert_eq!(r.status(), StatusCode::CREATED, "{field}");
        // One over: 422 naming the field, on create and on update.
        let mut over = json!({"title": "over"});
        over[*field] = json!("e".repeat(max + 1));
        assert_invalid(c.post("/posts", Some(ADMIN), over.clone()).await, field).await;
        let id = c.create_titled(&format!("update {i}")).await["id"].clone();
        assert_invalid(
            c.put(&format!("/posts/{id}"), Some(ADMIN), over).await,
            field,
        )
        .await;
    }
    // Title: required, not blank; several failures listed at once.
    assert_invalid(
        c.post("/posts", Some(ADMIN), json!({"content": "x"})).await,
        "title",
    )
    .await;
    assert_invalid(
        c.post("/posts", Some(ADMIN), json!({"title": "   "})).await,
        "title",
    )
    .await;
    let r = c
        .post(
            "/posts",
            Some(ADMIN),
            json!({"title": "", "excerpt": "e".repeat(501)}),
        )
        .await;
    let body: Value = r.json().await.unwrap();
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["title", "excerpt"]);
    // Tags: name 1..80, slug at most 100.
    assert_invalid(
        c.post("/tags", Some(ADMIN), json!({"name": "n".repeat(81)}))
            .await,
        "name",
    )
    .await;
    assert_invalid(
        c.post("/tags", Some(ADMIN), json!({"name": " "})).await,
        "name",
    )
    .await;
    assert_invalid(c.post("/tags", Some(ADMIN), json!({})).await, "name").await;
    assert_eq!(
        c.post("/tags", Some(ADMIN), json!({"name": "n".repeat(80)}))
            .await
            .status(),
        StatusCode::CREATED
    );
    let tag = c.tag("short").await;
    let r = c
        .put(
            &format!("/tags/{}", tag["id"]),
            Some(ADMIN),
            json!({"name": "n".repeat(81)}),
        )
        .await;
    assert_invalid(r, "name").await;
    // Malformed JSON and wrong types are 422s, never 500s.
    let r = c
        .req(reqwest::Method::POST, "/posts", Some(ADMIN))
        .header("content-type", "application/json")
        .body("{\"title\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        c.post("/posts", Some(ADMIN), json!({"title": 5}))
            .await
            .status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let r = c
        .post(
            "/posts",
            Some(ADMIN),
            json!({"title": "t", "tag_slugs": "rust"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

async fn update_changes_only_what_is_present(db: TestDb) {
    let c = ctx(db).await;
    c.tag("Alpha").await;
    c.tag("Beta").await;
    let post = c
        .create(json!({
            "title": "Original", "content": "Body", "excerpt": "Ex", "seo_title": "ST",
            "seo_description": "SD", "hero_image_url": "/h.png", "tag_slugs": ["beta", "alpha"]
        }))
        .await;
    let path = format!("/posts/{}", post["id"]);
    // Tags inside a post are ordered by name.
    let names: Vec<&str> = post["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Alpha", "Beta"]);
    // An empty update changes nothing but updated_at.
    let r = c.put(&path, Some(ADMIN), json!({})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let same: Value = r.json().await.unwrap();
    for key in [
        "title",
        "slug",
        "content",
        "excerpt",
        "seo_title",
        "seo_description",
        "hero_image_url",
        "tags",
        "created_at",
    ] {
        assert_eq!(same[key], post[key], "{key}");
    }
    assert!(same["updated_at"].as_str() > post["updated_at"].as_str());
    // null for title, slug and content is ignored; null for tag_slugs keeps the tags.
    let r = c
        .put(
            &path,
            Some(ADMIN),
            json!({"title": null, "slug": null, "content": null, "tag_slugs": null}),
        )
        .await;
    let kept: Value = r.json().await.unwrap();
    assert_eq!(
        (&kept["title"], &kept["slug"], &kept["content"]),
        (&post["title"], &post["slug"], &post["content"])
    );
    assert_eq!(kept["tags"], post["tags"]);
    // Present-and-null clears each nullable field; the others stay.
    let cleared: Value = c
        .put(&path, Some(ADMIN), json!({"excerpt": null}))
        .await
        .json()
        .await
        .unwrap();
    // Without an excerpt of its own, the post shows one derived from its content.
    assert_eq!(cleared["excerpt"], "Body");
    assert_eq!(cleared["seo_title"], "ST");
    let cleared: Value = c
        .put(
            &path,
            Some(ADMIN),
            json!({"seo_title": null, "seo_description": null, "hero_image_url": null}),
        )
        .await
        .json()
        .await
        .unwrap();
    for key in ["seo_title", "seo_description", "hero_image_url"] {
        assert_eq!(cleared[key], Value::Null, "{key}");
    }
    assert_eq!(cleared["excerpt"], "Body", "still the derived one");
    // Values are set; tag_slugs replaces the set, [] empties it.
    let changed: Value = c
        .put(
            &path,
            Some(ADMIN),
            json!({"title": "New", "content": "New body", "excerpt": "E2", "tag_slugs": ["alpha"]}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (changed["title"].as_str(), changed["content"].as_str()),
        (Some("New"), Some("New body"))
    );
    assert_eq!(changed["excerpt"], "E2");
    assert_eq!(
        changed["slug"], "original",
        "the slug does not follow the title"
    );
    assert_eq!(slugs(&changed["tags"]), ["alpha"]);
    let emptied: Value = c
        .put(&path, Some(ADMIN), json!({"tag_slugs": []}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(emptied["tags"], json!([]));
    // Unknown tags: 422 and nothing changes.
    let r = c
        .put(
            &path,
            Some(ADMIN),
            json!({"title": "Changed?", "tag_slugs": ["alpha", "nope"]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(detail(r).await, "Unknown tag: nope");
    assert_eq!(c.post_by_slug("original").await["title"], "New");
    let r = c
        .post(
            "/posts",
            Some(ADMIN),
            json!({"title": "T", "tag_slugs": ["ghost"]}),
        )
        .await;
    assert_eq!(detail(r).await, "Unknown tag: ghost");
    // Slug changes: normalized; taken → 409; own slug is fine.
    c.create_titled("Taken").await;
    let r = c.put(&path, Some(ADMIN), json!({"slug": "taken"})).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(detail(r).await, "Post slug already exists: taken");
    assert_eq!(
        c.put(&path, Some(ADMIN), json!({"slug": "original"}))
            .await
            .status(),
        StatusCode::OK
    );
    let moved: Value = c
        .put(&path, Some(ADMIN), json!({"slug": "Brand New"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(moved["slug"], "brand-new");
    // Unknown post.
    let r = c
        .put("/posts/999999", Some(ADMIN), json!({"title": "x"}))
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(detail(r).await, "Post not found");
}

async fn tags_are_unique_by_name_and_slug(db: TestDb) {
    let c = ctx(db).await;
    let rust = c.tag("Rust").await;
    assert_eq!(rust["slug"], "rust");
    assert!(is_utc_micros(&rust["created_at"]));
    for (body, slug) in [
        (json!({"name": "rust"}), "rust"),
        (json!({"name": "RUST", "slug": "other"}), "other"),
        (json!({"name": "Different", "slug": "Rust"}), "rust"),
    ] {
        let r = c.post("/tags", Some(ADMIN), body.clone()).await;
        assert_eq!(r.status(), StatusCode::CONFLICT, "{body}");
        assert_eq!(detail(r).await, format!("Tag already exists: {slug}"));
    }
    c.tag("beta").await;
    c.tag("Alpha").await;
    let gamma = c.tag("gamma").await;
    let r = c.get("/tags", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let list: Value = r.json().await.unwrap();
    let names: Vec<&str> = list["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Alpha", "beta", "gamma", "Rust"]);
    assert_eq!(list["total"], 4);
    // Updates: names collide case-insensitively, slugs exactly; null keeps.
    let path = format!("/tags/{}", gamma["id"]);
    let r = c.put(&path, Some(ADMIN), json!({"name": "ALPHA"})).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(detail(r).await, "Tag already exists: gamma");
    let r = c.put(&path, Some(ADMIN), json!({"slug": "beta"})).await;
    assert_eq!(detail(r).await, "Tag already exists: beta");
    let renamed: Value = c
        .put(
            &path,
            Some(ADMIN),
            json!({"name": "Gamma Ray", "slug": null}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (renamed["name"].as_str(), renamed["slug"].as_str()),
        (Some("Gamma Ray"), Some("gamma"))
    );
    let same: Value = c
        .put(&path, Some(ADMIN), json!({"name": "GAMMA RAY"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        same["name"], "GAMMA RAY",
        "a tag may change the case of its own name"
    );
    let r = c
        .put("/tags/999999", Some(ADMIN), json!({"name": "x"}))
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(detail(r).await, "Tag not found");
}

async fn deleting_posts_and_tags_removes_their_links(db: TestDb) {
    let c = ctx(db).await;
    let a = c.tag("A").await;
    c.tag("B").await;
    let one = c
        .create(json!({"title": "One", "tag_slugs": ["a", "b"]}))
        .await;
    let two = c.create(json!({"title": "Two", "tag_slugs": ["a"]})).await;
    // Deleting a post removes it and its links; its tags stay.
    let r = c
        .delete(&format!("/posts/{}", one["id"]), Some(ADMIN))
        .await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert!(r.bytes().await.unwrap().is_empty());
    assert_eq!(slugs(&json!(c.all_posts().await)), ["two"]);
    assert_eq!(
        c.get("/tags", None).await.json::<Value>().await.unwrap()["total"],
        2
    );
    let r = c
        .delete(&format!("/posts/{}", one["id"]), Some(ADMIN))
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(detail(r).await, "Post not found");
    // Deleting a tag removes it from every post.
    let r = c.delete(&format!("/tags/{}", a["id"]), Some(ADMIN)).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(c.post_by_slug("two").await["tags"], json!([]));
    let r = c.delete(&format!("/tags/{}", a["id"]), Some(ADMIN)).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(detail(r).await, "Tag not found");
    // The post with the removed tag can still be deleted.
    assert_eq!(
        c.delete(&format!("/posts/{}", two["id"]), Some(ADMIN))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
}
