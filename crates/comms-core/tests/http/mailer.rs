//! The mailer this module lends the others: an email through Resend (the simulator), in the
//! message log without a preview of its body, tagged with the mail's kind; and refused, with
//! nothing sent, for an address on the suppression list.

use comms_core::{ListFilter, Viewer};
use kernel::capability::Capabilities;
use kernel::mail::{Mail, MailError, Mailer};
use kernel::module::Module;
use kernel::pagination::PageParams;

use super::*;

kernel::backend_tests! {
    the_mailer_sends_through_resend_into_the_log_without_a_preview,
    the_mailer_and_the_cli_respect_the_suppression_list,
}

fn reset_mail(to: &str) -> Mail {
    Mail {
        to: to.to_owned(),
        subject: "Reset your password".to_owned(),
        text: "Open https://app.example.com/reset?token=secret-token".to_owned(),
        html: Some("<a href=\"https://app.example.com/reset?token=secret-token\">x</a>".to_owned()),
        kind: "password_reset",
    }
}

async fn the_mailer_sends_through_resend_into_the_log_without_a_preview(db: TestDb) {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let pool = db.migrated_pool(&[comms_core::MIGRATIONS]).await;
    let deps = Deps::new(pool).unwrap();
    let configured = CommsConfig {
        resend_api_key: Some(sim.config().resend_api_key.clone()),
        resend_from_email: Some("Keel <noreply@example.com>".into()),
        resend_api_base: sim.base_url().to_owned(),
        timeout: Duration::from_secs(2),
        ..CommsConfig::default()
    };
    let module = CommsModule::build(configured.clone(), &deps).await.unwrap();
    // What the composer finds in the registry.
    let mut registry = Capabilities::default();
    module.provide(&mut registry);
    let mailer = registry
        .get::<dyn Mailer>()
        .expect("comms provides a mailer");

    let id = mailer.send(reset_mail("ada@example.com")).await.unwrap();
    let outbox = sim.outbox();
    let sent = outbox.emails.last().unwrap();
    assert_eq!(sent.id, id);
    assert_eq!(sent.to, ["ada@example.com"]);
    assert_eq!(sent.from, "Keel <noreply@example.com>");
    assert_eq!(sent.subject, "Reset your password");
    assert!(sent.text.as_deref().unwrap().contains("token=secret-token"));
    assert!(sent.html.is_some());
    assert_eq!(
        sent.tags[0],
        json!({"name": "kind", "value": "password_reset"})
    );
    assert_eq!(sent.tags[1]["name"], "keel_message");

    let page = PageParams::default().resolve().unwrap();
    let (messages, total) = module
        .service()
        .messages(Viewer::All, ListFilter::default(), page)
        .await
        .unwrap();
    assert_eq!(total, 1);
    let logged = &messages[0];
    assert_eq!(logged.provider_id.as_deref(), Some(id.as_str()));
    assert_eq!(logged.subject.as_deref(), Some("Reset your password"));
    assert_eq!(logged.status, "sent");
    assert_eq!(logged.user_id, None);
    assert_eq!(logged.preview, None, "the link is not kept in the log");

    // A refused address, and a failing provider.
    let refused = mailer.send(reset_mail("not an address")).await.unwrap_err();
    assert!(matches!(refused, MailError::Invalid(_)), "{refused:?}");
    sim.push_fault(
        Provider::Resend,
        Fault {
            message: Some("try later".into()),
            ..Fault::status(500)
        },
    );
    assert_eq!(
        mailer.send(reset_mail("ada@example.com")).await,
        Err(MailError::Provider("try later".to_owned()))
    );

    // Without the email channel's settings: NotConfigured, naming the first missing one.
    let unconfigured = CommsConfig {
        resend_api_key: None,
        ..configured
    };
    let module = CommsModule::build(unconfigured, &deps).await.unwrap();
    assert_eq!(
        module.mailer().send(reset_mail("ada@example.com")).await,
        Err(MailError::NotConfigured("RESEND_API_KEY".to_owned()))
    );
}

/// A hard bounce through the service's own webhook entry point (the Svix signature of the
/// simulator's signer), then the mailer other modules use, and `keel comms suppressions`.
async fn the_mailer_and_the_cli_respect_the_suppression_list(db: TestDb) {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let pool = db.migrated_pool(&[comms_core::MIGRATIONS]).await;
    let deps = Deps::new(pool).unwrap();
    let secret = webhook_secret();
    let config = CommsConfig {
        resend_api_key: Some(sim.config().resend_api_key.clone()),
        resend_from_email: Some("Keel <noreply@example.com>".into()),
        resend_api_base: sim.base_url().to_owned(),
        resend_webhook_secret: Some(secret.clone()),
        timeout: Duration::from_secs(2),
        ..CommsConfig::default()
    };
    let module = CommsModule::build(config, &deps).await.unwrap();
    let mailer = module.mailer();
    let mail = |to: &str| Mail {
        to: to.to_owned(),
        subject: "Verify your email".to_owned(),
        text: "Open the link".to_owned(),
        html: None,
        kind: "verify_email",
    };
    let id = mailer.send(mail("Ada@example.com")).await.unwrap();
    let body = json!({
        "type": "email.bounced",
        "created_at": "2026-11-26T10:00:00.000Z",
        "data": {"email_id": id, "to": ["Ada@example.com"],
                 "bounce": {"message": "No such user", "type": "Permanent", "subType": "General"}},
    })
    .to_string();
    let now = chrono::Utc::now().timestamp();
    let signature = provider_sim::signing::svix(&secret, "msg_1", now, body.as_bytes());
    let timestamp = now.to_string();
    let report = module
        .service()
        .resend_event(
            [
                Some("msg_1"),
                Some(timestamp.as_str()),
                Some(signature.as_str()),
            ],
            body.as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(report.suppressed, ["ada@example.com"]);
    let sent = sim.outbox().emails.len();
    assert_eq!(
        mailer.send(mail("ada@EXAMPLE.com")).await,
        Err(MailError::Suppressed(
            "Recipient is suppressed: ada@example.com (hard_bounce)".to_owned()
        ))
    );
    assert_eq!(sim.outbox().emails.len(), sent, "nothing reached Resend");
    let page = PageParams::default().resolve().unwrap();
    let (_, logged) = module
        .service()
        .messages(Viewer::All, ListFilter::default(), page)
        .await
        .unwrap();
    assert_eq!(logged, 1, "the refused mail is not in the log");

    let run = |args: &[&str]| {
        let mut argv = vec!["comms", "suppressions"];
        argv.extend_from_slice(args);
        comms_core::cli::command().get_matches_from(argv)
    };
    assert_eq!(module.run_command("comms", &run(&["list"])).await, Ok(()));
    assert_eq!(
        module
            .run_command("comms", &run(&["list", "--reason", "nope"]))
            .await,
        Err("Unknown reason: nope (hard_bounce, complaint, unsubscribed or stop)".to_owned())
    );
    assert_eq!(
        module
            .run_command("comms", &run(&["remove", "ADA@example.com"]))
            .await,
        Ok(())
    );
    assert_eq!(
        module
            .run_command("comms", &run(&["remove", "ada@example.com"]))
            .await,
        Err("Suppression not found: ada@example.com".to_owned())
    );
    assert!(mailer.send(mail("ada@example.com")).await.is_ok());
}
