//! Import.

use super::*;
use crate::export::{comparable, seed};

kernel::backend_tests! {
    front_matter_of_static_site_generators,
    zips_with_folders_other_files_and_a_broken_post,
    on_conflict_skip_overwrite_and_fail,
    unreadable_uploads_are_400s,
    zip_bomb_limits,
    uploads_over_the_limit_are_413,
    export_and_import_without_http,
    concurrent_imports_are_bounded,
}

const JEKYLL: &str = r#"---
layout: post
title: "Jekyll Post"
date: 2024-03-10 09:30:00 +0100
categories: news updates
tags: [ruby, static]
author: Jane Doe
excerpt: A Jekyll excerpt
---
Jekyll body.
"#;

const HUGO_YAML: &str = r#"---
title: "Hugo YAML"
slug: hugo-yaml-custom
date: 2024-04-01T10:00:00Z
lastmod: 2024-04-02T10:00:00Z
draft: false
tags: ["go", "hugo"]
summary: "Hugo summary"
description: "Hugo description"
cover:
  image: "/images/cover.png"
  alt: "A cover"
---

Hugo body.
"#;

const HUGO_TOML: &str = r#"+++
title = "Hugo TOML"
date = 2024-05-01T08:00:00Z
draft = true
tags = ["toml", "hugo"]
description = "TOML description"
+++

TOML body.
"#;

const HUGO_JSON: &str = r#"{
  "title": "Hugo JSON",
  "date": "2024-06-01",
  "tags": ["json"],
  "image": "/j.png"
}

JSON body.
"#;

const ASTRO: &str = r#"---
title: 'Astro Post'
description: 'Astro description'
pubDate: 'Jul 08 2022'
updatedDate: '2022-07-09'
heroImage: '/blog-placeholder-3.jpg'
---

Astro body.
"#;

const ELEVENTY: &str = r#"---
title: Eleventy Post
date: 2024-08-01
tags:
  - posts
  - eleventy
description: Eleventy description
---
Eleventy body.
"#;

const UNTITLED: &str = "# A Heading Title\n\nNo front matter at all.\n";

