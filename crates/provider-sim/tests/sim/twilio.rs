//! Twilio.

use super::*;

fn twilio_url(sim: &SimHandle, resource: &str) -> String {
    sim.url(&format!(
        "/2010-04-01/Accounts/{}/{resource}",
        sim.config().twilio_account_sid
    ))
}

pub(crate) async fn twilio_post(sim: &SimHandle, resource: &str, form: &str) -> (u16, Value) {
    let c = sim.config();
    let res = client()
        .post(twilio_url(sim, resource))
        .basic_auth(&c.twilio_account_sid, Some(&c.twilio_auth_token))
        .header("content-type", STRIPE_FORM)
        .body(form.to_owned())
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

fn is_rfc2822(date: &Value) -> bool {
    let text = date.as_str().unwrap_or("");
    text.ends_with(" +0000") && text.as_bytes().get(3) == Some(&b',')
}

#[tokio::test]
async fn twilio_messages_and_calls_with_signed_status_callbacks() {
    let receiver = Receiver::start(twilio_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_millis(1),
        ..SimConfig::default()
    });
    let callback =
        serde_urlencoded::to_string([("StatusCallback", receiver.url.as_str())]).unwrap();

    let (status, msg) = twilio_post(
        &sim,
        "Messages.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Body=Hello+there&{callback}"),
    )
    .await;
    assert_eq!(status, 201, "{msg}");
    let sid = msg["sid"].as_str().unwrap().to_owned();
    assert!(sid.starts_with("SM") && sid.len() == 34);
    assert_eq!(
        (msg["status"].as_str(), msg["direction"].as_str()),
        (Some("queued"), Some("outbound-api"))
    );
    assert_eq!(
        (msg["to"].as_str(), msg["body"].as_str()),
        (Some("+15551234567"), Some("Hello there"))
    );
    assert_eq!(msg["num_segments"], "1");
    assert_eq!(msg["date_sent"], Value::Null);
    assert!(is_rfc2822(&msg["date_created"]), "{}", msg["date_created"]);

    let (status, msg2) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551234567&MessagingServiceSid=MG00000000000000000000000000000001&Body=x",
    )
    .await;
    assert_eq!((status, msg2["status"].as_str()), (201, Some("accepted")));

    let (status, call) = twilio_post(
        &sim,
        "Calls.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Url=https%3A%2F%2Fexample.com%2Ftwiml&{callback}&StatusCallbackEvent=initiated&StatusCallbackEvent=completed"),
    )
    .await;
    assert_eq!(status, 201, "{call}");
    let call_sid = call["sid"].as_str().unwrap().to_owned();
    assert!(call_sid.starts_with("CA") && call_sid.len() == 34);
    assert_eq!(call["status"], "queued");
    assert_eq!(call["to_formatted"], "(555) 123-4567");
    assert!(is_rfc2822(&call["date_created"]));

    // Callbacks arrive in the background: sent and delivered for the SMS, initiated and completed for the call.
    for _ in 0..200 {
        if receiver.hits().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let hits = receiver.hits();
    assert_eq!(hits.len(), 4, "{hits:?}");
    assert!(
        hits.iter().all(|h| h.status == 204),
        "signatures verify: {hits:?}"
    );
    let form = |h: &Hit| serde_urlencoded::from_str::<HashMap<String, String>>(&h.body).unwrap();
    let sms_statuses: Vec<String> = hits
        .iter()
        .map(form)
        .filter(|f| f.get("MessageSid") == Some(&sid))
        .map(|f| f["MessageStatus"].clone())
        .collect();
    assert_eq!(sms_statuses, ["sent", "delivered"]);
    let call_statuses: Vec<String> = hits
        .iter()
        .map(form)
        .filter(|f| f.get("CallSid") == Some(&call_sid))
        .map(|f| f["CallStatus"].clone())
        .collect();
    assert_eq!(call_statuses, ["initiated", "completed"]);
    assert!(hits[0].url.ends_with("/hook?source=sim"));
    assert_eq!(sim.outbox().sms[0].status, "delivered");

    let c = sim.config();
    let fetched: Value = client()
        .get(twilio_url(&sim, &format!("Messages/{sid}.json")))
        .basic_auth(&c.twilio_account_sid, Some(&c.twilio_auth_token))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["status"], "delivered");
    let d = sim.twilio_status_callback(&sid, "failed").await.unwrap();
    assert_eq!(d.status, Some(204));
    assert!(d.body.contains("ErrorCode=30003"));
}

