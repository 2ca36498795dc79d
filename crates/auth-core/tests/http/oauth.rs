//! The token endpoint as an OAuth 2.0 client reads it (RFC 6749 §4.3, §5.1, §5.2), with the spec's
//! `detail` texts and status codes unchanged.

use super::*;

kernel::backend_tests! {
    a_token_answer_is_rfc_6749_and_uncacheable,
    every_token_error_carries_its_oauth_code_and_the_spec_detail,
    only_the_password_grant_issues_tokens,
    a_rate_limited_login_is_temporarily_unavailable,
}

impl Ctx {
    async fn token_form(
        &self,
        fields: &[(&str, &str)],
    ) -> (StatusCode, reqwest::header::HeaderMap, Value) {
        let r = self
            .server
            .client
            .post(self.server.url("/auth/token"))
            .form(fields)
            .send()
            .await
            .unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        (status, headers, r.json().await.unwrap())
    }
}

/// The status, `error` and `detail` of an answer, with its `error_description` checked: present,
/// and printable ASCII without `"` or `\` (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, body: &Value) -> (u16, &str, Value) {
    let description = body["error_description"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        description
            .chars()
            .all(|c| (' '..='~').contains(&c) && c != '"' && c != '\\'),
        "{description}"
    );
    (
        status.as_u16(),
        body["error"].as_str().unwrap_or_else(|| panic!("{body}")),
        body["detail"].clone(),
    )
}

async fn a_token_answer_is_rfc_6749_and_uncacheable(db: TestDb) {
    let c = ctx(db).await;
    c.user("ada@example.com").await;
    for fields in [
        vec![("username", "ada@example.com"), ("password", "password123")],
        vec![
            ("grant_type", "password"),
            ("username", "ada@example.com"),
            ("password", "password123"),
        ],
        // What OAuth 2.0 client libraries add: a scope and the client's id, both ignored.
        vec![
            ("grant_type", "password"),
            ("username", "ada@example.com"),
            ("password", "password123"),
            ("scope", "read write"),
            ("client_id", "some-app"),
        ],
    ] {
        let (status, headers, body) = c.token_form(&fields).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(headers["cache-control"], "no-store");
        assert_eq!(headers["pragma"], "no-cache");
        assert_eq!(body["token_type"], "bearer");
        assert_eq!(body["expires_in"], 30 * 60);
        let token = body["access_token"].as_str().unwrap();
        assert_eq!(
            c.get("/auth/me", Some(token)).await.status(),
            StatusCode::OK
        );
    }
    // A client that authenticates itself with HTTP Basic (client_secret_basic) gets a token too.
    let r = c
        .server
        .client
        .post(c.server.url("/api/v1/auth/token"))
        .basic_auth("some-app", Some("its-secret"))
        .form(&[
            ("grant_type", "password"),
            ("username", "ada@example.com"),
            ("password", "password123"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

async fn every_token_error_carries_its_oauth_code_and_the_spec_detail(db: TestDb) {
    let c = ctx(db).await;
    c.user("ada@example.com").await;
    c.register(
        json!({"email": "sleepy@example.com", "password": "password123", "is_active": false}),
    )
    .await;
    type Case<'a> = (Vec<(&'a str, &'a str)>, (u16, &'a str, Value));
    let cases: Vec<Case> = vec![
        (
            vec![
                ("username", "ada@example.com"),
                ("password", "wrong-password"),
            ],
            (401, "invalid_grant", json!("Incorrect email or password")),
        ),
        (
            vec![
                ("username", "nobody@example.com"),
                ("password", "password123"),
            ],
            (401, "invalid_grant", json!("Incorrect email or password")),
        ),
        (
            vec![
                ("grant_type", "password"),
                ("username", "sleepy@example.com"),
                ("password", "password123"),
            ],
            (401, "invalid_grant", json!("Inactive user")),
        ),
        (
            vec![("username", "ada@example.com")],
            (
                422,
                "invalid_request",
                json!([{"field": "password", "message": "Field required"}]),
            ),
        ),
        (
            vec![],
            (
                422,
                "invalid_request",
                json!([{"field": "username", "message": "Field required"}, {"field": "password", "message": "Field required"}]),
            ),
        ),
        (
            vec![
                ("username", "ada\u{0}@example.com"),
                ("password", "password123"),
            ],
            (
                422,
                "invalid_request",
                json!([{"field": "username", "message": "Must not contain NUL characters"}]),
            ),
        ),
    ];
    for (fields, expected) in cases {
        let (status, headers, body) = c.token_form(&fields).await;
        assert_eq!(oauth_error(status, &body), expected, "{fields:?}");
        assert!(body.get("access_token").is_none());
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(headers["www-authenticate"], "Bearer");
        }
    }
    // A body that is not a form, and one over the body limit.
    let r = c
        .server
        .client
        .post(c.server.url("/auth/token"))
        .json(&json!({"username": "ada@example.com", "password": "password123"}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(oauth_error(status, &body).1, "invalid_request", "{body}");
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let big = format!("username={}&password=x", "a".repeat(2 * 1024 * 1024));
    let r = c
        .server
        .client
        .post(c.server.url("/auth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(big)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(oauth_error(status, &body).1, "invalid_request");
}

async fn only_the_password_grant_issues_tokens(db: TestDb) {
    let c = ctx(db).await;
    c.user("ada@example.com").await;
    for grant in [
        "client_credentials",
        "refresh_token",
        "authorization_code",
        "PASSWORD",
    ] {
        let fields = [
            ("grant_type", grant),
            ("username", "ada@example.com"),
            ("password", "password123"),
        ];
        let (status, _, body) = c.token_form(&fields).await;
        let (code, error, detail) = oauth_error(status, &body);
        assert_eq!(
            (code, error),
            (400, "unsupported_grant_type"),
            "{grant}: {body}"
        );
        assert!(
            detail.as_str().unwrap().contains("Only the password grant"),
            "{body}"
        );
        assert!(body.get("access_token").is_none(), "{grant} issued a token");
    }
    // Refused before the credentials are looked at: a wrong password is not what it says.
    let fields = [
        ("grant_type", "client_credentials"),
        ("username", "ada@example.com"),
        ("password", "nope"),
    ];
    assert_eq!(
        c.token_form(&fields).await.2["error"],
        "unsupported_grant_type"
    );
    // An empty grant_type, as an HTML form sends it, is the spec's form without one.
    let fields = [
        ("grant_type", ""),
        ("username", "ada@example.com"),
        ("password", "password123"),
    ];
    assert_eq!(c.token_form(&fields).await.0, StatusCode::OK);
}

async fn a_rate_limited_login_is_temporarily_unavailable(db: TestDb) {
    let mut config = AuthConfig::with_secret(SECRET);
    config.rate_limit = true;
    let c = start(db, config).await;
    let fields = [
        ("username", "nobody@example.com"),
        ("password", "password123"),
    ];
    for _ in 0..10 {
        assert_eq!(c.token_form(&fields).await.0, StatusCode::UNAUTHORIZED);
    }
    let (status, headers, body) = c.token_form(&fields).await;
    let (code, error, detail) = oauth_error(status, &body);
    assert_eq!(
        (code, error, detail),
        (
            429,
            "temporarily_unavailable",
            json!("Too many requests. Please try again later.")
        )
    );
    assert!(headers.contains_key("retry-after"));
}
