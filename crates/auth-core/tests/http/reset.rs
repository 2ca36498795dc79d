//! Forgotten passwords: the reset mail, its single-use expiring token, and what a reset ends.

use super::lifecycle::{token_of, with_capture};
use super::*;

kernel::backend_tests! {
    a_reset_changes_the_password_and_ends_every_session,
    forgot_answers_the_same_whatever_the_address,
    reset_tokens_are_single_use_expiring_and_checked,
}

async fn a_reset_changes_the_password_and_ends_every_session(db: TestDb) {
    let (c, mails) = with_capture(db, AuthConfig::with_secret(SECRET)).await;
    let (id, _) = c.user("ada@example.com").await;
    let session = c.tokens("ada@example.com", "password123").await;
    let (_, other_user) = c.user("bob@example.com").await;
    let (status, body) = c
        .post_json(
            "/auth/password/forgot",
            None,
            json!({"email": "Ada@EXAMPLE.com"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(
        body["message"],
        "If an account with this address exists, a password reset link has been sent"
    );
    let mail = mails.nth("ada@example.com", "password_reset", 1).await;
    assert_eq!(mail.subject, "Reset your password");
    assert!(mail.text.contains("30 minutes"));
    let token = token_of(&mail);
    assert!(mail.text.contains(&format!(
        "http://localhost:8000/reset-password?token={token}"
    )));
    assert!(
        !auth_core::testing::stored_token_hashes(&c.pool, id)
            .await
            .unwrap()
            .contains(&token)
    );
    // The password rules come first, and leave the token usable.
    let (status, body) = c
        .post_json(
            "/auth/password/reset",
            None,
            json!({"token": token, "password": "short"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        json!([{"field": "password", "message": "Password too short"}])
    );
    let (status, body) = c
        .post_json(
            "/api/v1/auth/password/reset",
            None,
            json!({"token": token, "password": "new-password-456"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["message"], "Password has been reset");
    // Every older session ended: the access token and the refresh token.
    let r = c.get("/auth/me", Some(&session.access)).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(detail(r).await, "Could not validate credentials");
    let (status, body) = c.refresh(&session.refresh).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    // Another user's session is untouched.
    assert_eq!(
        c.get("/auth/me", Some(&other_user)).await.status(),
        StatusCode::OK
    );
    // The old password is refused, the new one works, and the address counts as verified.
    assert_eq!(
        c.login("ada@example.com", "password123").await.status(),
        StatusCode::UNAUTHORIZED
    );
    let fresh = c.tokens("ada@example.com", "new-password-456").await;
    let me: Value = c
        .get("/auth/me", Some(&fresh.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["email_verified"], true);
    // Once only.
    let (status, body) = c
        .post_json(
            "/auth/password/reset",
            None,
            json!({"token": token, "password": "another-pass-789"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Invalid or expired token");
    assert_eq!(
        c.login("ada@example.com", "new-password-456")
            .await
            .status(),
        StatusCode::OK
    );
}

async fn forgot_answers_the_same_whatever_the_address(db: TestDb) {
    let (c, mails) = with_capture(db, AuthConfig::with_secret(SECRET)).await;
    c.user("known@example.com").await;
    c.register(json!({"email": "off@example.com", "password": "password123", "is_active": false}))
        .await;
    let mut answers = Vec::new();
    for email in ["known@example.com", "nobody@example.com", "off@example.com"] {
        answers.push(
            c.post_json("/auth/password/forgot", None, json!({"email": email}))
                .await,
        );
    }
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    assert_eq!(answers[0].0, StatusCode::ACCEPTED);
    mails.nth("known@example.com", "password_reset", 1).await;
    assert_eq!(
        mails
            .settled_count("nobody@example.com", "password_reset")
            .await,
        0
    );
    assert_eq!(
        mails.count("off@example.com", "password_reset"),
        0,
        "inactive"
    );
    // Limited per address (5 an hour by default), whatever its case, known or not.
    for _ in 0..4 {
        let (status, _) = c
            .post_json(
                "/auth/password/forgot",
                None,
                json!({"email": "NOBODY@example.com"}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let r = c
        .server
        .client
        .post(c.server.url("/auth/password/forgot"))
        .json(&json!({"email": "nobody@example.com"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry));
    assert_eq!(
        detail(r).await,
        "Too many requests. Please try again later."
    );
    let (status, _) = c
        .post_json(
            "/auth/password/forgot",
            None,
            json!({"email": "known@example.com"}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "another address has its own count"
    );
    // Bad bodies are 4xx, never 500.
    for (body, message) in [
        (json!({}), "Field required"),
        (json!({"email": "x"}), "Invalid email format"),
        (
            json!({"email": "a\u{0}b@example.com"}),
            "Must not contain NUL characters",
        ),
        (
            json!({"email": format!("{}@example.com", "a".repeat(300))}),
            "Invalid email format",
        ),
    ] {
        let (status, answer) = c.post_json("/auth/password/forgot", None, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            answer["detail"],
            json!([{"field": "email", "message": message}])
        );
    }
    let huge = format!("{{\"email\": \"{}\"}}", "a".repeat(2 * 1024 * 1024));
    let r = c
        .server
        .client
        .post(c.server.url("/auth/password/forgot"))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let r = c
        .server
        .client
        .post(c.server.url("/auth/password/forgot"))
        .header("content-type", "application/json")
        .body("[\"known@example.com\"]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

async fn reset_tokens_are_single_use_expiring_and_checked(db: TestDb) {
    let (c, mails) = with_capture(db, AuthConfig::with_secret(SECRET)).await;
    let (ada, _) = c.user("ada@example.com").await;
    c.user("bob@example.com").await;
    let forgot =
        |email: &'static str| c.post_json("/auth/password/forgot", None, json!({"email": email}));
    let reset = |token: String, password: &'static str| {
        c.post_json(
            "/auth/password/reset",
            None,
            json!({"token": token, "password": password}),
        )
    };
    // Expired.
    forgot("ada@example.com").await;
    let expired = token_of(&mails.nth("ada@example.com", "password_reset", 1).await);
    auth_core::testing::expire_tokens(&c.pool, ada)
        .await
        .unwrap();
    let (status, body) = reset(expired, "new-password-1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Invalid or expired token");
    // Two links: the newer one used up the older.
    forgot("ada@example.com").await;
    let older = token_of(&mails.nth("ada@example.com", "password_reset", 2).await);
    forgot("ada@example.com").await;
    let newer = token_of(&mails.nth("ada@example.com", "password_reset", 3).await);
    assert_eq!(reset(newer, "new-password-2").await.0, StatusCode::OK);
    assert_eq!(
        reset(older, "new-password-3").await.0,
        StatusCode::BAD_REQUEST
    );
    // A token resets its own account only: Bob's token never touches Ada.
    forgot("bob@example.com").await;
    let bobs = token_of(&mails.nth("bob@example.com", "password_reset", 1).await);
    assert_eq!(reset(bobs, "bobs-new-password").await.0, StatusCode::OK);
    assert_eq!(
        c.login("ada@example.com", "new-password-2").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        c.login("bob@example.com", "bobs-new-password")
            .await
            .status(),
        StatusCode::OK
    );
    // A verification token is no reset token, and the reverse.
    let verify = token_of(&mails.nth("bob@example.com", "verify_email", 1).await);
    assert_eq!(
        reset(verify.clone(), "whatever-123").await.0,
        StatusCode::BAD_REQUEST
    );
    forgot("bob@example.com").await;
    let reset_token = token_of(&mails.nth("bob@example.com", "password_reset", 2).await);
    let (status, _) = c
        .post_json("/auth/verify", None, json!({"token": reset_token}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Malformed tokens.
    for token in ["", "0", &"F".repeat(64), &"0".repeat(1_000_000)] {
        let (status, body) = reset(token.to_owned(), "new-password-4").await;
        assert!(
            status == StatusCode::BAD_REQUEST || status == StatusCode::PAYLOAD_TOO_LARGE,
            "{status} {body}"
        );
    }
    let (status, body) = reset("a\u{0}".to_owned(), "new-password-4").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["detail"][0]["field"], "token");
    let (status, body) = c.post_json("/auth/password/reset", None, json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        json!([
            {"field": "token", "message": "Field required"},
            {"field": "password", "message": "Field required"},
        ])
    );
    let (status, body) = reset(reset_token.clone(), "pass\u{0}word-123").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"][0]["message"],
        "Must not contain NUL characters"
    );
    let (status, _) = reset(reset_token, TOO_LONG).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

/// 73 bytes: one over bcrypt's limit.
const TOO_LONG: &str = "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp";
