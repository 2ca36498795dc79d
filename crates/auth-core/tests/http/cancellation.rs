//! A client that resets its connection while its registration waits inside its insert (another
//! connection holds the table's write lock): the account is still created, once (the module's service is wrapped in `Detached` when it is built,
//! so each call is a unit of work that a dropped request does not cut off).

use std::time::Duration;

use kernel::pagination::Page;
use kernel::testing::{WriteLock, eventually, reset_mid_request};

use super::*;

kernel::backend_tests! {
    a_registration_whose_client_left_completes_once,
}

async fn a_registration_whose_client_left_completes_once(db: TestDb) {
    let c = ctx(db).await;
    let lock = WriteLock::take(&c.db.url, "users").await;
    let request = c
        .server
        .client
        .post(c.server.url("/auth/register"))
        .json(&json!({"email": "left@example.com", "password": "password123"}));
    reset_mid_request(request, Duration::from_millis(500)).await;
    lock.release().await;
    let service = c.module.service();
    let page = Page {
        page: 1,
        page_size: 10,
    };
    let registered = eventually(Duration::from_secs(10), || async {
        service
            .find_by_email("left@example.com")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    assert!(registered, "the registration was dropped with its request");
    let (users, total) = service.list_users(page).await.unwrap();
    assert_eq!(total, 1);
    assert_eq!(users[0].email, "left@example.com");
    let r = c.login("left@example.com", "password123").await;
    assert_eq!(r.status(), StatusCode::OK);
}
