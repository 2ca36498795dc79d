//! Resend: `POST /emails` with a bearer key, and `POST /emails/batch` for emails sent at the
//! same time.
//!
//! Resend limits a team to a few requests a second (two by default), and every call is a round
//! trip on both sides. So the emails that queue while earlier calls are in flight go together
//! in one batch call, up to Resend's 100 a batch ([`GroupCommit`]); an email sent alone is one
//! `POST /emails`, at once. Each email keeps its own outcome:
//!
//! - a batch answered with its ids gives each email its own, in order;
//! - a batch Resend refused (a 4xx other than 429: Resend checks a batch whole, and refuses all
//!   of it, sending none, for one email it refuses) is sent again one email a call, so that only
//!   the email at fault fails, with Resend's own message;
//! - a batch that failed otherwise (429, 5xx, a timeout, no connection) fails each of its emails
//!   with that error, as a call of their own would have failed at that moment. None is sent
//!   again: a batch that timed out may have been sent.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use kernel::db::GroupCommit;
use kernel::http_client::HttpClient;
use reqwest::header::CONTENT_TYPE;

use super::{EmailProvider, OutgoingEmail, ProviderError};

/// The most emails a batch call carries (Resend's limit).
const BATCH_EMAILS: usize = 100;

/// The most bytes of JSON a batch call carries; an email larger than this goes alone.
const BATCH_BYTES: usize = 1 << 20;

/// The most batches in flight at a time (a batch over [`BATCH_BYTES`] goes as several calls,
/// made at once). Fewer made larger batches but held emails back behind a
/// slow provider: with four, 64 sends at a time to a provider taking 2 s a call waited up to
/// 4 s, as the callers that a call's answer freed sent again one by one, each alone in the next
/// free call while the others queued behind it.
const CALLS: usize = 16;

/// Sends each email on its own or with those sent at the same time (see the module's notes).
pub struct Resend {
    /// Each email as its JSON, to its id at Resend.
    batches: GroupCommit<Vec<u8>, Result<String, ProviderError>>,
}

impl Resend {
    pub fn new(http: HttpClient, base: &str, api_key: &str, timeout: Duration) -> Self {
        let client = Arc::new(Client {
            http,
            base: base.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            timeout,
        });
        // A call only awaits the network: it runs where its emails' sends run.
        let batches = GroupCommit::beside_callers(BATCH_EMAILS, CALLS, move |emails| {
            let client = client.clone();
            async move { client.send_all(emails).await }
        });
        Resend { batches }
    }
}

#[async_trait::async_trait]
impl EmailProvider for Resend {
    async fn send(&self, email: &OutgoingEmail) -> Result<String, ProviderError> {
        let json = serde_json::to_vec(email)
            .map_err(|e| ProviderError::new(format!("the email could not be written: {e}")))?;
        self.batches.submit(json).await.unwrap_or_else(|| {
            Err(ProviderError::new(
                "the email's call ended without an answer",
            ))
        })
    }
}

struct Client {
    http: HttpClient,
    /// `RESEND_API_BASE` without a trailing slash.
    base: String,
    api_key: String,
    timeout: Duration,
}

#[derive(serde::Deserialize)]
struct Sent {
    id: String,
}

#[derive(serde::Deserialize)]
struct SentBatch {
    data: Vec<Sent>,
}

impl Client {
    /// Each email's outcome, in order: the emails in as few calls as [`BATCH_BYTES`] allows,
    /// made at once.
    async fn send_all(&self, emails: Vec<Vec<u8>>) -> Vec<Result<String, ProviderError>> {
        let sizes: Vec<usize> = emails.iter().map(Vec::len).collect();
        let mut emails = emails.into_iter();
        let calls = batches(&sizes, BATCH_BYTES)
            .into_iter()
            .map(|range| self.send_batch(emails.by_ref().take(range.len()).collect()));
        join_all(calls).await.into_iter().flatten().collect()
    }

