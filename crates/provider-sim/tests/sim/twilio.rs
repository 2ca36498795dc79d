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
