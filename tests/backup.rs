//! `keel backup` and `keel restore` on the embedded SQLite database, against a real `keel serve`
//! under write load. See docs/deploy.md ("Backups").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel::sql_types::Text;
use diesel::{Connection, QueryableByName, RunQueryDsl};
use keel::testing::{PASSWORD, login};
use keel_tests::keel_bin;
use keel_tests::support::{Keel, client};
use reqwest::StatusCode;
use serde_json::json;

#[derive(QueryableByName)]
struct Email {
    #[diesel(sql_type = Text)]
    email: String,
}

/// Every user's email in the SQLite database at `path`, read directly.
fn emails_in(path: &Path) -> BTreeSet<String> {
    let mut conn = diesel::SqliteConnection::establish(&path.to_string_lossy()).unwrap();
    diesel::sql_query("SELECT email FROM users")
        .load::<Email>(&mut conn)
        .unwrap()
        .into_iter()
        .map(|e| e.email)
        .collect()
}

/// `keel <args>` on the database at `url`: (succeeded, output).
async fn keel(url: &str, args: &[&str]) -> (bool, String) {
    Keel::new(keel_bin!(), args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .run()
        .await
}

/// Four writers register users without pause while `keel backup` copies the database; every
/// registration acknowledged (201) before the backup began is in the copy, and writes were still
/// being acknowledged while it ran. `keel restore` refuses while the server holds the database,
/// then, with the server stopped, puts the copy in place: after a restart the users of the copy
/// log in and a user registered after the backup does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_write_load_holds_every_acknowledged_write_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let url = format!("sqlite://{}", db.display());
    let secret = "backup-test-secret-backup-test-secret-0";
    let serve = || {
        Keel::serve(keel_bin!())
            .env("DATABASE_URL", &url)
            .env("SECRET_KEY", secret)
            .spawn()
    };
    let mut server = serve().ready().await;
    let base = server.url("");
    let http = client(Duration::from_secs(30));

    // (email, whether its request was sent after the backup had finished), in acknowledgement
    // order.
    let acknowledged = Arc::new(Mutex::new(Vec::<(String, bool)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let backed_up = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (http, base) = (http.clone(), base.clone());
        let (acknowledged, stop) = (acknowledged.clone(), stop.clone());
        let backed_up = backed_up.clone();
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let email = format!("w{w}-{i}@example.com");
                let sent_after = backed_up.load(Ordering::SeqCst);
                let r = http
                    .post(format!("{base}/api/v1/auth/register"))
                    .json(&json!({"email": email, "password": PASSWORD}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::CREATED, "{email}");
                acknowledged.lock().unwrap().push((email, sent_after));
                i += 1;
            }
        }));
    }
    // Load first, then the backup while it goes on.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let before: Vec<String> = acknowledged
        .lock()
        .unwrap()
        .iter()
        .map(|(e, _)| e.clone())
        .collect();
    let copy = dir.path().join("copy.db");
    let (ok, out) = keel(&url, &["backup", &copy.to_string_lossy()]).await;
    assert!(ok, "{out}");
    assert!(out.contains("backed up"), "{out}");
    backed_up.store(true, Ordering::SeqCst);
    let during = acknowledged.lock().unwrap().len() - before.len();
    // A little more load after the backup finished.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.await.unwrap();
    }
    // Requests sent after the backup finished cannot be in its snapshot.
    let after: Vec<String> = acknowledged
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, sent_after)| *sent_after)
        .map(|(e, _)| e.clone())
        .collect();
    assert!(
        before.len() > 10,
        "load before the backup: {}",
        before.len()
    );
    assert!(during > 0, "writes were acknowledged while the backup ran");
    assert!(!after.is_empty(), "writes were sent after the backup");

    let copied = emails_in(&copy);
    let lost: Vec<&String> = before.iter().filter(|e| !copied.contains(*e)).collect();
    assert!(
        lost.is_empty(),
        "acknowledged before the backup, missing: {lost:?}"
    );
    for email in &after {
        assert!(!copied.contains(email), "{email} came after the backup");
    }

    // A backup never overwrites a file.
    let (ok, out) = keel(&url, &["backup", &copy.to_string_lossy()]).await;
    assert!(!ok && out.contains("exists"), "{out}");

    // Restore: refused while the server runs, done once it stopped.
    let (ok, out) = keel(&url, &["restore", &copy.to_string_lossy()]).await;
    assert!(!ok && out.contains("in use"), "{out}");
    server.sigterm();
    assert!(
        server.wait_exit(Duration::from_secs(30)).await.is_some(),
        "the server stops"
    );
    let (ok, out) = keel(&url, &["restore", &copy.to_string_lossy()]).await;
    assert!(ok, "{out}");
    assert!(dir.path().join("keel.db.before-restore").is_file());
    assert_eq!(emails_in(&db), copied, "the database is the copy");

    let server = serve().ready().await;
    let base = server.url("");
    let token = login(&http, &base, &before[0], PASSWORD).await;
    assert!(!token.is_empty());
    let r = http
        .post(format!("{base}/api/v1/auth/token"))
        .form(&[("username", after[0].as_str()), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "{} is not in the copy",
        after[0]
    );
    assert!(server.failures_in_log().is_empty(), "{}", server.logs());
}

/// On PostgreSQL both commands refuse and name the tool that does the job, touching nothing.
#[tokio::test]
async fn on_postgresql_backup_and_restore_point_to_pg_dump_and_pg_restore() {
    let url = "postgres://keel@127.0.0.1:1/keel";
    let (ok, out) = keel(url, &["backup", "/nonexistent/keel.dump"]).await;
    assert!(!ok && out.contains("pg_dump"), "{out}");
    let (ok, out) = keel(url, &["restore", "/nonexistent/keel.dump"]).await;
    assert!(!ok && out.contains("pg_restore"), "{out}");
}
