//! The composed server over real HTTP: routing envelope, health, docs, OpenAPI, CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use keel::testing::{TestConfig, sign_up};
use kernel::testing::{TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

kernel::backend_tests! {
    errors_use_the_detail_envelope,
    request_ids_are_echoed_or_generated,
    health_reports_every_module,
    docs_render_from_embedded_assets,
    auth_answers_at_both_prefixes,
    unmounted_modules_answer_404,
    cli_manages_users_that_the_api_sees,
    cli_exports_and_imports_the_blog,
    declared_security_is_what_routes_enforce,
    cached_reads_follow_the_visibility_rules,
    modules_without_an_identity_provider_are_open,
}

async fn errors_use_the_detail_envelope(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let r = s.client.get(s.url("/no/such/route")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"detail": "Not Found"})
    );
    let r = s.client.delete(s.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "GET, HEAD");
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"detail": "Method Not Allowed"})
    );
    let r = s
        .client
        .get(s.url("/api/v1/auth/users/abc"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "PATCH");
    // The same route under its alias prefix.
    let r = s.client.get(s.url("/auth/users/7")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "PATCH");
    let r = s
        .client
        .patch(s.url("/api/v1/blog/posts/1"))
        .send()
        .await
        .unwrap();
    // `/posts/{post}` answers GET (a slug), PUT and DELETE (an id).
    assert_eq!(r.headers()["allow"], "GET, HEAD, PUT, DELETE");
}

async fn request_ids_are_echoed_or_generated(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let r = s
        .client
        .get(s.url("/health/live"))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "trace-42");
    let r = s.client.get(s.url("/nowhere")).send().await.unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(id.len(), 36, "a generated UUID: {id}");
}