async fn front_matter_of_static_site_generators(db: TestDb) {
    let c = ctx(db).await;
    let files = [
        ("2024-03-10-jekyll-post.md", JEKYLL),
        ("hugo-yaml.md", HUGO_YAML),
        ("hugo-toml.md", HUGO_TOML),
        ("hugo-json.md", HUGO_JSON),
        ("astro-post.md", ASTRO),
        ("eleventy-post.markdown", ELEVENTY),
        ("untitled-note.MD", UNTITLED),
    ];
    for (name, text) in files {
        let result = c.import("", name, text.as_bytes().to_vec()).await;
        assert_eq!(result["created"], 1, "{name}: {result}");
    }
    let tags = |p: &Value| slugs(&p["tags"]);
    let jekyll = c.post_by_slug("jekyll-post").await;
    assert_eq!(jekyll["title"], "Jekyll Post");
    assert_eq!(jekyll["status"], "published");
    assert_eq!(jekyll["published_at"], "2024-03-10T08:30:00.000000Z");
    assert_eq!(jekyll["author_name"], "Jane Doe");
    assert_eq!(jekyll["excerpt"], "A Jekyll excerpt");
    assert_eq!(jekyll["content"], "Jekyll body.\n");
    assert_eq!(tags(&jekyll), ["news", "ruby", "static", "updates"]);
    assert_eq!(jekyll["author_id"], 1, "imported by the admin");

    let hugo = c.post_by_slug("hugo-yaml-custom").await;
    assert_eq!(hugo["status"], "published");
    assert_eq!(hugo["published_at"], "2024-04-01T10:00:00.000000Z");
    assert_eq!(hugo["updated_at"], "2024-04-02T10:00:00.000000Z");
    assert_eq!(hugo["excerpt"], "Hugo summary");
    assert_eq!(hugo["seo_description"], "Hugo description");
    assert_eq!(hugo["hero_image_url"], "/images/cover.png");
    assert_eq!(hugo["content"], "Hugo body.\n");
    assert_eq!(
        hugo["author_name"], "Ada Admin",
        "no author in the file: the importer"
    );
    assert_eq!(tags(&hugo), ["go", "hugo"]);

    let toml = c.post_by_slug("hugo-toml").await;
    assert_eq!(toml["status"], "draft");
    assert_eq!(toml["published_at"], "2024-05-01T08:00:00.000000Z");
    assert_eq!(
        (toml["excerpt"].as_str(), toml["seo_description"].as_str()),
        (Some("TOML description"), Some("TOML description"))
    );
    assert_eq!(toml["content"], "TOML body.\n");
    assert_eq!(tags(&toml), ["hugo", "toml"]);

    let json_post = c.post_by_slug("hugo-json").await;
    assert_eq!(
        (json_post["title"].as_str(), json_post["status"].as_str()),
        (Some("Hugo JSON"), Some("published"))
    );
    assert_eq!(json_post["published_at"], "2024-06-01T00:00:00.000000Z");
    assert_eq!(json_post["hero_image_url"], "/j.png");
    assert_eq!(json_post["content"], "JSON body.\n");

    let astro = c.post_by_slug("astro-post").await;
    assert_eq!(astro["status"], "published");
    assert_eq!(astro["published_at"], "2022-07-08T00:00:00.000000Z");
    assert_eq!(astro["updated_at"], "2022-07-09T00:00:00.000000Z");
    assert_eq!(astro["hero_image_url"], "/blog-placeholder-3.jpg");
    assert_eq!(astro["excerpt"], "Astro description");

    let eleventy = c.post_by_slug("eleventy-post").await;
    assert_eq!(eleventy["status"], "published");
    assert_eq!(eleventy["published_at"], "2024-08-01T00:00:00.000000Z");
    assert_eq!(tags(&eleventy), ["eleventy", "posts"]);

    let untitled = c.post_by_slug("untitled-note").await;
    assert_eq!(untitled["title"], "A Heading Title");
    assert_eq!(untitled["content"], "No front matter at all.\n");
    assert_eq!(untitled["status"], "draft");

    // A JSON array in the reference implementation's shape: tags as strings, tag_slugs, aliases.
    let reference = json!([{
        "title": "From JSON", "slug": "from-json", "excerpt": null, "content": "Body", "status": "draft",
        "author_name": "Ref Author", "created_at": "2023-01-01T00:00:00", "updated_at": "2023-01-02T00:00:00Z",
        "published_at": null, "tags": ["Hugo", "New Tag"], "tag_slugs": ["extra"]
    }]);
    let result = c
        .import("", "ref.json", serde_json::to_vec(&reference).unwrap())
        .await;
    assert_eq!(result["created"], 1, "{result}");
    let from_json = c.post_by_slug("from-json").await;
    assert_eq!(tags(&from_json), ["extra", "hugo", "new-tag"]);
    assert_eq!(from_json["author_name"], "Ref Author");
    assert_eq!(from_json["status"], "draft");
    assert_eq!(from_json["created_at"], "2023-01-01T00:00:00.000000Z");
    assert_eq!(from_json["updated_at"], "2023-01-02T00:00:00.000000Z");

    // The published imports are in the public list, newest publication first.
    let (public, total) = c.public_slugs("").await;
    assert_eq!(
        public,
        [
            "eleventy-post",
            "hugo-json",
            "hugo-yaml-custom",
            "jekyll-post",
            "astro-post"
        ]
    );
    assert_eq!(total, 5);
    // Tags were created once each (hugo is shared).
    let r = c.get("/tags", None).await.json::<Value>().await.unwrap();
    assert_eq!(r["total"], 12);
}

