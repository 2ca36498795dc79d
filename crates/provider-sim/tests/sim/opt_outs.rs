//! What makes a sender suppress a recipient: Resend's bounce types, Twilio's 21610 (at once, or
//! in the status callback of a messaging-service send) and incoming STOP and START messages,
//! signed as Twilio signs them.

use super::twilio::twilio_post;
use super::*;

fn form_of(body: &str) -> HashMap<String, String> {
    serde_urlencoded::from_str(body).unwrap()
}

/// A control API call: its status and JSON answer.
async fn control(sim: &SimHandle, path: &str, body: Value) -> (u16, Value) {
    let res = post_json(sim, path, &[], body).await;
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test]
async fn incoming_stop_and_start_are_signed_and_govern_later_sends() {
    let receiver = Receiver::start(twilio_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_millis(1),
        twilio_sms_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let deliveries = sim
        .twilio_inbound_sms("+15551230001", None, " stop ", &CallbackOptions::default())
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(
        deliveries[0].status,
        Some(204),
        "signed over the URL called"
    );
    assert_eq!(deliveries[0].url, receiver.url);
    let form = form_of(&deliveries[0].body);
    assert_eq!(form["From"], "+15551230001");
    assert_eq!(form["To"], "+15005550006");
    assert_eq!(form["Body"], " stop ");
    assert_eq!(form["OptOutType"], "STOP");
    assert_eq!(form["SmsStatus"], "received");
    assert_eq!(form["AccountSid"], sim.config().twilio_account_sid);
    assert!(form["MessageSid"].starts_with("SM") && form["MessageSid"] == form["SmsSid"]);
    assert_eq!(sim.twilio_opted_out(), ["+15551230001"]);

    // Sent from a number: refused at once with 21610.
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551230001&From=%2B15005550006&Body=Hi",
    )
    .await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (400, Some(21610)),
        "{body}"
    );
    assert_eq!(body["message"], "Attempt to send to unsubscribed recipient");
    // Through a messaging service: accepted, then `failed` with ErrorCode 21610.
    let callback =
        serde_urlencoded::to_string([("StatusCallback", receiver.url.as_str())]).unwrap();
    let (status, body) = twilio_post(
        &sim,
        "Messages.json",
        &format!("To=%2B15551230001&MessagingServiceSid=MG1&Body=Hi&{callback}"),
    )
    .await;
    assert_eq!((status, body["status"].as_str()), (201, Some("accepted")));
    let hits = receiver.wait_for(2).await;
    let failed = form_of(&hits[1].body);
    assert_eq!(failed["MessageStatus"], "failed");
    assert_eq!(failed["ErrorCode"], "21610");
    assert_eq!(hits[1].status, 204);

    // Any other message changes nothing; START lifts the opt-out; HELP is marked as such.
    let hello = sim
        .twilio_inbound_sms(
            "+15551230001",
            Some("+15005550007"),
            "stop it",
            &CallbackOptions::default(),
        )
        .await
        .unwrap();
    let form = form_of(&hello[0].body);
    assert!(!form.contains_key("OptOutType"));
    assert_eq!(form["To"], "+15005550007");
    assert_eq!(sim.twilio_opted_out(), ["+15551230001"]);
    let help = sim
        .twilio_inbound_sms("+15551230001", None, "HELP", &CallbackOptions::default())
        .await
        .unwrap();
    assert_eq!(form_of(&help[0].body)["OptOutType"], "HELP");
    let opt_in = sim
        .twilio_inbound_sms("+15551230001", None, "Unstop", &CallbackOptions::default())
        .await
        .unwrap();
    assert_eq!(form_of(&opt_in[0].body)["OptOutType"], "START");
    assert!(sim.twilio_opted_out().is_empty());
    let (status, _) = twilio_post(
        &sim,
        "Messages.json",
        "To=%2B15551230001&From=%2B15005550006&Body=Hi",
    )
    .await;
    assert_eq!(status, 201);

    // The knobs: a wrong token, no signature, another URL; and the control API.
    let wrong = sim
        .twilio_inbound_sms(
            "+15551230002",
            None,
            "STOP",
            &CallbackOptions {
                wrong_secret: true,
                ..CallbackOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(wrong[0].status, Some(403));
    let unsigned = sim
        .twilio_inbound_sms(
            "+15551230002",
            None,
            "STOP",
            &CallbackOptions {
                no_signature: true,
                ..CallbackOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(unsigned[0].header("x-twilio-signature").is_none());
    let (status, body) = control(
        &sim,
        "/_sim/twilio/inbound",
        json!({"from": "+15551230003", "body": "QUIT"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deliveries"][0]["status"], 204);
    assert!(sim.twilio_opted_out().contains(&"+15551230003".to_owned()));
    let (status, body) = control(&sim, "/_sim/twilio/inbound", json!({"body": "STOP"})).await;
    assert_eq!(status, 400, "{body}");

    // Without a URL there is nowhere to post.
    let bare = start();
    assert_eq!(
        bare.twilio_inbound_sms("+15551230004", None, "STOP", &CallbackOptions::default())
            .await
            .unwrap_err(),
        "no Twilio SMS webhook URL configured"
    );
}

#[tokio::test]
async fn status_callbacks_carry_the_error_code_asked_for() {
    let receiver = Receiver::start(twilio_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_secs(3600),
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
    let sid = msg["sid"].as_str().unwrap();
    let options = CallbackOptions {
        error_code: Some("21610".into()),
        ..CallbackOptions::default()
    };
    let failed = sim
        .twilio_status_callback_with(sid, "failed", &options)
        .await
        .unwrap();
    assert_eq!(failed[0].status, Some(204));
    assert_eq!(form_of(&failed[0].body)["ErrorCode"], "21610");
    let sent = sim
        .twilio_status_callback_with(sid, "sent", &options)
        .await
        .unwrap();
    assert!(!form_of(&sent[0].body).contains_key("ErrorCode"));
}

#[tokio::test]
async fn bounces_are_permanent_unless_asked_otherwise() {
    let receiver = Receiver::start(svix_check);
    let sim = start_with(SimConfig {
        callback_delay: Duration::from_secs(3600),
        resend_webhook_url: Some(receiver.url.clone()),
        ..SimConfig::default()
    });
    let key = sim.config().resend_api_key.clone();
    let res = client()
        .post(sim.url("/emails"))
        .bearer_auth(key)
        .json(&json!({"from": "a@example.com", "to": "b@example.com", "subject": "s", "text": "t"}))
        .send()
        .await
        .unwrap();
    let id = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let bounce = |options: CallbackOptions| {
        let sim = &sim;
        let id = id.clone();
        async move {
            let delivery = sim
                .resend_event(&id, "email.bounced", &options)
                .await
                .unwrap();
            assert_eq!(delivery[0].status, Some(200), "{delivery:?}");
            serde_json::from_str::<Value>(&delivery[0].body).unwrap()["data"]["bounce"].clone()
        }
    };
    let permanent = bounce(CallbackOptions::default()).await;
    assert_eq!(permanent["type"], "Permanent");
    assert_eq!(permanent["subType"], "General");
    let transient = bounce(CallbackOptions {
        bounce_type: Some("Transient".into()),
        ..CallbackOptions::default()
    })
    .await;
    assert_eq!(transient["type"], "Transient");
    assert!(
        transient["message"]
            .as_str()
            .unwrap()
            .contains("temporarily")
    );
    // The knob travels through the control API too.
    let (status, body) = control(
        &sim,
        &format!("/_sim/resend/{id}/events"),
        json!({"type": "email.bounced", "bounce_type": "Undetermined"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let sent: Value =
        serde_json::from_str(body["deliveries"][0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(sent["data"]["bounce"]["type"], "Undetermined");
}