async fn health_reports_every_module(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let r = s.client.get(s.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "healthy");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["modules"]["auth"]["status"], "healthy");
    assert_eq!(body["modules"]["database"]["status"], "healthy");
    assert_eq!(body["modules"]["blog"]["status"], "healthy");
    assert_eq!(body["modules"]["tasks"]["status"], "healthy");
    let live: Value = s
        .client
        .get(s.url("/health/live"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(live["status"], "alive");
    let ready = s.client.get(s.url("/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
}

async fn docs_render_from_embedded_assets(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirects.get(s.url("/docs")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(r.headers()["location"], "/docs/");
    let page = s.client.get(s.url("/docs/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("cdn") && !html.contains("unpkg"),
        "no asset from a CDN"
    );
    let bundle = s
        .client
        .get(s.url("/docs/swagger-ui-bundle.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(bundle.status(), StatusCode::OK);
    assert!(bundle.bytes().await.unwrap().len() > 100_000);
    let init = s
        .client
        .get(s.url("/docs/swagger-initializer.js"))
        .send()
        .await
        .unwrap();
    assert!(init.text().await.unwrap().contains("/openapi.json"));
}

async fn auth_answers_at_both_prefixes(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let token = sign_up(&s.client, &s.base_url, "both@example.com").await;
    let token = token.as_str();
    for prefix in ["/auth", "/api/v1/auth"] {
        let r = s
            .client
            .get(s.url(&format!("{prefix}/me")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{prefix}");
    }
}

async fn unmounted_modules_answer_404(db: TestDb) {
    let s = TestConfig::new(&db).modules(&[]).spawn().await;
    let r = s
        .client
        .post(s.url("/auth/register"))
        .json(&json!({"email": "x@example.com", "password": "password123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let doc: Value = s
        .client
        .get(s.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["paths"].get("/api/v1/auth/me").is_none());
}

/// The read cache's rules, with it on and off, between two servers on one database: a write is
/// visible to the very next read of the server that made it, and to the other server within a
/// second; a user deactivated by another process is refused everywhere within that second.
async fn cached_reads_follow_the_visibility_rules(db: TestDb) {
    for read_cache in [true, false] {
        let fresh = match db.backend {
            kernel::db::Backend::Sqlite => TestDb::sqlite().await,
            kernel::db::Backend::Postgres => TestDb::postgres().await.unwrap(),
        };
        let settings = TestConfig::new(&fresh).with(|c| c.read_cache = read_cache);
        let a = settings.clone().spawn().await;
        let b = settings.spawn().await;
        let token = sign_up(&a.client, &a.base_url, "reader@example.com").await;
        let public = |s: &TestServer| s.client.get(s.url("/api/v1/blog/posts")).send();
        let total = |v: Value| v["total"].as_i64().unwrap();
        // Both servers have answered (and may have cached) the empty list.
        assert_eq!(total(public(&a).await.unwrap().json().await.unwrap()), 0);
        assert_eq!(total(public(&b).await.unwrap().json().await.unwrap()), 0);
        let post: Value = a
            .client
            .post(a.url("/api/v1/blog/posts"))
            .bearer_auth(&token)
            .json(&json!({"title": "Cached", "content": "x"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let r = a
            .client
            .post(a.url(&format!("/api/v1/blog/posts/{}/publish", post["id"])))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // The writer's very next read sees it.
        assert_eq!(
            total(public(&a).await.unwrap().json().await.unwrap()),
            1,
            "{read_cache}"
        );
        // The other server within a second (at once without the cache).
        if !read_cache {
            assert_eq!(total(public(&b).await.unwrap().json().await.unwrap()), 1);
        }
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        assert_eq!(
            total(public(&b).await.unwrap().json().await.unwrap()),
            1,
            "{read_cache}"
        );

        // A user deactivated by another process (the CLI) is refused within the second.
        let me = |s: &TestServer| s.client.get(s.url("/auth/me")).bearer_auth(&token).send();
        assert_eq!(me(&b).await.unwrap().status(), StatusCode::OK);
        let (ok, out) = keel(&fresh, &["users", "deactivate", "reader@example.com"]);
        assert!(ok, "{out}");
        if !read_cache {
            assert_eq!(me(&b).await.unwrap().status(), StatusCode::UNAUTHORIZED);
        }
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        for s in [&a, &b] {
            let r = me(s).await.unwrap();
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{read_cache}");
            assert_eq!(r.json::<Value>().await.unwrap()["detail"], "Inactive user");
        }
    }
}

/// Every operation of the served OpenAPI document, called without a token and without a body:
/// `(method, path, declares bearer security, status)`.
async fn call_every_operation(s: &TestServer) -> Vec<(String, String, bool, StatusCode)> {
    let doc: Value = s
        .client
        .get(s.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut seen = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let Ok(method) = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()) else {
                continue;
            };
            let declared = operation["security"]
                .as_array()
                .is_some_and(|reqs| reqs.iter().any(|r| r.get("bearer").is_some()));
            // Path parameters get a value of the right shape: a number for ids, else a word.
            let concrete: String = path
                .split('/')
                .map(|segment| match segment {
                    s if s.starts_with('{') && s.ends_with("_id}") && !s.contains("task") => "1",
                    s if s.starts_with('{') => "some-value",
                    s => s,
                })
                .collect::<Vec<_>>()
                .join("/");
            let status = s
                .client
                .request(method.clone(), s.url(&concrete))
                .send()
                .await
                .unwrap()
                .status();
            seen.push((method.to_string(), path.clone(), declared, status));
        }
    }
    seen
}

/// Walks the merged document: a route that declares bearer security answers 401 without a token,
/// and a route that answers 401 without a token declares it.
async fn declared_security_is_what_routes_enforce(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let seen = call_every_operation(&s).await;
    assert!(seen.len() > 20, "{seen:?}");
    for (method, path, declared, status) in &seen {
        assert_eq!(
            *declared,
            *status == StatusCode::UNAUTHORIZED,
            "{method} {path}: declares bearer = {declared}, answered {status} without a token"
        );
    }
    for protected in ["/api/v1/tasks/enqueue", "/api/v1/blog/posts/{post}"] {
        assert!(
            seen.iter()
                .any(|(_, p, declared, _)| p == protected && *declared),
            "{protected} is protected"
        );
    }
}

/// Without the auth module, the other modules are open by design: no route answers 401, none
/// declares security, and writes work without a token.
async fn modules_without_an_identity_provider_are_open(db: TestDb) {
    let s = TestConfig::new(&db)
        .modules(&["blog", "tasks"])
        .spawn()
        .await;
    for (method, path, declared, status) in call_every_operation(&s).await {
        assert!(!declared, "{method} {path} declares security");
        assert_ne!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert!(!status.is_server_error(), "{method} {path}: {status}");
    }
    let r = s
        .client
        .post(s.url("/api/v1/tasks/enqueue"))
        .json(&json!({"task_name": "io_simulation_task"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = s
        .client
        .post(s.url("/api/v1/blog/tags"))
        .json(&json!({"name": "Open"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
}

fn keel(db: &TestDb, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("BCRYPT_COST", "4")
        .env("LOG_FORMAT", "pretty")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run keel");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn cli_manages_users_that_the_api_sees(db: TestDb) {
    let (ok, out) = keel(&db, &["migrate"]);
    assert!(ok, "{out}");
    let (ok, out) = keel(
        &db,
        &[
            "users",
            "create",
            "--email",
            "root@example.com",
            "--password",
            "password123",
            "--role",
            "admin",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("role admin"), "{out}");
    let (ok, out) = keel(
        &db,
        &["users", "create", "--email", "bad", "--password", "x"],
    );
    assert!(!ok && out.contains("Invalid email format"), "{out}");
    let (ok, _) = keel(
        &db,
        &[
            "users",
            "create",
            "--email",
            "pat@example.com",
            "--password",
            "password123",
        ],
    );
    assert!(ok);
    let (ok, out) = keel(&db, &["users", "set-role", "pat@example.com", "moderator"]);
    assert!(ok && out.contains("moderator"), "{out}");
    let (ok, out) = keel(&db, &["users", "list"]);
    assert!(
        ok && out.contains("root@example.com") && out.contains("pat@example.com"),
        "{out}"
    );

    let s = TestConfig::new(&db).spawn().await;
    let login = |email: &'static str| {
        s.client
            .post(s.url("/auth/token"))
            .form(&[("username", email), ("password", "password123")])
            .send()
    };
    assert_eq!(
        login("pat@example.com").await.unwrap().status(),
        StatusCode::OK
    );
    let (ok, out) = keel(&db, &["users", "deactivate", "pat@example.com"]);
    assert!(ok && out.contains("inactive"), "{out}");
    let r = login("pat@example.com").await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "Inactive user");
    let (ok, _) = keel(&db, &["users", "activate", "pat@example.com"]);
    assert!(ok);
    assert_eq!(
        login("pat@example.com").await.unwrap().status(),
        StatusCode::OK
    );
    let (ok, out) = keel(&db, &["users", "set-role", "nobody@example.com", "admin"]);
    assert!(!ok && out.contains("no user"), "{out}");
}

async fn cli_exports_and_imports_the_blog(db: TestDb) {
    let s = TestConfig::new(&db).spawn().await;
    let token = sign_up(&s.client, &s.base_url, "ed@example.com").await;
    for title in ["First post", "Second post"] {
        let r = s
            .client
            .post(s.url("/api/v1/blog/posts"))
            .bearer_auth(&token)
            .json(&json!({"title": title, "content": "Body."}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("blog.zip");
    let json_file = dir.path().join("blog.json");
    let (ok, out) = keel(
        &db,
        &[
            "blog",
            "export",
            "--format",
            "markdown",
            "--out",
            zip.to_str().unwrap(),
        ],
    );
    assert!(ok && out.contains("exported 2 posts"), "{out}");
    let (ok, out) = keel(
        &db,
        &[
            "blog",
            "export",
            "--format",
            "json",
            "--out",
            json_file.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
    let exported: Value = serde_json::from_slice(&std::fs::read(&json_file).unwrap()).unwrap();
    assert_eq!(exported.as_array().unwrap().len(), 2);
    // Importing the same posts again: skipped by default, refused whole with --on-conflict fail.
    let (ok, out) = keel(&db, &["blog", "import", zip.to_str().unwrap()]);
    assert!(
        ok && out.contains("0 created, 0 updated, 2 skipped, 0 failed"),
        "{out}"
    );
    let (ok, out) = keel(
        &db,
        &[
            "blog",
            "import",
            zip.to_str().unwrap(),
            "--on-conflict",
            "fail",
        ],
    );
    assert!(!ok && out.contains("Post slug already exists"), "{out}");
    let (ok, out) = keel(&db, &["blog", "import", "notes.txt"]);
    assert!(!ok, "{out}");
    // Into an empty database, the zip brings both posts back.
    let fresh = TestDb::sqlite().await;
    let (ok, out) = keel(&fresh, &["blog", "import", zip.to_str().unwrap()]);
    assert!(ok && out.contains("2 created"), "{out}");
}

/// The OpenAPI document is part of the API: this snapshot catches accidental changes. It must
/// also be valid as a whole (one name per operation, one template per path); CI validates it
/// with openapi-spec-validator too (tests/clients).
/// After an intended change, run with `UPDATE_SNAPSHOTS=1` and commit the new file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_matches_its_snapshot() {
    let db = TestDb::sqlite().await;
    let s = TestConfig::new(&db).spawn().await;
    let doc: Value = s
        .client
        .get(s.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parsed: utoipa::openapi::OpenApi = serde_json::from_value(doc.clone()).unwrap();
    let conflicts = kernel::openapi::conflicts(&parsed);
    assert!(conflicts.is_empty(), "{conflicts:#?}");
    let rendered = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/openapi.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == rendered,
        "/openapi.json differs from {}; if the change is intended, rerun with UPDATE_SNAPSHOTS=1",
        path.display()
    );
}

/// Both migration trees list the same modules and the same versions.
#[test]
fn migration_trees_mirror_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let list = |backend: &str| {
        let mut names = Vec::new();
        for module in std::fs::read_dir(root.join(backend)).unwrap() {
            let module = module.unwrap().path();
            for version in std::fs::read_dir(&module).unwrap() {
                let version = version.unwrap().path();
                assert!(
                    version.join("up.sql").is_file() && version.join("down.sql").is_file(),
                    "{version:?}"
                );
                names.push(format!(
                    "{}/{}",
                    module.file_name().unwrap().to_string_lossy(),
                    version.file_name().unwrap().to_string_lossy()
                ));
            }
        }
        names.sort();
        names
    };
    let (postgres, sqlite) = (list("postgres"), list("sqlite"));
    assert!(!postgres.is_empty());
    assert_eq!(postgres, sqlite);
    // Version stamps are unique across modules.
    let mut versions: Vec<&str> = postgres
        .iter()
        .map(|n| n.split('/').nth(1).unwrap_or_default())
        .map(|v| v.split('_').next().unwrap_or_default())
        .collect();
    versions.sort();
    let before = versions.len();
    versions.dedup();
    assert_eq!(before, versions.len(), "duplicate migration versions");
}

/// Invalid settings stop the process at start with a message naming the setting.
#[test]
fn invalid_settings_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_owned();
    let run = |vars: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
        cmd.arg("migrate")
            .current_dir(&dir)
            .env("DATABASE_URL", "sqlite://cli.db")
            .env_remove("SECRET_KEY")
            .env_remove("APP_ENV");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run keel");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (vars, setting) in [
        (vec![("PORT", "eighty")], "PORT"),
        (
            vec![("DATABASE_URL", "mysql://localhost/keel")],
            "DATABASE_URL",
        ),
        (vec![("KEEL_MODULES", "auth,billing")], "KEEL_MODULES"),
        (vec![("LOG_FORMAT", "xml")], "LOG_FORMAT"),
        (vec![("BCRYPT_COST", "99")], "BCRYPT_COST"),
        (
            vec![("TASK_SCHEDULES", "cleanup_expired_data=every day")],
            "TASK_SCHEDULES",
        ),
        (vec![("APP_ENV", "production")], "SECRET_KEY"),
        (
            vec![("APP_ENV", "production"), ("SECRET_KEY", "short")],
            "SECRET_KEY",
        ),
    ] {
        let (ok, stderr) = run(&vars);
        assert!(!ok, "{vars:?} should be refused");
        assert!(stderr.contains(setting), "{vars:?}: {stderr}");
    }
    let (ok, stderr) = run(&[
        ("APP_ENV", "production"),
        ("SECRET_KEY", "server-test-production-key-0123456789abcdef"),
    ]);
    assert!(ok, "{stderr}");
}

/// `keel serve` on the default SQLite file logs JSON lines carrying the request id, and SIGTERM
/// stops it cleanly.
#[test]
fn serve_logs_json_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .current_dir(&dir)
        .env_remove("DATABASE_URL")
        .env("PORT", port.to_string())
        .env("LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .env("BCRYPT_COST", "4")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start keel");
    let probe = || -> std::io::Result<String> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
        stream.write_all(
            b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: json-log-probe\r\nConnection: close\r\n\r\n",
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    };
    let mut up = false;
    for _ in 0..200 {
        if probe().is_ok_and(|a| a.starts_with("HTTP/1.1 200")) {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(up, "keel serve did not answer");
    assert!(
        dir.join("data/keel.db").is_file(),
        "the default database file is created"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit status {:?}", out.status);
    let logs = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        !lines.is_empty() && lines.len() == logs.lines().count(),
        "{logs}"
    );
    assert!(
        logs.contains("json-log-probe"),
        "the request id is in the log: {logs}"
    );
}

/// `keel worker` with two processes on Redis runs what `keel tasks enqueue` queues, and
/// `keel tasks result --wait` reads it; SIGTERM stops the workers cleanly.
#[test]
fn cli_workers_run_tasks_on_redis() {
    let Ok(redis_url) = std::env::var("TEST_REDIS_URL") else {
        eprintln!("TEST_REDIS_URL is not set: Redis worker test skipped");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let command = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
        cmd.args(args)
            .current_dir(tmp.path())
            .env("TASKS_BACKEND", "redis")
            .env("REDIS_URL", &redis_url)
            .env("REDIS_DB", "11")
            .env("WORKER_PROCESSES", "2")
            .env("RUST_LOG", "warn");
        cmd
    };
    let run = |args: &[&str]| {
        let out = command(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let supervisor = command(&["worker", "--queues", "load_test,system"])
        .spawn()
        .unwrap();
    let list = run(&["tasks", "list"]);
    assert!(list.to_string().contains("io_simulation_task"), "{list}");
    let queued = run(&["tasks", "enqueue", "io_simulation_task"]);
    let id = queued["task_id"].as_str().unwrap().to_owned();
    assert_eq!(queued["queue_type"], "load_test");
    let result = run(&["tasks", "result", &id, "--wait", "--timeout", "60"]);
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["task_id"], id.as_str());
    let schedules = run(&["tasks", "schedules"]);
    assert_eq!(
        schedules["schedules"][0]["task_name"], "cleanup_expired_data",
        "{schedules}"
    );
    // A delayed task, cancelled before it is due.
    let later = run(&["tasks", "enqueue", "io_simulation_task", "--delay", "600"]);
    let later = later["task_id"].as_str().unwrap().to_owned();
    let cancelled = run(&["tasks", "cancel", &later]);
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let failed = run(&["tasks", "failed", "list", "--page-size", "5"]);
    assert_eq!(failed["page_size"], 5, "{failed}");
    let missing = command(&["tasks", "failed", "retry", "no-such-task"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("Failed task not found: no-such-task"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    // A schedule naming a task no module registers stops the worker at start.
    let refused = command(&["worker"])
        .env("WORKER_PROCESSES", "1")
        .env("TASK_SCHEDULES", "no_such_task=@daily")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no_such_task") && stderr.contains("TASK_SCHEDULES"),
        "{stderr}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &supervisor.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = supervisor.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "workers stopped cleanly: {:?}",
        out.status
    );
}

/// PostgreSQL connections killed under a running server (`pg_terminate_backend`): no request
/// answers 500 (a lost connection is a 503 with `Retry-After`), and the server recovers without a
/// restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_database_connections_are_503_and_the_server_recovers() {
    let Some(db) = TestDb::postgres().await else {
        eprintln!("TEST_DATABASE_URL is not set: PostgreSQL run skipped");
        return;
    };
    let config = TestConfig::new(&db).build();
    let pool_size = config.db_pool_size;
    let s = keel::testing::serve(keel::app::Application::build(config).await.unwrap());
    let token = sign_up(&s.client, &s.base_url, "survivor@example.com").await;
    let me = || s.client.get(s.url("/auth/me")).bearer_auth(&token).send();
    assert_eq!(me().await.unwrap().status(), StatusCode::OK);
    let admin = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let kill = || async {
        let mut pooled = admin.get().await.unwrap();
        let kernel::DbConn::Postgres(c) = pooled.conn() else {
            unreachable!("a PostgreSQL database")
        };
        use diesel_async::SimpleAsyncConnection;
        c.batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .await
        .unwrap();
    };
    for round in 0..5 {
        // Connections are killed while requests use them.
        let (answers, ()) = tokio::join!(
            futures_util::future::join_all((0..16).map(|_| me())),
            kill()
        );
        for answer in answers {
            let answer = answer.unwrap();
            let status = answer.status();
            assert!(
                status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
                "round {round}: {status}"
            );
            if status == StatusCode::SERVICE_UNAVAILABLE {
                assert!(answer.headers().contains_key("retry-after"));
            }
        }
    }
    // A connection killed while idle answers one 503 when next used, unless its background task
    // saw the loss first (slower on a loaded machine); either way the pool then drops it. So at
    // most one 503 per pooled connection, then every request is served.
    let (mut lost, mut served) = (0, 0);
    while served < 8 {
        match me().await.unwrap().status() {
            StatusCode::OK => served += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                lost += 1;
                served = 0;
                assert!(lost <= pool_size, "{lost} answers of 503");
            }
            other => panic!("after the kills: {other}"),
        }
    }
}
