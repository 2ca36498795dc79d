//! Refresh tokens (RFC 6749 §6): rotated on use, a reuse revokes the whole family; and sign-out,
//! of one session or everywhere.

use super::*;

kernel::backend_tests! {
    a_refresh_rotates_the_pair,
    a_reused_refresh_token_revokes_its_family,
    refresh_requests_are_checked_like_token_requests,
    two_refreshes_with_one_token_cannot_both_win,
    logout_ends_one_session_or_every_one,
}

/// An access token and its refresh token.
pub struct Session {
    pub access: String,
    pub refresh: String,
}

impl Ctx {
    /// Logs in; the pair of the answer.
    pub async fn tokens(&self, email: &str, password: &str) -> Session {
        let r = self.login(email, password).await;
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        Session {
            access: body["access_token"].as_str().unwrap().to_owned(),
            refresh: body["refresh_token"].as_str().unwrap().to_owned(),
        }
    }

    pub async fn refresh_form(&self, fields: &[(&str, &str)]) -> (StatusCode, Value) {
        let r = self
            .server
            .client
            .post(self.server.url("/auth/refresh"))
            .form(fields)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap())
    }

    pub async fn refresh(&self, token: &str) -> (StatusCode, Value) {
        self.refresh_form(&[("grant_type", "refresh_token"), ("refresh_token", token)])
            .await
    }

    async fn logout(&self, bearer: Option<&str>, form: Option<&[(&str, &str)]>) -> StatusCode {
        let mut req = self.server.client.post(self.server.url("/auth/logout"));
        if let Some(bearer) = bearer {
            req = req.bearer_auth(bearer);
        }
        if let Some(form) = form {
            req = req.form(form);
        }
        req.send().await.unwrap().status()
    }
}

fn pair(body: &Value) -> Session {
    Session {
        access: body["access_token"].as_str().unwrap().to_owned(),
        refresh: body["refresh_token"].as_str().unwrap().to_owned(),
    }
}

async fn a_refresh_rotates_the_pair(db: TestDb) {
    let c = ctx(db).await;
    let (id, _) = c.user("ada@example.com").await;
    let first = c.tokens("ada@example.com", "password123").await;
    assert_eq!(first.refresh.len(), 64);
    // Stored as its hash only.
    let stored = auth_core::testing::stored_token_hashes(&c.pool, id)
        .await
        .unwrap();
    assert!(!stored.contains(&first.refresh));
    let r = c
        .server
        .client
        .post(c.server.url("/api/v1/auth/refresh"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &first.refresh),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert_eq!(r.headers()["pragma"], "no-cache");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["token_type"], "bearer");
    assert_eq!(body["expires_in"], 30 * 60);
    let second = pair(&body);
    assert_ne!(second.refresh, first.refresh);
    assert_eq!(
        c.get("/auth/me", Some(&second.access)).await.status(),
        StatusCode::OK
    );
    // The grant_type may be left out; the next token rotates in turn.
    let (status, body) = c.refresh_form(&[("refresh_token", &second.refresh)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let third = pair(&body);
    // The access tokens issued along the way all work until they expire.
    for access in [&first.access, &second.access, &third.access] {
        assert_eq!(
            c.get("/auth/me", Some(access)).await.status(),
            StatusCode::OK
        );
    }
    // An expired refresh token is refused.
    auth_core::testing::expire_tokens(&c.pool, id)
        .await
        .unwrap();
    let (status, body) = c.refresh(&third.refresh).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(body["detail"], "Invalid refresh token");
}

async fn a_reused_refresh_token_revokes_its_family(db: TestDb) {
    let c = ctx(db).await;
    c.user("ada@example.com").await;
    let stolen = c.tokens("ada@example.com", "password123").await;
    let other_device = c.tokens("ada@example.com", "password123").await;
    let (status, body) = c.refresh(&stolen.refresh).await;
    assert_eq!(status, StatusCode::OK);
    let legitimate = pair(&body);
    // The old token comes back (a thief, or a replay): refused, and the family is revoked.
    let (status, body) = c.refresh(&stolen.refresh).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(body["detail"], "Invalid refresh token");
    let description = body["error_description"].as_str().unwrap();
    assert_eq!(description, "Invalid refresh token");
    let (status, _) = c.refresh(&legitimate.refresh).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "the whole family is revoked"
    );
    // Another session (another family) is untouched.
    let (status, _) = c.refresh(&other_device.refresh).await;
    assert_eq!(status, StatusCode::OK);
}

async fn refresh_requests_are_checked_like_token_requests(db: TestDb) {
    let c = ctx(db).await;
    let (id, _) = c.user("ada@example.com").await;
    let session = c.tokens("ada@example.com", "password123").await;
    type Case<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("grant_type", "refresh_token")],
            422,
            "invalid_request",
        ),
        (vec![], 422, "invalid_request"),
        (
            vec![
                ("grant_type", "password"),
                ("refresh_token", &session.refresh),
            ],
            400,
            "unsupported_grant_type",
        ),
        (vec![("refresh_token", "garbage")], 400, "invalid_grant"),
        (vec![("refresh_token", "")], 400, "invalid_grant"),
        (
            vec![("refresh_token", &session.access)],
            400,
            "invalid_grant",
        ),
        (vec![("refresh_token", "ab\u{0}")], 422, "invalid_request"),
    ];
    for (fields, status, code) in cases {
        let (got, body) = c.refresh_form(&fields).await;
        assert_eq!(got.as_u16(), status, "{fields:?}: {body}");
        assert_eq!(body["error"], code, "{fields:?}: {body}");
        assert!(body["error_description"].is_string(), "{body}");
    }
    let (status, body) = c.refresh_form(&[]).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        json!([{"field": "refresh_token", "message": "Field required"}])
    );
    // JSON is not a form.
    let r = c
        .server
        .client
        .post(c.server.url("/auth/refresh"))
        .json(&json!({"refresh_token": session.refresh}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A huge form.
    let huge = "a".repeat(2 * 1024 * 1024);
    let (status, body) = c.refresh_form(&[("refresh_token", &huge)]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"], "invalid_request");
    // A deactivated user cannot refresh: the token endpoint's 401.
    let patch = UserPatch {
        is_active: Some(false),
        ..Default::default()
    };
    c.module
        .service()
        .update_user(None, id, patch)
        .await
        .unwrap();
    let (status, body) = c.refresh(&session.refresh).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["detail"], "Inactive user");
    assert_eq!(body["error"], "invalid_grant");
    // ... and the token was not spent: it works once the account is active again.
    let patch = UserPatch {
        is_active: Some(true),
        ..Default::default()
    };
    c.module
        .service()
        .update_user(None, id, patch)
        .await
        .unwrap();
    assert_eq!(c.refresh(&session.refresh).await.0, StatusCode::OK);
}

async fn two_refreshes_with_one_token_cannot_both_win(db: TestDb) {
    let c = ctx(db).await;
    c.user("ada@example.com").await;
    let session = c.tokens("ada@example.com", "password123").await;
    let (a, b) = tokio::join!(c.refresh(&session.refresh), c.refresh(&session.refresh));
    let mut statuses = [a.0.as_u16(), b.0.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 400], "{a:?} {b:?}");
    // The loser revoked the family: the winner's new token is refused too.
    let winner = if a.0 == StatusCode::OK { a.1 } else { b.1 };
    assert_eq!(
        c.refresh(&pair(&winner).refresh).await.0,
        StatusCode::BAD_REQUEST
    );
}

