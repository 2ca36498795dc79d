//! The suppression list: filled by the providers' webhooks as the simulator signs them (Resend's
//! hard bounces and complaints, Twilio's 21610 and STOP replies), consulted before every email and
//! SMS (409 naming the recipient, nothing sent, nothing logged), listed and emptied by
//! administrators. The mailer and the CLI: `mailer.rs`.

use provider_sim::{CallbackOptions, Delivery};

use super::*;

kernel::backend_tests! {
    hard_bounces_and_complaints_suppress_their_recipient,
    twilio_opt_outs_and_stop_replies_suppress_the_number,
    inbound_messages_are_verified_and_read_like_twilio,
    admins_list_filter_and_remove_entries,
    a_messaging_service_send_to_an_opted_out_number_fails_later_and_suppresses,
}

const RESEND_PATH: &str = "/api/v1/comms/webhooks/resend";
const INBOUND_PATH: &str = "/api/v1/comms/webhooks/twilio/inbound";

fn to(url: String) -> CallbackOptions {
    CallbackOptions {
        url: Some(url),
        ..CallbackOptions::default()
    }
}

fn answer(delivery: &Delivery) -> Value {
    assert_eq!(delivery.status, Some(200), "{delivery:?}");
    serde_json::from_str(&delivery.response).unwrap()
}

