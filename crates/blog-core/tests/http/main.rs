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
    /// The module's pool.
    pool: kernel::DbPool,
    db: TestDb,
}

async fn start(db: TestDb, config: BlogConfig, auth: bool) -> Ctx {
    start_with(db, config, auth, None).await
}

/// [`start`] with a job queue (scheduled publishing).
async fn start_with(
    db: TestDb,
    config: BlogConfig,
    auth: bool,
    jobs: Option<Arc<dyn kernel::jobs::JobQueue>>,
) -> Ctx {
    let pool = db.migrated_pool(&[blog_core::MIGRATIONS]).await;
    let mut deps = Deps::new(pool.clone()).unwrap();
    deps.read_cache = db.read_cache;
    if auth {
        deps = deps.with_authenticator(Arc::new(StubAuthenticator));
    }
    if let Some(jobs) = jobs {
        deps = deps.with::<dyn kernel::jobs::JobQueue>(jobs);
    }
    let module = Arc::new(BlogModule::build(config, &deps).await.unwrap());
    let server = spawn_modules(vec![module.clone()]);
    Ctx {
        server,
        module,
        pool,
        db,
    }
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

mod caching;
mod cancellation;
mod export;
mod feeds;
mod import;
mod import_bulk;
mod lists;
mod nul;
mod posts;
mod protection;
mod rendering;
mod scheduling;
