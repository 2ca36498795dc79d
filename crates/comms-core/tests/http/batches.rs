//! Emails sent at the same time share one call of Resend's batch endpoint, and each keeps its
//! own outcome. Each test first holds every call keel makes at a time (the simulator answers
//! them late), so that the emails sent next queue and go in one batch when the first call ends.
//! The server has one HTTP worker: each worker gathers the emails of its own sends.

use std::time::Duration;

use kernel::testing::TestDb;
use provider_sim::{Fault, JournalEntry, Provider};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::{Ctx, USER, start_one_worker as start};

kernel::backend_tests! {
    emails_sent_at_once_share_a_batch_call_and_keep_their_own_ids,
    a_refused_batch_is_sent_again_one_email_a_call,
    a_failed_batch_fails_each_email_and_sends_none_again,
}

/// How many emails are sent at once behind the held calls.
const EMAILS: usize = 12;
/// How many calls keel makes to Resend at a time.
const CALLS: usize = 16;
/// How long the simulator holds each of those calls.
const HOLD: Duration = Duration::from_millis(1500);

impl Ctx {
    /// Sends an email to `to` in a task of its own: its answer.
    fn spawn_email(&self, to: &str) -> JoinHandle<(u16, Value)> {
        let request = self
            .server
            .client
            .post(self.server.url("/api/v1/comms/email/send"))
            .bearer_auth(USER)
            .json(&json!({"to": [to], "subject": "Hi", "text": format!("Hello {to}")}));
        tokio::spawn(async move {
            let res = request.send().await.unwrap();
            (res.status().as_u16(), res.json().await.unwrap())
        })
    }

    /// The calls the simulator received as Resend.
    fn resend_calls(&self) -> Vec<JournalEntry> {
        self.sim.journal_for(Provider::Resend)
    }

