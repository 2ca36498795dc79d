//! A host that mounts the module somewhere else: its routes answer there (the first prefix and an
//! alias), not at the module's own prefix, and the status callback it gives Twilio names the
//! host's prefix, so that Twilio's callbacks find the route.

use kernel::module::Module;
use kernel::testing::spawn_modules_on;

use super::*;

kernel::backend_tests! {
    a_host_chosen_prefix_serves_the_routes_and_the_twilio_callback,
}

async fn a_host_chosen_prefix_serves_the_routes_and_the_twilio_callback(db: TestDb) {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let sim = ProviderSim::start(SimConfig {
        callback_delay: Duration::from_secs(3600),
        ..SimConfig::default()
    })
    .unwrap();
    let config = CommsConfig {
        twilio_account_sid: Some(sim.config().twilio_account_sid.clone()),
        twilio_auth_token: Some(sim.config().twilio_auth_token.clone()),
        twilio_phone_number: Some(FROM_NUMBER.into()),
        twilio_api_base: sim.base_url().to_owned(),
        public_base_url: Some(base.clone()),
        timeout: Duration::from_secs(2),
        ..CommsConfig::default()
    };
    let pool = db.migrated_pool(&[comms_core::MIGRATIONS]).await;
    let deps = Deps::new(pool)
        .unwrap()
        .with_authenticator(Arc::new(StubAuthenticator))
        .mounted_at(&["messaging/", "/internal/messaging"]);
    let module = CommsModule::build(config, &deps).await.unwrap();
    let mounts = module.mounts();
    assert_eq!(
        mounts.iter().collect::<Vec<_>>(),
        ["/messaging", "/internal/messaging"]
    );
    let server = spawn_modules_on(vec![Arc::new(module)], listener);
    let client = &server.client;

    let send = |prefix: &str| {
        client
            .post(server.url(&format!("{prefix}/sms/send")))
            .bearer_auth(USER)
            .json(&json!({"to": "+15005550010", "body": "hello"}))
            .send()
    };
    let res = send("/messaging").await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let sid = res.json::<Value>().await.unwrap()["sid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(send("/internal/messaging").await.unwrap().status(), 200);
    assert_eq!(send("/api/v1/comms").await.unwrap().status(), 404);

    let sent = sim.journal_for(Provider::Twilio);
    let fields: Vec<(String, String)> =
        serde_urlencoded::from_str(&sent.first().unwrap().body).unwrap();
    let callback = fields.iter().find(|(k, _)| k == "StatusCallback").unwrap();
    assert_eq!(
        callback.1,
        format!("{base}/messaging/webhooks/twilio/status")
    );
    // Twilio's callback, signed over that URL, reaches the route and moves the log forward.
    let delivery = sim.twilio_status_callback(&sid, "delivered").await.unwrap();
    assert_eq!(delivery.status, Some(200), "{}", delivery.response);
    let log: Value = client
        .get(server.url("/messaging/messages"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let message = log["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["provider_id"] == sid.as_str())
        .cloned()
        .unwrap();
    assert_eq!(message["status"], "delivered");
}