async fn logout_ends_one_session_or_every_one(db: TestDb) {
    let c = ctx(db).await;
    c.user("ada@example.com").await;
    let (_, bob) = c.user("bob@example.com").await;
    let laptop = c.tokens("ada@example.com", "password123").await;
    let phone = c.tokens("ada@example.com", "password123").await;
    let tablet = c.tokens("ada@example.com", "password123").await;
    // One session, by its refresh token (form): that family ends, the others live on.
    let status = c
        .logout(None, Some(&[("refresh_token", &laptop.refresh)]))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(c.refresh(&laptop.refresh).await.0, StatusCode::BAD_REQUEST);
    let (status, body) = c.refresh(&phone.refresh).await;
    assert_eq!(status, StatusCode::OK);
    let phone = pair(&body);
    // The same in JSON; an unknown or malformed token ends nothing and says so to nobody.
    let (status, _) = c
        .post_json(
            "/auth/logout",
            None,
            json!({"refresh_token": phone.refresh}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(c.refresh(&phone.refresh).await.0, StatusCode::BAD_REQUEST);
    for token in ["0".repeat(64), "garbage".to_owned()] {
        assert_eq!(
            c.logout(None, Some(&[("refresh_token", &token)])).await,
            StatusCode::NO_CONTENT
        );
    }
    assert_eq!(
        c.logout(None, Some(&[("refresh_token", "a\u{0}")])).await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // The access token of an ended session lives until it expires.
    assert_eq!(
        c.get("/auth/me", Some(&laptop.access)).await.status(),
        StatusCode::OK
    );
    // Everywhere, by the bearer token alone: every refresh token and every access token.
    assert_eq!(
        c.logout(Some(&tablet.access), None).await,
        StatusCode::NO_CONTENT
    );
    for access in [&laptop.access, &phone.access, &tablet.access] {
        let r = c.get("/auth/me", Some(access)).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(detail(r).await, "Could not validate credentials");
    }
    assert_eq!(c.refresh(&tablet.refresh).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(
        c.get("/auth/me", Some(&bob)).await.status(),
        StatusCode::OK,
        "another user"
    );
    // A new sign-in works.
    let fresh = c.tokens("ada@example.com", "password123").await;
    assert_eq!(
        c.get("/auth/me", Some(&fresh.access)).await.status(),
        StatusCode::OK
    );
    // Nothing to go by: 401; a bad bearer: 401; a body that is neither form nor JSON: 422.
    let r = c
        .server
        .client
        .post(c.server.url("/auth/logout"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(detail(r).await, "Not authenticated");
    assert_eq!(
        c.logout(Some("garbage"), None).await,
        StatusCode::UNAUTHORIZED
    );
    // An unknown field is refused: a mistyped `refresh_token` must not sign out everywhere.
    assert_eq!(
        c.logout(Some(&fresh.access), Some(&[("refresh", "x")]))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        c.get("/auth/me", Some(&fresh.access)).await.status(),
        StatusCode::OK
    );
    let r = c
        .server
        .client
        .post(c.server.url("/api/v1/auth/logout"))
        .header("content-type", "text/plain")
        .body("refresh_token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = c
        .server
        .client
        .post(c.server.url("/auth/logout"))
        .header("content-type", "application/json")
        .body("{\"refresh_token\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(detail(r).await.is_array());
}
