//! A client that resets its connection while its request's database work waits on a lock:
//! nothing panics, the unit of work finishes on its own task, and every connection of the pool
//! serves again. One that resets it while its write waits for a connection: the write still
//! happens, once. (The future of a unit dropped mid-query is covered in kernel's `tests/db.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

kernel::backend_tests! {
    a_request_dropped_mid_query_leaves_no_panic,
    a_write_whose_client_left_completes_once,
}

/// The request's future is dropped while its write waits for a connection: the write is a unit
/// of work (the module's service is wrapped in `Detached` when it is built), so it goes on and
/// happens once. Called straight from the request, it would be dropped with it.
async fn a_write_whose_client_left_completes_once(db: TestDb) {
    let c = ctx(db).await;
    let held = kernel::testing::hold_every_connection(&c.pool).await;
    let request = c
        .req(reqwest::Method::POST, "/tags", Some(ADMIN))
        .json(&json!({"name": "Left behind"}));
    kernel::testing::reset_mid_request(request, std::time::Duration::from_millis(300)).await;
    drop(held);
    let names = || async {
        let tags: Value = c.get("/tags", None).await.json().await.unwrap();
        tags["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let written = kernel::testing::eventually(std::time::Duration::from_secs(10), || async {
        !names().await.is_empty()
    })
    .await;
    assert!(written, "the write was dropped with its request");
    assert_eq!(names().await, ["Left behind"]);
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
    let lock = kernel::testing::WriteLock::take(&c.db.url, "blog_tags").await;
    // The client resets its connection while the insert waits: actix drops the handler then.
    let request = c
        .req(reqwest::Method::POST, "/tags", Some(ADMIN))
        .json(&json!({"name": "Dropped"}));
    kernel::testing::reset_mid_request(request, std::time::Duration::from_millis(300)).await;
    lock.release().await;
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