#[tokio::test]
async fn twilio_errors_have_twilios_shape() {
    let sim = start();
    let check = |body: &Value, status: u16, code: u64| {
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(
            body["more_info"],
            format!("https://www.twilio.com/docs/errors/{code}")
        );
        assert!(body["message"].is_string());
    };
    // An unencoded `+` arrives as a space: invalid To.
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        "To=+15551234567&From=%2B15005550006&Body=x",
    )
    .await;
    assert_eq!(status, 400);
    check(&body, 400, 21211);
    let (status, body) = twilio_post(&sim, "Messages.json", "From=%2B15005550006&Body=x").await;
    check(&body, status, 21604);
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551234567&From=%2B15005550006",
    )
    .await;
    check(&body, status, 21602);
    let long = "a".repeat(1601);
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Body={long}"),
    )
    .await;
    check(&body, status, 21617);
    let (status, body) =
        twilio_post(&sim, "Calls.json", "To=%2B15551234567&From=%2B15005550006").await;
    check(&body, status, 21205);
    let (status, body) = twilio_post(
        &sim,
        "Calls.json",
        "To=%2B15551234567&From=%2B15005550006&Url=not-a-url",
    )
    .await;
    check(&body, status, 21205);
    let (status, body) = twilio_post(
        &sim,
        "Calls.json",
        "To=%2B15005550001&From=%2B15005550006&Url=https%3A%2F%2Fx.test%2Ft",
    )
    .await;
    check(&body, status, 21211);

    let res = client()
        .post(twilio_url(&sim, "Messages.json"))
        .basic_auth(&sim.config().twilio_account_sid, Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    check(&res.json().await.unwrap(), 401, 20003);
    assert!(sim.outbox().sms.is_empty() && sim.outbox().calls.is_empty());
}

fn form_of(body: &str) -> HashMap<String, String> {
    serde_urlencoded::from_str(body).unwrap()
}

