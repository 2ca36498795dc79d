//! The mailer this module lends the others: an email through Resend (the simulator), in the
//! message log without a preview of its body, tagged with the mail's kind.

use comms_core::{ListFilter, Viewer};
use kernel::capability::Capabilities;
use kernel::mail::{Mail, MailError, Mailer};
use kernel::module::Module;
use kernel::pagination::PageParams;

use super::*;

kernel::backend_tests! {
    the_mailer_sends_through_resend_into_the_log_without_a_preview,
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
        sent.tags,
        json!([{"name": "kind", "value": "password_reset"}])
    );

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