async fn zips_with_folders_other_files_and_a_broken_post(db: TestDb) {
    let c = ctx(db).await;
    let png: &[u8] = &[0x89, b'P', b'N', b'G', 0xff, 0xfe, 0x00];
    let zip = zip_of(&[
        ("site/", b""),
        ("site/content/", b""),
        (
            "site/content/posts/2024/2024-01-02-nested-deep.md",
            JEKYLL.as_bytes(),
        ),
        (
            "site/content/posts/bundle-post/index.md",
            HUGO_TOML.as_bytes(),
        ),
        ("site/content/posts/_index.md", b"---\ntitle: Posts\n---\n"),
        ("site/static/images/cover.png", png),
        ("site/notes.txt", b"not a post"),
        ("__MACOSX/site/._x.md", png),
        (
            "site/content/posts/broken.md",
            b"---\ntitle: [unclosed\n---\nBody\n",
        ),
        (
            "site/content/posts/too-long.markdown",
            format!("---\ntitle: {}\n---\n", "x".repeat(201)).as_bytes(),
        ),
        ("top.markdown", ELEVENTY.as_bytes()),
        ("site/../../escape.md", JEKYLL.as_bytes()),
    ]);
    let result = c.import("", "site.ZIP", zip).await;
    assert_eq!(
        (&result["created"], &result["failed"], &result["skipped"]),
        (&json!(3), &json!(3), &json!(0)),
        "{result}"
    );
    let escape = &result["errors"][2];
    assert_eq!(escape["file"], "site/../../escape.md", "{result}");
    assert!(
        escape["message"]
            .as_str()
            .unwrap()
            .contains("leaves the archive"),
        "{result}"
    );
    let errors = result["errors"].as_array().unwrap();
    assert_eq!(errors[0]["file"], "site/content/posts/broken.md");
    assert_eq!(errors[0]["slug"], "broken");
    assert!(
        errors[0]["message"].as_str().unwrap().contains("YAML"),
        "{result}"
    );
    assert_eq!(errors[1]["file"], "site/content/posts/too-long.markdown");
    assert_eq!(errors[1]["slug"], "too-long");
    assert_eq!(errors[1]["message"], "title must be 1 to 200 characters");
    let mut all = slugs(&json!(c.all_posts().await));
    all.sort();
    assert_eq!(
        all,
        ["bundle-post", "nested-deep", "top"],
        "the file name gives the slug"
    );
    assert_eq!(
        c.post_by_slug("nested-deep").await["published_at"],
        "2024-03-10T08:30:00.000000Z",
        "a date key wins over the file name"
    );
}