#[tokio::test]
async fn twilio_status_callbacks_on_demand_with_knobs() {
    let receiver = Receiver::start(twilio_check);
    let other = Receiver::start(twilio_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_millis(1),
        ..SimConfig::default()
    });
    let callback =
        serde_urlencoded::to_string([("StatusCallback", receiver.url.as_str())]).unwrap();
    let (_, msg) = twilio_post(
        &sim,
        "Messages.json",
        &format!("To=%2B15551234567&From=%2B15005550006&Body=Hi&{callback}"),
    )
    .await;
    let sid = msg["sid"].as_str().unwrap().to_owned();
    let (_, call) = twilio_post(
        &sim,
        "Calls.json",
        &format!(
            "To=%2B15551234567&From=%2B15005550006&Url=https%3A%2F%2Fexample.com%2Ftwiml&{callback}"
        ),
    )
    .await;
    let call_sid = call["sid"].as_str().unwrap().to_owned();
    // sent and delivered for the SMS, completed for the call.
    receiver.wait_for(3).await;
    let with = |options: CallbackOptions| {
        let sim = &sim;
        let sid = sid.clone();
        async move {
            sim.twilio_status_callback_with(&sid, "undelivered", &options)
                .await
                .unwrap()
        }
    };

    // The fields of a failed message and of a completed call.
    let normal = with(CallbackOptions::default()).await;
    assert_eq!(normal.len(), 1);
    assert_eq!(normal[0].status, Some(204));
    let form = form_of(&normal[0].body);
    assert_eq!(form["MessageSid"], sid);
    assert_eq!(form["MessageStatus"], "undelivered");
    assert_eq!(form["SmsStatus"], "undelivered");
    assert_eq!(form["ErrorCode"], "30003");
    assert_eq!(form["From"], "+15005550006");
    let completed = sim
        .twilio_status_callback(&call_sid, "completed")
        .await
        .unwrap();
    let form = form_of(&completed.body);
    assert_eq!(
        (form["CallSid"].as_str(), form["CallStatus"].as_str()),
        (call_sid.as_str(), "completed")
    );
    assert_eq!(form["CallDuration"], "7");
    assert!(!form.contains_key("ErrorCode"));

    let twice = with(CallbackOptions {
        duplicate: true,
        ..CallbackOptions::default()
    })
    .await;
    assert_eq!(twice.len(), 2);
    assert_eq!(twice[0].body, twice[1].body);
    assert_eq!(twice[0].headers, twice[1].headers);
    assert!(twice.iter().all(|d| d.status == Some(204)));

    // `wrong_token` is the JSON name of `wrong_secret` for Twilio.
    let wrong_token: CallbackOptions =
        serde_json::from_value(json!({"wrong_token": true})).unwrap();
    let failing = [
        wrong_token,
        CallbackOptions {
            no_signature: true,
            ..CallbackOptions::default()
        },
        CallbackOptions {
            tamper: true,
            ..CallbackOptions::default()
        },
    ];
    for options in failing {
        let d = with(options.clone()).await;
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].status, Some(403), "{options:?}: {d:?}");
    }

    // Another URL (signed for that URL), after a delay: it arrives.
    let elsewhere = with(CallbackOptions {
        url: Some(other.url.clone()),
        delay: Some(Duration::from_millis(20)),
        ..CallbackOptions::default()
    })
    .await;
    assert_eq!(elsewhere[0].status, Some(204));
    assert_eq!(other.wait_for(1).await.len(), 1);

    // Through the control API.
    let res: Value = client()
        .post(sim.url(&format!("/_sim/twilio/{sid}/status")))
        .json(&json!({"status": "failed", "duplicate": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let deliveries = res["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 2);
    assert!(deliveries.iter().all(|d| d["status"] == 204));
    assert_eq!(sim.outbox().sms[0].status, "failed");
}

#[tokio::test]
async fn twilio_lifecycles_use_the_runtime_callback_options() {
    let receiver = Receiver::start(twilio_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_millis(1),
        ..SimConfig::default()
    });
    let callback =
        serde_urlencoded::to_string([("StatusCallback", receiver.url.as_str())]).unwrap();
    let message = format!("To=%2B15551234567&From=%2B15005550006&Body=Hi&{callback}");
    let send = || twilio_post(&sim, "Messages.json", &message);
    let statuses = |hits: &[Hit]| -> Vec<String> {
        hits.iter()
            .map(|h| form_of(&h.body)["MessageStatus"].clone())
            .collect()
    };

    sim.set_callback_options(CallbackOptions {
        duplicate: true,
        ..CallbackOptions::default()
    });
    send().await;
    let hits = receiver.wait_for(4).await;
    assert_eq!(statuses(&hits), ["sent", "sent", "delivered", "delivered"]);
    assert_eq!(hits[0].body, hits[1].body);
    assert_eq!(
        hits[0].headers["x-twilio-signature"],
        hits[1].headers["x-twilio-signature"]
    );
    assert!(hits.iter().all(|h| h.status == 204));

    sim.set_callback_options(CallbackOptions {
        wrong_secret: true,
        out_of_order: true,
        delay: Some(Duration::from_millis(10)),
        ..CallbackOptions::default()
    });
    send().await;
    let hits = receiver.wait_for(6).await;
    assert_eq!(statuses(&hits[4..]), ["delivered", "sent"]);
    assert!(hits[4..].iter().all(|h| h.status == 403));

    // A message without a StatusCallback gets callbacks when the knobs name a URL.
    sim.set_callback_options(CallbackOptions {
        url: Some(receiver.url.clone()),
        ..CallbackOptions::default()
    });
    let (_, msg) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551234567&From=%2B15005550006&Body=Hi",
    )
    .await;
    let hits = receiver.wait_for(8).await;
    assert!(
        hits[6..]
            .iter()
            .all(|h| h.status == 204
                && form_of(&h.body)["MessageSid"] == msg["sid"].as_str().unwrap())
    );
}