impl Ctx {
    pub(crate) async fn delete(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self
            .server
            .client
            .delete(self.server.url(&format!("/api/v1/comms{path}")));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn email_to(&self, to: Value) -> (u16, Value) {
        self.post(
            "/email/send",
            Some(USER),
            json!({"to": to, "subject": "Hi", "text": "Hello"}),
        )
        .await
    }

    async fn sms_to(&self, to: &str) -> (u16, Value) {
        self.post("/sms/send", Some(USER), json!({"to": to, "body": "hi"}))
            .await
    }

    /// The simulator's own signed Resend event about an email it received.
    async fn sim_resend(&self, id: &str, kind: &str, options: CallbackOptions) -> Value {
        let options = CallbackOptions {
            url: Some(self.server.url(RESEND_PATH)),
            ..options
        };
        let deliveries = self.sim.resend_event(id, kind, &options).await.unwrap();
        answer(&deliveries[0])
    }

    /// An SMS from `from` to the module's number, as the simulator posts it.
    async fn sim_inbound(&self, from: &str, body: &str) -> Delivery {
        let options = to(self.server.url(INBOUND_PATH));
        let mut deliveries = self
            .sim
            .twilio_inbound_sms(from, Some(FROM_NUMBER), body, &options)
            .await
            .unwrap();
        deliveries.remove(0)
    }

    async fn logged_total(&self) -> i64 {
        let (status, body) = self.get("/messages", Some(ADMIN)).await;
        assert_eq!(status, 200, "{body}");
        body["total"].as_i64().unwrap()
    }

    async fn suppressions(&self, query: &str) -> Value {
        let (status, body) = self
            .get(&format!("/suppressions{query}"), Some(ADMIN))
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

async fn hard_bounces_and_complaints_suppress_their_recipient(db: TestDb) {
    let c = start(db).await;
    let (_, sent) = c.email_to(json!("Ada@Example.com")).await;
    let id = sent["id"].as_str().unwrap().to_owned();
    assert_eq!(
        c.sim_resend(&id, "email.bounced", CallbackOptions::default())
            .await,
        json!({"applied": true, "suppressed": ["ada@example.com"]})
    );
    // A later send to the address, in any case, among others or in bcc: 409, naming it, and
    // neither the provider nor the log sees it.
    c.sim.clear_journal();
    let before = c.logged_total().await;
    for body in [
        json!({"to": "ada@example.com", "subject": "Hi", "text": "Hello"}),
        json!({"to": ["b@example.com", " ADA@example.COM"], "subject": "Hi", "text": "Hello"}),
        json!({"to": "b@example.com", "bcc": ["ada@example.com"], "subject": "Hi", "text": "Hello"}),
    ] {
        let (status, answer) = c.post("/email/send", Some(USER), body.clone()).await;
        assert_eq!(
            (status, answer),
            (
                409,
                json!({"detail": "Recipient is suppressed: ada@example.com (hard_bounce)"})
            ),
            "{body}"
        );
    }
    assert!(c.sim.journal().is_empty(), "{:?}", c.sim.journal());
    assert_eq!(c.logged_total().await, before);
    // A replayed bounce adds nothing; the message moved on all the same the first time.
    assert_eq!(
        c.sim_resend(&id, "email.bounced", CallbackOptions::default())
            .await,
        json!({"applied": false})
    );
    assert_eq!(c.logged(&id).await["status"], "bounced");

    // A transient bounce moves the log and suppresses nothing.
    let (_, soft) = c.email_to(json!(["soft@example.com"])).await;
    let soft = soft["id"].as_str().unwrap().to_owned();
    let transient = CallbackOptions {
        bounce_type: Some("Transient".into()),
        ..CallbackOptions::default()
    };
    assert_eq!(
        c.sim_resend(&soft, "email.bounced", transient).await,
        json!({"applied": true})
    );
    assert_eq!(c.email_to(json!(["soft@example.com"])).await.0, 200);

    // A complaint suppresses; several suppressed recipients are all named, in the order given.
    let (_, spam) = c.email_to(json!(["grumpy@example.com"])).await;
    let spam = spam["id"].as_str().unwrap().to_owned();
    c.sim_resend(&spam, "email.delivered", CallbackOptions::default())
        .await;
    assert_eq!(
        c.sim_resend(&spam, "email.complained", CallbackOptions::default())
            .await,
        json!({"applied": true, "suppressed": ["grumpy@example.com"]})
    );
    let (status, body) = c
        .email_to(json!([
            "grumpy@example.com",
            "ok@example.com",
            "ada@example.com"
        ]))
        .await;
    assert_eq!(status, 409);
    assert_eq!(
        body["detail"],
        "Recipients are suppressed: grumpy@example.com (complaint), ada@example.com (hard_bounce)"
    );

    // An email to several recipients does not say which bounced: none is suppressed.
    let (_, group) = c
        .email_to(json!(["one@example.com", "two@example.com"]))
        .await;
    let group = group["id"].as_str().unwrap().to_owned();
    assert_eq!(
        c.sim_resend(&group, "email.bounced", CallbackOptions::default())
            .await,
        json!({"applied": true})
    );
    assert_eq!(c.email_to(json!("one@example.com")).await.0, 200);
    let list = c.suppressions("").await;
    assert_eq!(list["total"], 2, "{list}");
    let entry = &list["suppressions"][1];
    assert_eq!(entry["address"], "ada@example.com");
    assert_eq!(entry["channel"], "email");
    assert_eq!(entry["reason"], "hard_bounce");
    assert_eq!(entry["provider_id"], id.as_str());
    assert_eq!(
        entry["detail"],
        "The recipient's mail server permanently rejected the email."
    );
    // Forged or stale events suppress nothing.
    let (_, fresh) = c.email_to(json!("fresh@example.com")).await;
    let fresh = fresh["id"].as_str().unwrap().to_owned();
    for knob in [
        CallbackOptions {
            wrong_secret: true,
            ..CallbackOptions::default()
        },
        CallbackOptions {
            stale: true,
            ..CallbackOptions::default()
        },
        CallbackOptions {
            tamper: true,
            ..CallbackOptions::default()
        },
    ] {
        let options = CallbackOptions {
            url: Some(c.server.url(RESEND_PATH)),
            ..knob
        };
        let delivery = c
            .sim
            .resend_event(&fresh, "email.bounced", &options)
            .await
            .unwrap();
        assert_eq!(delivery[0].status, Some(403), "{:?}", delivery[0]);
    }
    assert_eq!(c.email_to(json!("fresh@example.com")).await.0, 200);
}

async fn twilio_opt_outs_and_stop_replies_suppress_the_number(db: TestDb) {
    let c = start(db).await;
    // A status callback that failed with 21610.
    let (_, sent) = c.sms_to("+15005550010").await;
    let sid = sent["sid"].as_str().unwrap().to_owned();
    let failed = CallbackOptions {
        error_code: Some("21610".into()),
        ..CallbackOptions::default()
    };
    let delivery = c
        .sim
        .twilio_status_callback_with(&sid, "failed", &failed)
        .await
        .unwrap();
    assert_eq!(
        answer(&delivery[0]),
        json!({"applied": true, "suppressed": ["+15005550010"]})
    );
    assert_eq!(c.logged(&sid).await["error"], "Twilio error 21610");
    c.sim.clear_journal();
    let before = c.logged_total().await;
    assert_eq!(
        c.sms_to("+15005550010").await,
        (
            409,
            json!({"detail": "Recipient is suppressed: +15005550010 (unsubscribed)"})
        )
    );
    assert!(c.sim.journal().is_empty());
    assert_eq!(c.logged_total().await, before);
    // Another failure (30003, unreachable) suppresses nothing.
    let (_, other) = c.sms_to("+15005550012").await;
    let other = other["sid"].as_str().unwrap().to_owned();
    let delivery = c
        .sim
        .twilio_status_callback(&other, "failed")
        .await
        .unwrap();
    assert_eq!(answer(&delivery), json!({"applied": true}));
    assert_eq!(c.sms_to("+15005550012").await.0, 200);
    // Calls are not SMS: a number that opted out of messages can still be called.
    let call = json!({"to": "+15005550010", "twiml_url": "https://x.example/t"});
    assert_eq!(c.post("/call/make", Some(USER), call).await.0, 200);

    // Twilio's own refusal (21610 when sending): 502 as any refusal, and the number suppressed.
    let (status, body) = c.sms_to("+15005550004").await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            502,
            Some("SMS provider error: Attempt to send to unsubscribed recipient")
        )
    );
    c.sim.clear_journal();
    assert_eq!(c.sms_to("+15005550004").await.0, 409);
    assert!(c.sim.journal().is_empty());

    // A STOP reply, then START: the simulator stops delivering and the module stops sending.
    let delivery = c.sim_inbound("+15005550011", "Stop").await;
    assert_eq!(delivery.status, Some(200), "{delivery:?}");
    assert_eq!(
        delivery.response,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response></Response>"
    );
    assert_eq!(c.sim.twilio_opted_out(), ["+15005550011"]);
    assert_eq!(
        c.sms_to("+15005550011").await,
        (
            409,
            json!({"detail": "Recipient is suppressed: +15005550011 (stop)"})
        )
    );
    let list = c.suppressions("?reason=stop").await;
    assert_eq!(list["suppressions"][0]["detail"], "replied Stop");
    c.sim_inbound("+15005550011", "START").await;
    assert!(c.sim.twilio_opted_out().is_empty());
    assert_eq!(c.sms_to("+15005550011").await.0, 200);
    // START lifts only an SMS opt-out; other messages change nothing.
    c.sim_inbound("+15005550013", "hello there").await;
    c.sim_inbound("+15005550013", "START").await;
    assert_eq!(c.sms_to("+15005550013").await.0, 200);
    assert_eq!(c.suppressions("?channel=sms").await["total"], 2);
}

async fn inbound_messages_are_verified_and_read_like_twilio(db: TestDb) {
    let c = start(db).await;
    let url = c.server.url(INBOUND_PATH);
    let token = c.sim.config().twilio_auth_token.clone();
    let post = |params: Vec<(String, String)>, signature: Option<String>| {
        let mut req = c.server.client.post(&url).form(&params);
        if let Some(signature) = signature {
            req = req.header("x-twilio-signature", signature);
        }
        async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let kind = res
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, kind, res.text().await.unwrap())
        }
    };
    let message = |from: &str, body: &str| -> Vec<(String, String)> {
        [
            ("MessageSid", "SM0123"),
            ("AccountSid", c.sim.config().twilio_account_sid.as_str()),
            ("From", from),
            ("To", FROM_NUMBER),
            ("Body", body),
            ("NumMedia", "0"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
    };
    // The default keywords, without Advanced Opt-Out's OptOutType, in any case and spacing.
    for (from, body, suppressed) in [
        ("+15005550021", " quit ", true),
        ("+15005550022", "UNSUBSCRIBE", true),
        ("+15005550023", "stop please", false),
        ("+15005550024", "HELP", false),
        ("short", "STOP", false),
    ] {
        let params = message(from, body);
        let signature = provider_sim::signing::twilio(&token, &url, &params);
        let (status, kind, text) = post(params, Some(signature)).await;
        assert_eq!(status, 200, "{text}");
        assert!(kind.unwrap().starts_with("text/xml"));
        let (_, answer) = c.sms_to(from).await;
        assert_eq!(
            answer["detail"]
                .as_str()
                .is_some_and(|d| d.contains("suppressed")),
            suppressed,
            "{from} {body}: {answer}"
        );
    }
    // Unsigned, wrongly signed or tampered: 403 as JSON, nothing suppressed.
    let params = message("+15005550031", "STOP");
    let good = provider_sim::signing::twilio(&token, &url, &params);
    let wrong = provider_sim::signing::twilio("not-the-token", &url, &params);
    let (status, _, text) = post(params.clone(), None).await;
    assert_eq!(
        (status, text.as_str()),
        (403, r#"{"detail":"Invalid signature"}"#)
    );
    assert_eq!(post(params.clone(), Some(wrong)).await.0, 403);
    let mut tampered = params.clone();
    tampered[2].1 = "+15005550032".into();
    assert_eq!(post(tampered, Some(good)).await.0, 403);
    // A body with a NUL byte (signed) is no keyword.
    let nul = message("+15005550033", "ST\0OP");
    let signature = provider_sim::signing::twilio(&token, &url, &nul);
    assert_eq!(post(nul, Some(signature)).await.0, 200);
    assert_eq!(c.suppressions("").await["total"], 2);
    // Without the auth token: 503 naming it.
    drop(c);
    let c = start_with(TestDb::sqlite().await, true, |config, _| {
        config.twilio_auth_token = None;
    })
    .await;
    let res = c
        .server
        .client
        .post(c.server.url(INBOUND_PATH))
        .form(&[("From", "+15005550010"), ("Body", "STOP")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 503);
    assert_eq!(
        res.json::<Value>().await.unwrap()["detail"],
        "Twilio webhooks not configured: TWILIO_AUTH_TOKEN is not set"
    );
}

async fn admins_list_filter_and_remove_entries(db: TestDb) {
    let c = start(db).await;
    for address in ["a@example.com", "b_c@example.com"] {
        let (_, sent) = c.email_to(json!(address)).await;
        let id = sent["id"].as_str().unwrap().to_owned();
        let kind = if address.starts_with('a') {
            "email.bounced"
        } else {
            "email.complained"
        };
        c.sim_resend(&id, kind, CallbackOptions::default()).await;
    }
    c.sim_inbound("+15005550041", "STOP").await;
    let all = c.suppressions("").await;
    assert_eq!(all["total"], 3, "{all}");
    assert_eq!(
        all["suppressions"][0]["address"], "+15005550041",
        "newest first"
    );
    assert_eq!(all["suppressions"][0]["channel"], "sms");
    for (query, total) in [
        ("?channel=sms", 1),
        ("?channel=email", 2),
        ("?reason=complaint", 1),
        ("?reason=hard_bounce&channel=sms", 0),
        ("?q=EXAMPLE.COM", 2),
        ("?q=b_c", 1),
        // `_` and `%` are the text, not wildcards.
        ("?q=a_", 0),
        ("?q=%25", 0),
        ("?q=555", 1),
        ("?channel=&reason=&q=", 3),
    ] {
        assert_eq!(c.suppressions(query).await["total"], total, "{query}");
    }
    let page = c.suppressions("?page=2&page_size=2").await;
    assert_eq!(
        (
            page["total"].as_i64(),
            page["suppressions"].as_array().unwrap().len()
        ),
        (Some(3), 1)
    );
    assert_eq!(page["suppressions"][0]["address"], "a@example.com");
    for (query, detail) in [
        ("?channel=voice", "Unknown channel: voice (email or sms)"),
        (
            "?reason=bogus",
            "Unknown reason: bogus (hard_bounce, complaint, unsubscribed or stop)",
        ),
        (
            "?q=%00",
            "Invalid address filter: it contains a NUL character",
        ),
    ] {
        let (status, body) = c.get(&format!("/suppressions{query}"), Some(ADMIN)).await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (400, Some(detail)),
            "{query}"
        );
    }
    // Administrators only.
    assert_eq!(c.get("/suppressions", Some(USER)).await.0, 403);
    assert_eq!(c.get("/suppressions", None).await.0, 401);
    assert_eq!(
        c.delete("/suppressions/a@example.com", Some(USER)).await.0,
        403
    );
    assert_eq!(c.delete("/suppressions/a@example.com", None).await.0, 401);
    // Removal by address, in any case or spacing; then sends reach the provider again.
    assert_eq!(c.email_to(json!("a@example.com")).await.0, 409);
    let (status, removed) = c.delete("/suppressions/A@Example.COM", Some(ADMIN)).await;
    assert_eq!(status, 200, "{removed}");
    assert_eq!(
        (removed["address"].as_str(), removed["reason"].as_str()),
        (Some("a@example.com"), Some("hard_bounce"))
    );
    assert_eq!(c.email_to(json!("a@example.com")).await.0, 200);
    assert_eq!(
        c.delete("/suppressions/a@example.com", Some(ADMIN)).await,
        (
            404,
            json!({"detail": "Suppression not found: a@example.com"})
        )
    );
    let (status, removed) = c
        .delete("/suppressions/%2B1%20500%20555%200041", Some(ADMIN))
        .await;
    assert_eq!(
        (status, removed["address"].as_str()),
        (200, Some("+15005550041"))
    );
    // The number is still opted out at Twilio (the simulator): its refusal suppresses it again.
    let (status, body) = c.sms_to("+15005550041").await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            502,
            Some("SMS provider error: Attempt to send to unsubscribed recipient")
        )
    );
    for bad in ["nope", "%00", "+0", "a%40b"] {
        let (status, body) = c.delete(&format!("/suppressions/{bad}"), Some(ADMIN)).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    assert_eq!(c.suppressions("").await["total"], 2);
}

/// Twilio keeps its own opt-outs: a number that replied STOP elsewhere (here, to a webhook that is
/// not this module's) is accepted through a messaging service and then fails with 21610 in the
/// simulator's own status callback, which suppresses it.
async fn a_messaging_service_send_to_an_opted_out_number_fails_later_and_suppresses(db: TestDb) {
    let c = start_sim(db, true, true, |config, _| {
        config.twilio_phone_number = None;
        config.twilio_messaging_service_sid = Some("MG00000000000000000000000000000001".into());
    })
    .await;
    let elsewhere = to(c.sim.url("/not-this-module"));
    c.sim
        .twilio_inbound_sms("+15005550051", None, "STOP", &elsewhere)
        .await
        .unwrap();
    assert_eq!(c.suppressions("").await["total"], 0);
    let (status, sent) = c.sms_to("+15005550051").await;
    assert_eq!(status, 200, "{sent}");
    let sid = sent["sid"].as_str().unwrap().to_owned();
    let mut logged = Value::Null;
    for _ in 0..200 {
        logged = c.logged(&sid).await;
        if logged["status"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        (logged["status"].as_str(), logged["error"].as_str()),
        (Some("failed"), Some("Twilio error 21610")),
        "{:?}",
        c.sim.deliveries()
    );
    let list = c.suppressions("").await;
    assert_eq!(list["suppressions"][0]["address"], "+15005550051", "{list}");
    assert_eq!(list["suppressions"][0]["reason"], "unsubscribed");
    assert_eq!(list["suppressions"][0]["provider_id"], sid.as_str());
    c.sim.clear_journal();
    assert_eq!(c.sms_to("+15005550051").await.0, 409);
    assert!(c.sim.journal().is_empty());
}
