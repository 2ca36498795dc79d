//! The account lifecycle: verification mails through a lent mailer (a stub that keeps what it
//! is given) and their single-use tokens; mail failures, a missing mailer, templates. The
//! password reset is in `reset.rs`.

use std::sync::Mutex;
use std::time::Duration;

use kernel::mail::{Mail, MailError};

use super::*;

kernel::backend_tests! {
    registration_mails_a_link_that_verifies_the_address_once,
    verification_is_asked_with_a_token_or_an_address,
    login_can_require_a_verified_address,
    mail_failures_and_a_missing_mailer,
    templates_come_from_a_folder,
}

/// A mailer that keeps every mail, or fails with `failure` when set.
#[derive(Default)]
pub struct Capture {
    pub mails: Mutex<Vec<Mail>>,
    pub failure: Mutex<Option<MailError>>,
}

#[async_trait::async_trait]
impl Mailer for Capture {
    async fn send(&self, mail: Mail) -> Result<String, MailError> {
        if let Some(failure) = self.failure.lock().unwrap().clone() {
            return Err(failure);
        }
        let mut mails = self.mails.lock().unwrap();
        mails.push(mail);
        Ok(format!("mail-{}", mails.len()))
    }
}

impl Capture {
    pub fn count(&self, to: &str, kind: &str) -> usize {
        let mails = self.mails.lock().unwrap();
        mails
            .iter()
            .filter(|m| m.to == to && m.kind == kind)
            .count()
    }

