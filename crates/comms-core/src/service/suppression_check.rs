//! The suppression check every send makes before it calls a provider, for the sends that ask at
//! the same time in one statement ([`GroupCommit`]): the union of their recipients is looked up
//! at once, and each send gets the entries of its own. Under load the check was a statement per
//! send, and on PostgreSQL a round trip each. A send is still checked after it asked, so an
//! entry added before a send began is always seen.
//!
//! When the shared lookup fails, each send's recipients are looked up again alone, so that each
//! gets its own answer (and its own error).

use kernel::DbPool;
use kernel::db::GroupCommit;

use crate::error::CommsError;
use crate::store::suppressions::{self as store, SuppressionRow};

/// The most sends one lookup serves.
const BATCH: usize = 128;

/// The most lookups in flight at a time: one runs while the next batch gathers.
const LOOKUPS: usize = 2;

/// A listed recipient: (address, reason).
pub(super) type Listed = (String, String);

/// Looks up the recipients of concurrent sends together.
pub(super) struct SuppressionCheck(GroupCommit<Vec<String>, Result<Vec<Listed>, CommsError>>);

impl SuppressionCheck {
    pub(super) fn new(pool: DbPool) -> Self {
        // One read through an index: on SQLite it runs on the sends' own thread, as
        // `Detached::read` does, instead of a database thread's and back.
        SuppressionCheck(GroupCommit::beside_callers(BATCH, LOOKUPS, move |sends| {
            let pool = pool.clone();
            async move { check_all(&pool, sends).await }
        }))
    }

    /// The listed ones among `addresses` (normalised), each once, in their order.
    pub(super) async fn listed(&self, addresses: Vec<String>) -> Result<Vec<Listed>, CommsError> {
        if addresses.is_empty() {
            return Ok(Vec::new());
        }
        self.0.submit(addresses).await.unwrap_or_else(|| {
            Err(CommsError::Db(kernel::DbError::Unit(
                "the suppression check stopped".into(),
            )))
        })
    }
}

/// Each send's listed recipients: one lookup for all, else each alone.
async fn check_all(pool: &DbPool, sends: Vec<Vec<String>>) -> Vec<Result<Vec<Listed>, CommsError>> {
    let mut all: Vec<String> = sends.iter().flatten().cloned().collect();
    all.sort_unstable();
    all.dedup();
    match find(pool, &all).await {
        Ok(rows) => sends.iter().map(|send| Ok(listed(send, &rows))).collect(),
        Err(e) if sends.len() == 1 => vec![Err(e)],
        Err(_) => {
            let mut results = Vec::with_capacity(sends.len());
            for send in &sends {
                results.push(find(pool, send).await.map(|rows| listed(send, &rows)));
            }
            results
        }
    }
}

async fn find(pool: &DbPool, addresses: &[String]) -> Result<Vec<SuppressionRow>, CommsError> {
    let mut pooled = pool.read().await?;
    Ok(store::find_any(&mut pooled.conn(), addresses).await?)
}

/// The entries among `rows` of `addresses`, each address once, in the order of `addresses`.
fn listed(addresses: &[String], rows: &[SuppressionRow]) -> Vec<Listed> {
    let mut named: Vec<Listed> = Vec::new();
    for address in addresses {
        if let Some(row) = rows.iter().find(|r| &r.address == address)
            && !named.iter().any(|(a, _)| a == address)
        {
            named.push((row.address.clone(), row.reason.clone()));
        }
    }
    named
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;

    use super::*;
    use crate::store::suppressions::NewSuppressionRow;
    use kernel::testing::TestDb;

    async fn add(pool: &DbPool, address: &str, reason: &str) {
        let mut pooled = pool.get().await.unwrap();
        let row = NewSuppressionRow {
            channel: "email",
            address,
            reason,
            detail: None,
            provider_id: None,
            created_at: kernel::time::now(),
        };
        assert!(store::add(&mut pooled.conn(), &row).await.unwrap());
    }

    fn addresses(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn each_send_gets_its_own_entries_once_in_its_order() {
        let row = |address: &str, reason: &str| SuppressionRow {
            id: 1,
            channel: "email".into(),
            address: address.into(),
            reason: reason.into(),
            detail: None,
            provider_id: None,
            created_at: kernel::time::now(),
        };
        let rows = [row("b@x.io", "complaint"), row("a@x.io", "hard_bounce")];
        assert_eq!(
            listed(&addresses(&["a@x.io", "c@x.io", "b@x.io", "a@x.io"]), &rows),
            [
                ("a@x.io".to_owned(), "hard_bounce".to_owned()),
                ("b@x.io".to_owned(), "complaint".to_owned())
            ]
        );
        assert!(listed(&addresses(&["c@x.io"]), &rows).is_empty());
    }

    /// Sends that ask while a lookup runs share the next one, and each gets only the entries
    /// of its own recipients.
    async fn sends_checked_together_each_get_their_own(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        add(&pool, "listed-3@example.com", "hard_bounce").await;
        add(&pool, "listed-7@example.com", "complaint").await;
        let check = Arc::new(SuppressionCheck::new(pool.clone()));
        let asks: Vec<_> = (0..40)
            .map(|i| {
                let check = check.clone();
                let send = vec![
                    format!("listed-{i}@example.com"),
                    format!("other-{i}@example.com"),
                ];
                tokio::spawn(async move { check.listed(send).await })
            })
            .collect();
        for (i, ask) in asks.into_iter().enumerate() {
            let found = ask.await.unwrap().unwrap();
            let expected: Vec<Listed> = match i {
                3 => vec![("listed-3@example.com".into(), "hard_bounce".into())],
                7 => vec![("listed-7@example.com".into(), "complaint".into())],
                _ => vec![],
            };
            assert_eq!(found, expected, "send {i}");
        }
        // An entry added after a check is seen by the next one.
        add(&pool, "listed-9@example.com", "hard_bounce").await;
        let found = check
            .listed(addresses(&["listed-9@example.com"]))
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        assert!(check.listed(Vec::new()).await.unwrap().is_empty());
    }

    kernel::backend_tests! {
        sends_checked_together_each_get_their_own,
    }
}