    /// One call for `emails` (see the module's notes for what each email gets when it fails).
    async fn send_batch(&self, mut emails: Vec<Vec<u8>>) -> Vec<Result<String, ProviderError>> {
        if emails.len() == 1 {
            return vec![self.send_one(emails.remove(0)).await];
        }
        let body = [&b"["[..], &emails.join(&b','), b"]"].concat();
        let answer: Result<SentBatch, ProviderError> =
            super::call("resend", self.post("/emails/batch", body), self.timeout).await;
        match answer {
            Ok(sent) if sent.data.len() == emails.len() => {
                sent.data.into_iter().map(|sent| Ok(sent.id)).collect()
            }
            Ok(sent) => {
                let error = ProviderError::new(format!(
                    "unexpected answer: {} ids for {} emails",
                    sent.data.len(),
                    emails.len()
                ));
                vec![Err(error); emails.len()]
            }
            Err(e) if refused_whole(&e) => {
                join_all(emails.into_iter().map(|email| self.send_one(email))).await
            }
            Err(e) => vec![Err(e); emails.len()],
        }
    }

    async fn send_one(&self, email: Vec<u8>) -> Result<String, ProviderError> {
        let sent: Sent = super::call("resend", self.post("/emails", email), self.timeout).await?;
        Ok(sent.id)
    }

    fn post(&self, path: &str, json: Vec<u8>) -> reqwest::RequestBuilder {
        self.http
            .get()
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.api_key)
            .header(CONTENT_TYPE, "application/json")
            .body(json)
    }
}

/// Whether Resend refused a batch for what it carries (a 4xx other than a rate limit), so that
/// each of its emails, sent alone, gets an answer of its own.
fn refused_whole(error: &ProviderError) -> bool {
    error
        .status
        .is_some_and(|status| (400..500).contains(&status) && status != 429)
}

/// The emails of each call, in order: as many consecutive emails as `limit` bytes hold, the
/// commas and brackets counted; an email larger than `limit` alone.
fn batches(sizes: &[usize], limit: usize) -> Vec<Range<usize>> {
    let mut calls = Vec::new();
    let (mut start, mut bytes) = (0, 1);
    for (i, size) in sizes.iter().enumerate() {
        if i > start && bytes + size + 1 > limit {
            calls.push(start..i);
            (start, bytes) = (i, 1);
        }
        bytes += size + 1;
    }
    if start < sizes.len() {
        calls.push(start..sizes.len());
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // the list of one call's emails
    fn emails_go_together_as_far_as_the_bytes_allow() {
        assert_eq!(batches(&[], 100), Vec::<Range<usize>>::new());
        assert_eq!(batches(&[10, 10, 10], 100), [0..3]);
        // `[` + 3 × (30 + `,` or `]`) = 94: the fourth does not fit.
        assert_eq!(batches(&[30, 30, 30, 30], 100), [0..3, 3..4]);
        // Exactly the limit: `[` + 48 + `,` + 49 + `]` = 100.
        assert_eq!(batches(&[48, 49], 100), [0..2]);
        assert_eq!(batches(&[48, 50], 100), [0..1, 1..2]);
        // Too large for any batch: alone, between the others.
        assert_eq!(batches(&[10, 500, 10, 10], 100), [0..1, 1..2, 2..4]);
        assert_eq!(batches(&[500], 100), [0..1]);
    }

    #[test]
    fn only_a_refusal_of_what_the_batch_carries_sends_each_email_again() {
        let answered = |status| ProviderError {
            status: Some(status),
            ..ProviderError::new("refused")
        };
        assert!(refused_whole(&answered(422)));
        assert!(refused_whole(&answered(403)));
        assert!(refused_whole(&answered(400)));
        assert!(!refused_whole(&answered(429)));
        assert!(!refused_whole(&answered(500)));
        assert!(!refused_whole(&answered(503)));
        assert!(!refused_whole(&ProviderError::new("timed out")));
    }
}