async fn on_conflict_skip_overwrite_and_fail(db: TestDb) {
    let c = ctx(db).await;
    let existing = c
        .create(json!({"title": "Hello", "content": "Original", "excerpt": "keep?"}))
        .await;
    let hello = "---\ntitle: Hello Again\nstatus: published\ndate: 2024-01-01\n---\nReplaced\n";
    let zip = zip_of(&[
        ("a/new-one.md", b"# New One\n"),
        ("a/hello.md", hello.as_bytes()),
    ]);
    // skip (the default)
    let result = c
        .import("?on_conflict=skip", "posts.zip", zip.clone())
        .await;
    assert_eq!(
        result,
        json!({"created": 1, "updated": 0, "skipped": 1, "failed": 0, "errors": []})
    );
    let stored = c.post_by_slug("hello").await;
    assert_eq!(
        (stored["title"].as_str(), stored["content"].as_str()),
        (Some("Hello"), Some("Original"))
    );
    // overwrite: every field of the incoming post; author and created_at only when given.
    let result = c
        .import("?on_conflict=overwrite", "posts.zip", zip.clone())
        .await;
    assert_eq!(
        result,
        json!({"created": 0, "updated": 2, "skipped": 0, "failed": 0, "errors": []})
    );
    let stored = c.post_by_slug("hello").await;
    assert_eq!(stored["title"], "Hello Again");
    assert_eq!(stored["content"], "Replaced\n");
    assert_eq!(stored["status"], "published");
    assert_eq!(stored["published_at"], "2024-01-01T00:00:00.000000Z");
    assert_eq!(
        stored["excerpt"], "Replaced",
        "the file's (absent) excerpt replaced the stored one: derived from the content"
    );
    assert_eq!(
        (&stored["author_name"], &stored["created_at"]),
        (&existing["author_name"], &existing["created_at"])
    );
    assert_eq!(stored["id"], existing["id"]);
    // fail: 409, the result so far, and nothing of the batch kept.
    let zip = zip_of(&[
        ("brand-new.md", b"# Brand New\n"),
        ("hello.md", hello.as_bytes()),
        ("later.md", b"# Later\n"),
    ]);
    let r = c
        .upload("?on_conflict=fail", Some(ADMIN), "batch.zip", zip)
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"], "Post slug already exists: hello");
    assert_eq!(
        (
            &body["created"],
            &body["updated"],
            &body["skipped"],
            &body["failed"]
        ),
        (&json!(1), &json!(0), &json!(0), &json!(1))
    );
    assert_eq!(
        body["errors"],
        json!([{"file": "hello.md", "slug": "hello", "message": "Post slug already exists: hello"}])
    );
    let mut all = slugs(&json!(c.all_posts().await));
    all.sort();
    assert_eq!(all, ["hello", "new-one"], "brand-new was rolled back");
    // fail without a conflict imports everything.
    let result = c
        .import(
            "?on_conflict=fail",
            "x.zip",
            zip_of(&[("fresh.md", b"# Fresh\n")]),
        )
        .await;
    assert_eq!(result["created"], 1);
    // Per-post failures do not abort a fail batch.
    let result = c
        .import(
            "?on_conflict=fail",
            "y.zip",
            zip_of(&[
                ("bad.md", b"---\nstatus: live\n---\n"),
                ("good.md", b"# Good\n"),
            ]),
        )
        .await;
    assert_eq!(
        (&result["created"], &result["failed"]),
        (&json!(1), &json!(1))
    );
    // Any other value: 422.
    let r = c
        .upload(
            "?on_conflict=replace",
            Some(ADMIN),
            "x.md",
            b"# X\n".to_vec(),
        )
        .await;
    assert_invalid(r, "on_conflict").await;
}

async fn unreadable_uploads_are_400s(db: TestDb) {
    let c = ctx(db).await;
    let bad = |file: &'static str, bytes: Vec<u8>| {
        let c = &c;
        async move {
            let r = c.upload("", Some(ADMIN), file, bytes).await;
            assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{file}");
            detail(r).await.as_str().unwrap().to_owned()
        }
    };
    assert_eq!(
        bad("notes.txt", b"hello".to_vec()).await,
        "Unsupported file type. Use .md, .zip, or .json."
    );
    assert_eq!(
        bad("noextension", b"hello".to_vec()).await,
        "Unsupported file type. Use .md, .zip, or .json."
    );
    assert_eq!(
        bad("bad.md", vec![b'#', b' ', 0xff, 0xfe]).await,
        "Invalid UTF-8 in bad.md"
    );
    assert_eq!(
        bad("bad.json", vec![b'[', 0xff, b']']).await,
        "Invalid UTF-8 in bad.json"
    );
    assert!(
        bad("posts.json", b"[{\"title\": ".to_vec())
            .await
            .starts_with("Invalid JSON in posts.json: ")
    );
    assert_eq!(
        bad("one.json", b"{\"title\": \"x\"}".to_vec()).await,
        "Expected a JSON array of posts in one.json"
    );
    assert!(
        bad("corrupt.zip", b"PK\x03\x04 definitely not a zip".to_vec())
            .await
            .starts_with("Invalid zip file: ")
    );
    let zip = zip_of(&[
        ("ok.md", b"# Fine\n"),
        ("dir/latin1.md", &[b'#', b' ', 0xe9, b'\n']),
    ]);
    assert_eq!(
        bad("mixed.zip", zip).await,
        "Invalid UTF-8 in dir/latin1.md"
    );
    // Nothing of a refused upload lands.
    assert_eq!(c.all_posts().await.len(), 0);
    // A JSON array with a broken element: that element fails, the rest land.
    let posts = json!([{"title": "Good one", "status": "published"}, "not a post", {"title": "x", "excerpt": "e".repeat(501)}]);
    let result = c
        .import("", "posts.json", serde_json::to_vec(&posts).unwrap())
        .await;
    assert_eq!(
        (&result["created"], &result["failed"]),
        (&json!(1), &json!(2))
    );
    assert_eq!(result["errors"][0]["file"], "posts.json[1]");
    assert_eq!(
        result["errors"][1]["message"],
        "excerpt must be at most 500 characters"
    );
    // No file, or not multipart: 422.
    let form = reqwest::multipart::Form::new().text("note", "no file here");
    let r = c
        .req(reqwest::Method::POST, "/import", Some(ADMIN))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_invalid(r, "file").await;
    let r = c.post("/import", Some(ADMIN), json!({"file": "x"})).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

