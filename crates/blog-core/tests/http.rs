//! The blog module over real HTTP, on SQLite and (with TEST_DATABASE_URL) PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Cursor, Read, Write};
use std::sync::Arc;

use blog_core::{BlogConfig, BlogModule, Protection};
use kernel::db::Backend;
use kernel::identity::AuthFailure;
use kernel::module::{BuildModule, Deps, Module};
use kernel::testing::{TestDb, TestServer, spawn_modules};
use kernel::{Authenticator, Principal, Role};
use reqwest::StatusCode;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Harness

/// Identity plumbing for the tests: fixed tokens mapped to principals with roles.
struct StubAuthenticator;

const ADMIN: &str = "admin-token";
const MODERATOR: &str = "moderator-token";
const USER: &str = "user-token";
const INACTIVE: &str = "inactive-token";

#[async_trait::async_trait]
impl Authenticator for StubAuthenticator {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let principal = |user_id, email: &str, full_name: Option<&str>, role| Principal {
            user_id,
            email: email.to_owned(),
            full_name: full_name.map(str::to_owned),
            role,
            is_active: true,
        };
        match token {
            ADMIN => Ok(principal(
                1,
                "ada@example.com",
                Some("Ada Admin"),
                Role::Admin,
            )),
            MODERATOR => Ok(principal(
                2,
                "mo@example.com",
                Some("Mo Moderator"),
                Role::Moderator,
            )),
            USER => Ok(principal(3, "user@example.com", None, Role::User)),
            INACTIVE => Err(AuthFailure::Inactive),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

struct Ctx {
    server: TestServer,
    module: Arc<BlogModule>,
    db: TestDb,
}

async fn start(db: TestDb, config: BlogConfig, auth: bool) -> Ctx {
    let pool = db.migrated_pool(&[blog_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool).unwrap();
    if auth {
        deps = deps.with_authenticator(Arc::new(StubAuthenticator));
    }
    let module = Arc::new(BlogModule::build(config, &deps).await.unwrap());
    let server = spawn_modules(vec![module.clone()]);
    Ctx { server, module, db }
}

/// The default set-up: auth mounted, `BLOG_PROTECTION` unset (so `basic`).
async fn ctx(db: TestDb) -> Ctx {
    start(db, BlogConfig::default(), true).await
}

async fn ctx_with(db: TestDb, protection: Protection) -> Ctx {
    let config = BlogConfig {
        protection: Some(protection),
        ..BlogConfig::default()
    };
    start(db, config, true).await
}

/// Another fresh database on the same backend.
async fn sibling(db: &TestDb) -> TestDb {
    match db.backend {
        Backend::Sqlite => TestDb::sqlite().await,
        Backend::Postgres => TestDb::postgres().await.expect("TEST_DATABASE_URL"),
    }
}

impl Ctx {
    fn url(&self, path: &str) -> String {
        self.server.url(&format!("/api/v1/blog{path}"))
    }

    fn req(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let req = self.server.client.request(method, self.url(path));
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        self.req(reqwest::Method::GET, path, token)
            .send()
            .await
            .unwrap()
    }

    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> reqwest::Response {
        self.req(reqwest::Method::POST, path, token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn post_empty(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        self.req(reqwest::Method::POST, path, token)
            .send()
            .await
            .unwrap()
    }

    async fn put(&self, path: &str, token: Option<&str>, body: Value) -> reqwest::Response {
        self.req(reqwest::Method::PUT, path, token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn delete(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        self.req(reqwest::Method::DELETE, path, token)
            .send()
            .await
            .unwrap()
    }

    /// Uploads `bytes` as the multipart field `file` named `file_name`.
    async fn upload(
        &self,
        query: &str,
        token: Option<&str>,
        file_name: &str,
        bytes: Vec<u8>,
    ) -> reqwest::Response {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(file_name.to_owned());
        let form = reqwest::multipart::Form::new().part("file", part);
        self.req(reqwest::Method::POST, &format!("/import{query}"), token)
            .multipart(form)
            .send()
            .await
            .unwrap()
    }

    /// Imports as the admin and expects 200; the ImportResult.
    async fn import(&self, query: &str, file_name: &str, bytes: Vec<u8>) -> Value {
        let r = self.upload(query, Some(ADMIN), file_name, bytes).await;
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// Creates a post as the admin; the post.
    async fn create(&self, body: Value) -> Value {
        let r = self.post("/posts", Some(ADMIN), body).await;
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body
    }

    async fn create_titled(&self, title: &str) -> Value {
        self.create(json!({"title": title})).await
    }

    async fn tag(&self, name: &str) -> Value {
        let r = self.post("/tags", Some(ADMIN), json!({"name": name})).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        r.json().await.unwrap()
    }

    async fn publish(&self, id: &Value) -> Value {
        let r = self
            .post_empty(&format!("/posts/{id}/publish"), Some(ADMIN))
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.unwrap()
    }

    async fn archive(&self, id: &Value) -> Value {
        let r = self
            .post_empty(&format!("/posts/{id}/archive"), Some(ADMIN))
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.unwrap()
    }

    /// Every post through the editor list (100 per page is enough here).
    async fn all_posts(&self) -> Vec<Value> {
        let r = self.get("/admin/posts?page_size=100", Some(ADMIN)).await;
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        body["posts"].as_array().unwrap().clone()
    }

    async fn post_by_slug(&self, slug: &str) -> Value {
        self.all_posts()
            .await
            .into_iter()
            .find(|p| p["slug"] == slug)
            .unwrap_or_else(|| panic!("no post {slug}"))
    }

    async fn public_slugs(&self, query: &str) -> (Vec<String>, i64) {
        let r = self.get(&format!("/posts{query}"), None).await;
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        (slugs(&body["posts"]), body["total"].as_i64().unwrap())
    }
}

fn slugs(posts: &Value) -> Vec<String> {
    posts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["slug"].as_str().unwrap().to_owned())
        .collect()
}

async fn detail(r: reqwest::Response) -> Value {
    r.json::<Value>().await.unwrap()["detail"].clone()
}

/// Asserts a 422 that names `field` in its detail and in `errors`.
async fn assert_invalid(r: reqwest::Response, field: &str) {
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = r.json().await.unwrap();
    let detail = body["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains(field), "{field}: {body}");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .map(|e| e.iter().filter_map(|e| e["field"].as_str()).collect())
        .unwrap_or_default();
    assert!(fields.contains(&field), "{field}: {body}");
}

fn is_utc_micros(v: &Value) -> bool {
    let s = v.as_str().unwrap_or_default();
    s.ends_with('Z') && s.len() == "2026-11-21T15:27:40.254637Z".len()
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        if name.ends_with('/') {
            zip.add_directory(*name, options).unwrap();
        } else {
            zip.start_file(*name, options).unwrap();
            zip.write_all(data).unwrap();
        }
    }
    zip.finish().unwrap().into_inner()
}

fn unzip(bytes: &[u8]) -> Vec<(String, String)> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut entry = archive.by_index(i).unwrap();
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            (entry.name().unwrap().into_owned(), text)
        })
        .collect()
}

kernel::backend_tests! {
    create_returns_a_draft_with_its_author,
    the_lifecycle_table_row_by_row,
    slugs_are_transliterated_normalized_and_unique,
    every_field_limit_is_a_422_naming_the_field,
    update_changes_only_what_is_present,
    tags_are_unique_by_name_and_slug,
    deleting_posts_and_tags_removes_their_links,
    public_and_editor_lists_order_and_filter,
    pagination_edges,
    role_protection,
    basic_protection,
    no_protection,
    without_auth_writes_are_open,
    json_export,
    markdown_export,
    export_then_import_gives_identical_posts,
    front_matter_of_static_site_generators,
    zips_with_folders_other_files_and_a_broken_post,
    on_conflict_skip_overwrite_and_fail,
    unreadable_uploads_are_400s,
    zip_bomb_limits,
    uploads_over_the_limit_are_413,
    export_and_import_without_http,
}

// ---------------------------------------------------------------------------------------------
// Posts

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
    assert_eq!(cleared["excerpt"], Value::Null);
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
    for key in ["excerpt", "seo_title", "seo_description", "hero_image_url"] {
        assert_eq!(cleared[key], Value::Null, "{key}");
    }
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

// ---------------------------------------------------------------------------------------------
// Lists

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

// ---------------------------------------------------------------------------------------------
// Protection

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

// ---------------------------------------------------------------------------------------------
// Export

/// A few posts covering every field and status.
async fn seed(c: &Ctx) {
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
fn comparable(posts: &[Value]) -> Vec<Value> {
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

// ---------------------------------------------------------------------------------------------
// Import

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
    ]);
    let result = c.import("", "site.ZIP", zip).await;
    assert_eq!(
        (&result["created"], &result["failed"], &result["skipped"]),
        (&json!(3), &json!(2), &json!(0)),
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
        stored["excerpt"],
        Value::Null,
        "replaced by the file's (absent) excerpt"
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