    /// Sends [`CALLS`] emails, one after another, each held by the simulator for [`HOLD`]: every
    /// call keel makes at a time is in flight once this returns. Their sends, to await.
    async fn hold_every_call(&self) -> Vec<JoinHandle<(u16, Value)>> {
        self.sim.push_fault(
            Provider::Resend,
            Fault {
                delay_ms: Some(HOLD.as_millis() as u64),
                times: CALLS as u32,
                ..Fault::default()
            },
        );
        let mut held = Vec::new();
        for i in 0..CALLS {
            held.push(self.spawn_email(&format!("held{i}@example.com")));
            // The call has reached the simulator (which records it before holding it).
            for attempt in 0.. {
                if self.resend_calls().len() > i {
                    break;
                }
                assert!(attempt < 500, "call {i} never reached the simulator");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        held
    }

    /// Sends [`EMAILS`] emails at once behind the held calls, the calls after the held ones
    /// meeting `faults` in turn: each email's answer, in order.
    async fn send_behind_held_calls(&self, faults: Vec<Fault>) -> Vec<(u16, Value)> {
        let held = self.hold_every_call().await;
        for fault in faults {
            self.sim.push_fault(Provider::Resend, fault);
        }
        let sends: Vec<_> = (0..EMAILS)
            .map(|i| self.spawn_email(&format!("r{i}@example.com")))
            .collect();
        for send in held {
            let (status, body) = send.await.unwrap();
            assert_eq!(status, 200, "{body}");
        }
        let mut answers = Vec::new();
        for send in sends {
            answers.push(send.await.unwrap());
        }
        answers
    }

    /// The paths of the calls made after the held ones.
    fn calls_after_held(&self) -> Vec<String> {
        self.resend_calls()
            .into_iter()
            .skip(CALLS)
            .map(|call| call.path)
            .collect()
    }

    /// The message log's rows, by recipient.
    async fn log_by_recipient(&self) -> Vec<(String, Value)> {
        self.log()
            .await
            .into_iter()
            .map(|m| (m["recipients"][0].as_str().unwrap().to_owned(), m))
            .collect()
    }
}

async fn emails_sent_at_once_share_a_batch_call_and_keep_their_own_ids(db: TestDb) {
    let c = start(db).await;
    let answers = c.send_behind_held_calls(Vec::new()).await;
    assert_eq!(c.calls_after_held(), ["/emails/batch"]);
    // The batch carries each email as a call of its own would have, in the order they queued.
    let batch = c.resend_calls().pop().unwrap();
    let emails: Vec<Value> = serde_json::from_str(&batch.body).unwrap();
    assert_eq!(emails.len(), EMAILS);
    let mut references = std::collections::HashSet::new();
    for email in &emails {
        let to = email["to"][0].as_str().unwrap();
        let reference = email["tags"][0]["value"].as_str().unwrap();
        assert!(references.insert(reference.to_owned()), "{reference} twice");
        assert_eq!(
            *email,
            json!({"from": "Keel <noreply@example.com>", "to": [to], "subject": "Hi",
                   "text": format!("Hello {to}"),
                   "tags": [{"name": "keel_message", "value": reference}]})
        );
    }
    // Each send answers the id Resend gave its own email, and the log keeps it.
    let outbox = c.sim.outbox();
    let log = c.log_by_recipient().await;
    for (i, (status, body)) in answers.into_iter().enumerate() {
        let to = format!("r{i}@example.com");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["to"], json!([to]));
        let id = body["id"].as_str().unwrap();
        assert_eq!(outbox.email(id).unwrap().to, std::slice::from_ref(&to));
        let (_, row) = log.iter().find(|(r, _)| *r == to).unwrap();
        assert_eq!(row["provider_id"], id);
        assert_eq!(row["status"], "sent");
    }
    assert_eq!(outbox.emails.len(), CALLS + EMAILS);
}

/// Resend refuses a whole batch for one email it refuses: each email is then sent alone, and
/// only the one at fault fails.
async fn a_refused_batch_is_sent_again_one_email_a_call(db: TestDb) {
    let c = start(db).await;
    let refusal = |message: &str| Fault {
        message: Some(message.into()),
        ..Fault::status(422)
    };
    let answers = c
        .send_behind_held_calls(vec![
            refusal("one email of the batch is refused"),
            refusal("this email is refused"),
        ])
        .await;
    let mut calls = c.calls_after_held();
    assert_eq!(calls.remove(0), "/emails/batch");
    assert_eq!(calls, vec!["/emails"; EMAILS]);
    let refused: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status != 200)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(refused.len(), 1, "{answers:?}");
    assert_eq!(
        refused[0]["detail"],
        "Email provider error: this email is refused"
    );
    let outbox = c.sim.outbox();
    assert_eq!(outbox.emails.len(), CALLS + EMAILS - 1);
    let log = c.log_by_recipient().await;
    let statuses = |status: &str| log.iter().filter(|(_, m)| m["status"] == status).count();
    assert_eq!(
        (statuses("sent"), statuses("failed")),
        (CALLS + EMAILS - 1, 1)
    );
}

/// A batch that failed for another reason (here a 500) fails each of its emails with the
/// provider's message, and none is sent again.
async fn a_failed_batch_fails_each_email_and_sends_none_again(db: TestDb) {
    let c = start(db).await;
    let down = Fault {
        message: Some("Resend is down".into()),
        ..Fault::status(500)
    };
    let answers = c.send_behind_held_calls(vec![down]).await;
    assert_eq!(c.calls_after_held(), ["/emails/batch"]);
    for (status, body) in &answers {
        assert_eq!(*status, 502, "{body}");
        assert_eq!(body["detail"], "Email provider error: Resend is down");
    }
    assert_eq!(c.sim.outbox().emails.len(), CALLS);
    let log = c.log_by_recipient().await;
    let failed = log.iter().filter(|(_, m)| m["status"] == "failed").count();
    assert_eq!(failed, EMAILS);
}