async fn zip_bomb_limits(db: TestDb) {
    let small = BlogConfig {
        import_max_entries: 3,
        import_max_unpacked_bytes: 64 * 1024,
        ..BlogConfig::default()
    };
    let other = sibling(&db).await;
    let c = start(db, small, true).await;
    let bad = |file: &'static str, bytes: Vec<u8>| {
        let c = &c;
        async move {
            let r = c.upload("", Some(ADMIN), file, bytes).await;
            assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{file}");
            detail(r).await.as_str().unwrap().to_owned()
        }
    };
    // Entries: folders and ignored files count.
    let four = zip_of(&[
        ("a/", b""),
        ("a/one.md", b"# One\n"),
        ("a/x.png", b"png"),
        ("a/two.md", b"# Two\n"),
    ]);
    let message = bad("four.zip", four).await;
    assert!(
        message.contains("BLOG_IMPORT_MAX_ENTRIES") && message.contains('3'),
        "{message}"
    );
    let three = zip_of(&[
        ("a/one.md", b"# One\n"),
        ("a/x.png", b"png"),
        ("a/two.md", b"# Two\n"),
    ]);
    assert_eq!(c.import("", "three.zip", three).await["created"], 2);
    // Unpacked size, in all.
    let half = format!("# Big\n{}", "word ".repeat(7000));
    let big = zip_of(&[("one.md", half.as_bytes()), ("two.md", half.as_bytes())]);
    let message = bad("big.zip", big).await;
    assert!(
        message.contains("BLOG_IMPORT_MAX_UNPACKED_BYTES") && message.contains("65536"),
        "{message}"
    );
    assert_eq!(
        c.all_posts().await.len(),
        2,
        "nothing of a refused zip lands"
    );
    // Ratio: a 4 MiB entry of spaces compresses about a thousand to one.
    let c = ctx(other).await;
    let bomb = format!("# Bomb\n{}", " ".repeat(4 * 1024 * 1024));
    let r = c
        .upload(
            "",
            Some(ADMIN),
            "bomb.zip",
            zip_of(&[("bomb.md", bomb.as_bytes())]),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let message = detail(r).await.as_str().unwrap().to_owned();
    assert!(
        message.contains("BLOG_IMPORT_MAX_RATIO") && message.contains("bomb.md"),
        "{message}"
    );
}

async fn uploads_over_the_limit_are_413(db: TestDb) {
    let config = BlogConfig {
        import_max_bytes: 1024,
        ..BlogConfig::default()
    };
    let c = start(db, config, true).await;
    let ok = format!("# Fits\n{}", "x".repeat(900));
    assert_eq!(c.import("", "fits.md", ok.into_bytes()).await["created"], 1);
    for size in [1025, 4096, 256 * 1024] {
        let text = format!("# Too big\n{}", "x".repeat(size));
        let r = c.upload("", Some(ADMIN), "big.md", text.into_bytes()).await;
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE, "{size}");
        let message = detail(r).await.as_str().unwrap().to_owned();
        assert!(
            message.contains("1024") && message.contains("BLOG_IMPORT_MAX_BYTES"),
            "{message}"
        );
    }
    assert_eq!(c.all_posts().await.len(), 1);
}

