//! Export.

use super::*;

kernel::backend_tests! {
    json_export,
    markdown_export,
    export_then_import_gives_identical_posts,
}

/// A few posts covering every field and status.
pub(crate) async fn seed(c: &Ctx) {
    c.tag("Rust").await;
    let r = c
        .post(
            "/tags",
            Some(ADMIN),
            json!({"name": "Web Dev", "slug": "web"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let first = c
        .create(json!({
            "title": "First: \"quoted\" & café",
            "content": "# Heading\n\nBody with --- inside\n---\n\n```yaml\nkey: value\n```\ntrailing  \n",
            "excerpt": "An excerpt\nover two lines",
            "seo_title": "SEO title",
            "seo_description": "SEO description",
            "hero_image_url": "https://example.com/hero.png",
            "tag_slugs": ["web", "rust"]
        }))
        .await;
    c.publish(&first["id"]).await;
    c.create(json!({"title": "Second draft", "content": ""}))
        .await;
    let third = c
        .create(json!({"title": "Третий", "content": "Archived body", "tag_slugs": ["rust"]}))
        .await;
    c.publish(&third["id"]).await;
    c.archive(&third["id"]).await;
    let r = c
        .post(
            "/posts",
            Some(USER),
            json!({"title": "By a user", "content": "x", "excerpt": ""}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
}

const EXPORT_KEYS: [&str; 13] = [
    "title",
    "slug",
    "excerpt",
    "content",
    "status",
    "author_name",
    "created_at",
    "updated_at",
    "published_at",
    "seo_title",
    "seo_description",
    "hero_image_url",
    "tags",
];

/// The keys of the first object of a pretty-printed JSON array, in the order written.
fn first_object_keys(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .take_while(|l| !l.starts_with("  }"))
        .filter_map(|l| l.strip_prefix("    \""))
        .filter_map(|l| l.split_once('"').map(|(k, _)| k.to_owned()))
        .collect()
}

async fn json_export(db: TestDb) {
    let c = ctx(db).await;
    seed(&c).await;
    let r = c.get("/export?format=json", Some(ADMIN)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(
        header("content-disposition").as_deref(),
        Some("attachment; filename=\"blog-export.json\"")
    );
    let text = r.text().await.unwrap();
    assert_eq!(first_object_keys(&text), EXPORT_KEYS);
    let posts: Value = serde_json::from_str(&text).unwrap();
    // Ordered by created_at ascending: the seeding order.
    assert_eq!(
        slugs(&posts),
        ["first-quoted-cafe", "second-draft", "tretii", "by-a-user"]
    );
    let first = &posts[0];
    assert_eq!(first["status"], "published");
    assert_eq!(first["author_name"], "Ada Admin");
    assert_eq!(
        first["tags"],
        json!([{"name": "Rust", "slug": "rust"}, {"name": "Web Dev", "slug": "web"}])
    );
    assert!(is_utc_micros(&first["published_at"]) && is_utc_micros(&first["created_at"]));
    assert!(first.get("id").is_none() && first.get("author_id").is_none());
    assert_eq!(posts[1]["published_at"], Value::Null);
    assert_eq!(posts[1]["excerpt"], Value::Null);
    // status_filter
    let r = c
        .get("/export?format=json&status_filter=archived", Some(ADMIN))
        .await;
    assert_eq!(slugs(&r.json::<Value>().await.unwrap()), ["tretii"]);
    let r = c
        .get("/export?format=json&status_filter=published", Some(ADMIN))
        .await;
    assert_eq!(
        slugs(&r.json::<Value>().await.unwrap()),
        ["first-quoted-cafe"]
    );
    assert_invalid(
        c.get("/export?status_filter=live", Some(ADMIN)).await,
        "status_filter",
    )
    .await;
    assert_invalid(c.get("/export?format=xml", Some(ADMIN)).await, "format").await;
    // An empty blog exports an empty array.
    let empty = ctx(sibling(&c.db).await).await;
    let r = empty.get("/export?format=json", Some(ADMIN)).await;
    assert_eq!(r.json::<Value>().await.unwrap(), json!([]));
}

async fn markdown_export(db: TestDb) {
    let c = ctx(db).await;
    seed(&c).await;
    let r = c.get("/export", Some(ADMIN)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/zip"));
    assert_eq!(
        header("content-disposition").as_deref(),
        Some("attachment; filename=\"blog-export.zip\"")
    );
    let entries = unzip(&r.bytes().await.unwrap());
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "first-quoted-cafe.md",
            "second-draft.md",
            "tretii.md",
            "by-a-user.md"
        ]
    );
    let (_, first) = &entries[0];
    let front: Vec<&str> = first.lines().skip(1).take_while(|l| *l != "---").collect();
    let keys: Vec<&str> = front
        .iter()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('-'))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    assert_eq!(
        keys,
        [
            "title",
            "slug",
            "status",
            "excerpt",
            "author",
            "date",
            "created_at",
            "updated_at",
            "tags",
            "seo_title",
            "seo_description",
            "hero_image_url"
        ]
    );
    assert!(first.starts_with("---\ntitle: "), "{first}");
    let content =
        "# Heading\n\nBody with --- inside\n---\n\n```yaml\nkey: value\n```\ntrailing  \n";
    assert!(first.ends_with(&format!("\n---\n\n{content}")), "{first}");
    // Absent values are left out: the draft has no date, excerpt, author is kept.
    let (_, draft) = &entries[1];
    let draft_keys: Vec<&str> = draft
        .lines()
        .skip(1)
        .take_while(|l| *l != "---")
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    assert_eq!(
        draft_keys,
        [
            "title",
            "slug",
            "status",
            "author",
            "created_at",
            "updated_at"
        ]
    );
    assert!(draft.ends_with("---\n\n"));
    // status_filter applies to the zip too.
    let r = c
        .get("/export?format=markdown&status_filter=draft", Some(ADMIN))
        .await;
    let names: Vec<String> = unzip(&r.bytes().await.unwrap())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["second-draft.md", "by-a-user.md"]);
}

/// The fields an export must preserve (everything but ids).
pub(crate) fn comparable(posts: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = posts
        .iter()
        .map(|p| {
            let mut p = p.clone();
            let obj = p.as_object_mut().unwrap();
            obj.remove("id");
            let tags: Vec<Value> = obj["tags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| json!({"name": t["name"], "slug": t["slug"]}))
                .collect();
            obj.insert("tags".into(), json!(tags));
            p
        })
        .collect();
    out.sort_by_key(|p| p["slug"].as_str().unwrap().to_owned());
    out
}

async fn export_then_import_gives_identical_posts(db: TestDb) {
    let c = ctx(db).await;
    seed(&c).await;
    let original = comparable(&c.all_posts().await);
    assert_eq!(original.len(), 4);
    for (format, file_name) in [
        ("json", "blog-export.json"),
        ("markdown", "blog-export.zip"),
    ] {
        let r = c
            .get(&format!("/export?format={format}"), Some(ADMIN))
            .await;
        let bytes = r.bytes().await.unwrap().to_vec();
        // Into a fresh database.
        let fresh = ctx(sibling(&c.db).await).await;
        let result = fresh.import("", file_name, bytes.clone()).await;
        assert_eq!(
            result,
            json!({"created": 4, "updated": 0, "skipped": 0, "failed": 0, "errors": []}),
            "{format}"
        );
        let mut imported = comparable(&fresh.all_posts().await);
        // Fresh rows belong to the importing admin; the user's post keeps its author name.
        for post in imported.iter_mut() {
            let original_author =
                original.iter().find(|o| o["slug"] == post["slug"]).unwrap()["author_id"].clone();
            post["author_id"] = original_author;
        }
        // Markdown front matter lists tag names only (the contract's format): a tag whose slug
        // was not derived from its name gets the derived slug in a database that lacks it.
        let mut expected = original.clone();
        if format == "markdown" {
            for post in expected.iter_mut() {
                for tag in post["tags"].as_array_mut().unwrap() {
                    if tag["slug"] == "web" {
                        tag["slug"] = json!("web-dev");
                    }
                }
            }
        }
        assert_eq!(imported, expected, "{format}");
        // Into the same database: skipped, or overwritten to the same values.
        let result = c.import("", file_name, bytes.clone()).await;
        assert_eq!(
            (&result["created"], &result["skipped"]),
            (&json!(0), &json!(4))
        );
        let result = c.import("?on_conflict=overwrite", file_name, bytes).await;
        assert_eq!(
            (&result["updated"], &result["failed"]),
            (&json!(4), &json!(0))
        );
        assert_eq!(
            comparable(&c.all_posts().await),
            original,
            "{format} overwrite"
        );
    }
}
