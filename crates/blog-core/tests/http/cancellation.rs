//! A client that gives up while its request's database work waits on a lock: nothing panics, the
//! unit of work finishes on its own task, and every connection of the pool serves again. (The
//! future of a unit dropped mid-query is covered in kernel's `tests/db.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

kernel::backend_tests! {
    a_request_dropped_mid_query_leaves_no_panic,
}

/// Panics anywhere in this test binary since the hook was installed.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

async fn a_request_dropped_mid_query_leaves_no_panic(db: TestDb) {
    count_panics();
    let panics_before = PANICS.load(Ordering::SeqCst);
    let c = ctx(db).await;
    // Another connection holds the write lock, so the request's insert waits inside its query.
    let blocker = kernel::DbPool::connect(&c.db.url, 1).await.unwrap();
    let mut held = blocker.get().await.unwrap();
    {
        use diesel_async::SimpleAsyncConnection;
        match held.conn() {
            kernel::DbConn::Sqlite(conn) => conn.batch_execute("BEGIN IMMEDIATE").await.unwrap(),
            kernel::DbConn::Postgres(conn) => conn
                .batch_execute("BEGIN; LOCK TABLE blog_tags IN EXCLUSIVE MODE")
                .await
                .unwrap(),
        }
    }
    let impatient = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(300))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(c.url("/tags"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "Dropped"}))
        .send()
        .await;
    assert!(
        gave_up.is_err(),
        "the request waited on the lock: {gave_up:?}"
    );
    // Let the server see the client gone and drop the handler while the insert still waits.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    {
        use diesel_async::SimpleAsyncConnection;
        match held.conn() {
            kernel::DbConn::Sqlite(conn) => conn.batch_execute("ROLLBACK").await.unwrap(),
            kernel::DbConn::Postgres(conn) => conn.batch_execute("ROLLBACK").await.unwrap(),
        }
    }
    drop(held);
    // The unit finished on its own task: the tag exists.
    let mut names = Vec::new();
    for _ in 0..100 {
        let tags: Value = c.get("/tags", None).await.json().await.unwrap();
        names = tags["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        if !names.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(names, ["Dropped"]);
    // Every pooled connection answers, reads and writes.
    for i in 0..10 {
        let r = c
            .post("/tags", Some(ADMIN), json!({"name": format!("After {i}")}))
            .await;
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        panics_before,
        "a panic was logged"
    );
}