async fn export_and_import_without_http(db: TestDb) {
    use blog_core::{Author, ExportFormat, ExportOptions, ImportOptions, OnConflict};
    let c = ctx(db).await;
    seed(&c).await;
    assert_eq!(
        c.module.health().await.status,
        kernel::health::HealthStatus::Healthy
    );
    let service = c.module.service();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.zip");
    let options = ExportOptions {
        format: ExportFormat::Markdown,
        status: None,
    };
    assert_eq!(service.export_to_path(options, &path).await.unwrap(), 4);
    let bytes = service
        .export_bytes(ExportOptions {
            format: ExportFormat::Json,
            status: None,
        })
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&bytes)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // Import into a fresh database from the file, with a progress hook.
    let fresh = ctx(sibling(&c.db).await).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = seen.clone();
    let options = ImportOptions {
        on_conflict: OnConflict::Fail,
        author: Author::anonymous(),
        progress: Some(Arc::new(move |p| {
            hook.lock().unwrap().push((p.processed, p.total))
        })),
        slot: None,
    };
    let result = fresh
        .module
        .service()
        .import_path(&path, options)
        .await
        .unwrap();
    assert_eq!((result.created, result.failed), (4, 0));
    assert_eq!(*seen.lock().unwrap(), [(1, 4), (2, 4), (3, 4), (4, 4)]);
    assert_eq!(comparable(&fresh.all_posts().await).len(), 4);
    let again = fresh
        .module
        .service()
        .import_path(&path, ImportOptions::default())
        .await
        .unwrap();
    assert_eq!(again.skipped, 4);
    let missing = fresh
        .module
        .service()
        .import_path(&dir.path().join("nope.zip"), ImportOptions::default())
        .await;
    assert!(matches!(missing, Err(blog_core::BlogError::Upload(_))));
}

/// With every import slot taken (here one, by an upload still arriving), another import answers
/// 503 with `Retry-After` at once, without reading its upload; the slot frees when the first ends.
async fn concurrent_imports_are_bounded(db: TestDb) {
    let config = BlogConfig {
        import_concurrency: 1,
        ..BlogConfig::default()
    };
    let c = start(db, config, true).await;
    let boundary = "slowboundary";
    // An upload that sends its first part and then waits for `sender`.
    let slow_upload = || {
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
        let head = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.md\"\r\n\r\n---\ntitle: Slow\n---\n"
        );
        let stream = futures_util::stream::unfold(receiver, |mut r| async move {
            r.recv().await.map(|item| (item, r))
        });
        let request = c
            .req(reqwest::Method::POST, "/import", Some(ADMIN))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(reqwest::Body::wrap_stream(stream))
            .send();
        let _ = sender.try_send(Ok(head.into_bytes()));
        (sender, tokio::spawn(request))
    };
    let (mut sender, mut slow) = slow_upload();
    let mut refused = None;
    for _ in 0..200 {
        let r = c
            .upload("", Some(ADMIN), "quick.md", b"# Quick\n".to_vec())
            .await;
        if r.status() == StatusCode::SERVICE_UNAVAILABLE {
            refused = Some(r);
            break;
        }
        if slow.is_finished() {
            // The quick upload held the slot when the slow one arrived: start the slow one again.
            (sender, slow) = slow_upload();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let refused = refused.expect("a second import is refused while the first runs");
    assert_eq!(refused.headers()["retry-after"], "5");
    assert!(
        detail(refused)
            .await
            .as_str()
            .unwrap()
            .contains("Too many imports")
    );
    sender
        .send(Ok(format!("Body.\r\n--{boundary}--\r\n").into_bytes()))
        .await
        .unwrap();
    drop(sender);
    let slow = slow.await.unwrap().unwrap();
    assert_eq!(slow.status(), StatusCode::OK);
    let r = c
        .upload("", Some(ADMIN), "after.md", b"# After\n".to_vec())
        .await;
    assert_eq!(r.status(), StatusCode::OK);
}