    /// The `n`th mail (from 1) of `kind` to `to`, waited for (mails may be sent after the
    /// answer).
    pub async fn nth(&self, to: &str, kind: &str, n: usize) -> Mail {
        for _ in 0..200 {
            {
                let mails = self.mails.lock().unwrap();
                let found: Vec<&Mail> = mails
                    .iter()
                    .filter(|m| m.to == to && m.kind == kind)
                    .collect();
                if found.len() >= n {
                    return found[n - 1].clone();
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no mail {n} of kind {kind} to {to}");
    }

    /// Lets mails sent after an answer arrive, then says how many there are.
    pub async fn settled_count(&self, to: &str, kind: &str) -> usize {
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.count(to, kind)
    }
}

/// The token of a mail's link.
pub fn token_of(mail: &Mail) -> String {
    let at = mail.text.find("token=").expect("a link with a token") + "token=".len();
    mail.text[at..at + 64].to_owned()
}

pub async fn with_capture(db: TestDb, config: AuthConfig) -> (Ctx, Arc<Capture>) {
    let capture = Arc::new(Capture::default());
    let c = start_with(db, config, Some(capture.clone())).await;
    (c, capture)
}

impl Ctx {
    pub async fn post_json(
        &self,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        let mut req = self.server.client.post(self.server.url(path)).json(&body);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

async fn registration_mails_a_link_that_verifies_the_address_once(db: TestDb) {
    let (c, mails) = with_capture(db, AuthConfig::with_secret(SECRET)).await;
    let r = c
        .register(
            json!({"email": "ada@example.com", "password": "password123", "full_name": "Ada"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let user: Value = r.json().await.unwrap();
    assert_eq!(user["email_verified"], false);
    let mail = mails.nth("ada@example.com", "verify_email", 1).await;
    assert_eq!(mail.subject, "Verify your e-mail address");
    let token = token_of(&mail);
    assert!(
        mail.text
            .contains(&format!("http://localhost:8000/verify-email?token={token}")),
        "{}",
        mail.text
    );
    assert!(mail.text.contains("Hello Ada") && mail.text.contains("2 days"));
    assert!(mail.html.as_deref().unwrap().contains(&token));
    // Stored as its SHA-256, never as it was sent.
    let id = user["id"].as_i64().unwrap();
    let stored = auth_core::testing::stored_token_hashes(&c.pool, id)
        .await
        .unwrap();
    assert!(!stored.contains(&token), "{stored:?}");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].len(), 64);
    assert_ne!(stored[0], token);

    let (status, body) = c
        .post_json("/auth/verify", None, json!({"token": token}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["email_verified"], true);
    assert_eq!(body["email"], "ada@example.com");
    let (_, access) = c.user("other@example.com").await;
    let ada = c.tokens("ada@example.com", "password123").await;
    let me: Value = c
        .get("/auth/me", Some(&ada.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["email_verified"], true);
    let me: Value = c.get("/auth/me", Some(&access)).await.json().await.unwrap();
    assert_eq!(me["email_verified"], false);
    // Once only, under either prefix.
    for path in ["/auth/verify", "/api/v1/auth/verify"] {
        let (status, body) = c.post_json(path, None, json!({"token": token})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["detail"], "Invalid or expired token");
    }
    // An inactive registration gets no mail.
    c.register(json!({"email": "off@example.com", "password": "password123", "is_active": false}))
        .await;
    assert_eq!(
        mails.settled_count("off@example.com", "verify_email").await,
        0
    );
}

async fn verification_is_asked_with_a_token_or_an_address(db: TestDb) {
    let (c, mails) = with_capture(db, AuthConfig::with_secret(SECRET)).await;
    let (_, token) = c.user("grace@example.com").await;
    mails.nth("grace@example.com", "verify_email", 1).await;
    // With a bearer token: the token's user, the mail waited for.
    let (status, body) = c
        .post_json("/auth/verify/request", Some(&token), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(mails.count("grace@example.com", "verify_email"), 2);
    let first = token_of(&mails.nth("grace@example.com", "verify_email", 1).await);
    let second = token_of(&mails.nth("grace@example.com", "verify_email", 2).await);
    assert_ne!(first, second);
    let (status, _) = c
        .post_json("/auth/verify", None, json!({"token": second}))
        .await;
    assert_eq!(status, StatusCode::OK);
    // Verifying used up the other link too.
    let (status, _) = c
        .post_json("/auth/verify", None, json!({"token": first}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = c
        .post_json("/auth/verify/request", Some(&token), json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["detail"], "Email already verified");
    // Without a token: an address, answered the same whatever it is.
    c.user("hopper@example.com").await;
    for email in [
        "HOPPER@example.com",
        "nobody@example.com",
        "grace@example.com",
    ] {
        let (status, body) = c
            .post_json("/auth/verify/request", None, json!({"email": email}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{email}");
        assert_eq!(
            body["message"],
            "If an account with this address needs verifying, a verification link has been sent"
        );
    }
    mails.nth("hopper@example.com", "verify_email", 2).await;
    assert_eq!(
        mails
            .settled_count("nobody@example.com", "verify_email")
            .await,
        0
    );
    assert_eq!(
        mails.count("grace@example.com", "verify_email"),
        2,
        "verified already"
    );
    // Neither a token nor an address; a bad token; bad addresses.
    let r = c
        .server
        .client
        .post(c.server.url("/auth/verify/request"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(detail(r).await, "Not authenticated");
    let (status, body) = c
        .post_json("/auth/verify/request", Some("garbage"), json!({}))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["detail"], "Could not validate credentials");
    for (body, field, message) in [
        (json!({}), "email", "Field required"),
        (json!({"email": "nope"}), "email", "Invalid email format"),
        (
            json!({"email": "a\u{0}@example.com"}),
            "email",
            "Must not contain NUL characters",
        ),
        (json!({"email": 5}), "body", ""),
    ] {
        let (status, answer) = c.post_json("/auth/verify/request", None, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["detail"][0]["field"], field, "{answer}");
        if !message.is_empty() {
            assert_eq!(answer["detail"][0]["message"], message);
        }
    }
    for token in ["", "short", &"g".repeat(64), &"a".repeat(100_000)] {
        let (status, body) = c
            .post_json("/auth/verify", None, json!({"token": token}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, body) = c.post_json("/auth/verify", None, json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        json!([{"field": "token", "message": "Field required"}])
    );
    let (status, _) = c
        .post_json("/auth/verify", None, json!({"token": "ab\u{0}c"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

async fn login_can_require_a_verified_address(db: TestDb) {
    let config = AuthConfig {
        require_verified_email: true,
        ..AuthConfig::with_secret(SECRET)
    };
    let (c, mails) = with_capture(db, config).await;
    c.register(json!({"email": "new@example.com", "password": "password123"}))
        .await;
    let r = c.login("new@example.com", "password123").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"], "Email not verified");
    assert_eq!(body["error"], "invalid_grant");
    // A wrong password still says only that.
    let r = c.login("new@example.com", "wrong-password").await;
    assert_eq!(detail(r).await, "Incorrect email or password");
    // Without a session, the mail is asked for by address.
    let (status, _) = c
        .post_json(
            "/auth/verify/request",
            None,
            json!({"email": "new@example.com"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let token = token_of(&mails.nth("new@example.com", "verify_email", 2).await);
    let (status, _) = c
        .post_json("/auth/verify", None, json!({"token": token}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        c.login("new@example.com", "password123").await.status(),
        StatusCode::OK
    );
    // Accounts made by the operator (the CLI) count as verified.
    let input = auth_core::Registration {
        email: Some("ops@example.com".into()),
        password: Some("password123".into()),
        ..Default::default()
    };
    c.module
        .service()
        .create_user(input, Role::Admin)
        .await
        .unwrap();
    assert_eq!(
        c.login("ops@example.com", "password123").await.status(),
        StatusCode::OK
    );
}

async fn mail_failures_and_a_missing_mailer(db: TestDb) {
    let url = db.url.clone();
    let (c, mails) = with_capture(db, AuthConfig::with_secret(SECRET)).await;
    let (_, token) = c.user("ada@example.com").await;
    mails.nth("ada@example.com", "verify_email", 1).await;
    *mails.failure.lock().unwrap() = Some(MailError::Provider("the provider is down".into()));
    let (status, body) = c
        .post_json("/auth/verify/request", Some(&token), json!({}))
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        body["detail"],
        "Could not send the mail: mail provider error: the provider is down"
    );
    // A caller who does not wait for the mail is not told.
    let (status, _) = c
        .post_json(
            "/auth/password/forgot",
            None,
            json!({"email": "ada@example.com"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // A mailer whose channel is not configured: the link goes to the log, the answer is 202.
    *mails.failure.lock().unwrap() = Some(MailError::NotConfigured("RESEND_API_KEY".into()));
    let (status, _) = c
        .post_json("/auth/verify/request", Some(&token), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);

    // No mailer at all (auth alone): the answers are the same, and the operator's reset link
    // works like a mailed one.
    let pool = DbPool::connect(&url, 1).await.unwrap();
    let deps = Deps::new(pool).unwrap();
    let alone = AuthModule::build(AuthConfig::with_secret(SECRET), &deps)
        .await
        .unwrap();
    deps.capabilities.seal();
    let alone = Arc::new(alone);
    let server = spawn_modules(vec![alone.clone()]);
    let r = server
        .client
        .post(server.url("/auth/password/forgot"))
        .json(&json!({"email": "ada@example.com"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let r = server
        .client
        .post(server.url("/auth/verify/request"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let (user, issued) = alone.service().reset_link("ADA@example.com").await.unwrap();
    assert_eq!(user.email, "ada@example.com");
    assert_eq!(
        issued.link,
        format!(
            "http://localhost:8000/reset-password?token={}",
            issued.token
        )
    );
    let r = server
        .client
        .post(server.url("/auth/password/reset"))
        .json(&json!({"token": issued.token, "password": "from-the-cli-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        c.login("ada@example.com", "from-the-cli-1").await.status(),
        StatusCode::OK
    );
    assert!(matches!(
        alone.service().reset_link("nobody@example.com").await,
        Err(auth_core::AuthError::UserNotFound)
    ));
    let matches = auth_core::cli::command()
        .try_get_matches_from(["users", "reset-link", "nobody@example.com"])
        .unwrap();
    use kernel::module::Module;
    assert_eq!(
        alone.run_command("users", &matches).await,
        Err("no user with e-mail nobody@example.com".to_owned())
    );
}

async fn templates_come_from_a_folder(db: TestDb) {
    let folder = tempfile_dir();
    std::fs::write(
        folder.join("password_reset.txt"),
        "Dear {{name}}, reset at {{link}} within {{expires_in}} ({{email}}).",
    )
    .unwrap();
    std::fs::write(folder.join("password_reset.subject"), "Your reset link").unwrap();
    let config = AuthConfig {
        mail_templates: Some(folder.clone()),
        reset_password_url: "https://app.example.com/#/reset?lang=en".into(),
        reset_lifetime: chrono::TimeDelta::minutes(90),
        ..AuthConfig::with_secret(SECRET)
    };
    let (c, mails) = with_capture(db, config.clone()).await;
    c.register(
        json!({"email": "ada@example.com", "password": "password123", "full_name": "Ada <L>"}),
    )
    .await;
    c.post_json(
        "/auth/password/forgot",
        None,
        json!({"email": "ada@example.com"}),
    )
    .await;
    let mail = mails.nth("ada@example.com", "password_reset", 1).await;
    let token = token_of(&mail);
    assert_eq!(mail.subject, "Your reset link");
    assert_eq!(
        mail.text,
        format!(
            "Dear Ada <L>, reset at https://app.example.com/#/reset?lang=en&token={token} \
             within 90 minutes (ada@example.com)."
        )
    );
    assert_eq!(mail.html, None);
    // The verification mail keeps the built-in texts.
    let verify = mails.nth("ada@example.com", "verify_email", 1).await;
    assert_eq!(verify.subject, "Verify your e-mail address");
    // A template with an unknown placeholder stops the build, naming the setting and the file.
    std::fs::write(folder.join("verify_email.txt"), "{{password}}").unwrap();
    let deps = Deps::new(c.pool.clone()).unwrap();
    let error = AuthModule::build(config, &deps)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("AUTH_MAIL_TEMPLATES") && error.contains("verify_email.txt"),
        "{error}"
    );
    std::fs::remove_dir_all(folder).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "keel-auth-templates-{}",
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
