//! The message log's writer: a group commit ([`GroupCommit`]). Every send records its row after
//! the provider's answer, and under load most of that row's cost is its commit; so the rows queued
//! while the last batch was written go together (on PostgreSQL one statement, on SQLite one
//! transaction of a few multi-row statements; see [`store::insert_all`]), and each send answers
//! once its own row is committed, as before. SQLite writes one transaction at a time, and on
//! PostgreSQL four batches at a time were no faster than one (the batches only got smaller), so
//! one batch is written at a time on both backends.
//!
//! A batch is written whole or not at all. When it fails (one bad row fails all: Twilio answering a
//! SID twice breaks the unique index of provider ids), each of its rows is written again alone, so
//! that a bad row costs only itself.

use chrono::NaiveDateTime;
use kernel::db::{Backend, GroupCommit};
use kernel::{DbError, DbPool};

use crate::domain::Channel;
use crate::error::CommsError;
use crate::store::{self, NewMessageRow};

/// The most rows one transaction writes (on PostgreSQL one statement of 11 bound values a row: far
/// below its limit).
const BATCH: usize = 256;

/// A row of the log, owned, on its way to the writer.
#[derive(Debug, Clone)]
pub(super) struct LogRow {
    pub(super) channel: Channel,
    /// The recipients as a JSON array.
    pub(super) recipients: String,
    pub(super) subject: Option<String>,
    pub(super) preview: Option<String>,
    pub(super) provider_id: Option<String>,
    pub(super) status: String,
    pub(super) error: Option<String>,
    pub(super) user_id: Option<i64>,
    pub(super) at: NaiveDateTime,
    pub(super) reference: Option<String>,
}

impl LogRow {
    fn as_new(&self) -> NewMessageRow<'_> {
        NewMessageRow {
            channel: self.channel.as_str(),
            provider: self.channel.provider(),
            recipients: &self.recipients,
            subject: self.subject.as_deref(),
            preview: self.preview.as_deref(),
            provider_id: self.provider_id.as_deref(),
            status: &self.status,
            error: self.error.as_deref(),
            user_id: self.user_id,
            created_at: self.at.into(),
            updated_at: self.at.into(),
            reference: self.reference.as_deref(),
        }
    }
}

/// Writes rows in batches: each row's outcome is the number of rows committed with it, or why it
/// was not.
pub(super) struct LogWriter(GroupCommit<LogRow, Result<usize, CommsError>>);

impl LogWriter {
    pub(super) fn new(pool: DbPool) -> Self {
        // A row on every send: each HTTP worker batches its own sends' rows, on its own thread.
        // Against one queue for all, which on SQLite ran on the unit runtime's threads, an email
        // send cost about a fifth less CPU on SQLite (its row's hand-over and its outcome each
        // woke another thread) and about 8 % less on PostgreSQL. On SQLite the batch's statements
        // block the worker while they run: a few rows' inserts, after the turn to write
        // (`kernel::db::SqlitePool`), which it awaits without blocking.
        LogWriter(GroupCommit::beside_callers(
            BATCH,
            1,
            move |rows: Vec<LogRow>| {
                let pool = pool.clone();
                async move { write_all(&pool, &rows).await }
            },
        ))
    }

    /// Writes `row` with the rows queued beside it; returns once it is committed, with the number
    /// of rows committed together. Dropping the future does not take the row back: it is written
    /// all the same.
    pub(super) async fn write(&self, row: LogRow) -> Result<usize, CommsError> {
        self.0.submit(row).await.unwrap_or_else(|| {
            Err(CommsError::Db(DbError::Unit(
                "the message log's writer stopped".into(),
            )))
        })
    }
}

/// The outcome of each row: one transaction for all, else each alone.
async fn write_all(pool: &DbPool, rows: &[LogRow]) -> Vec<Result<usize, CommsError>> {
    match insert(pool, rows).await {
        Ok(()) => rows.iter().map(|_| Ok(rows.len())).collect(),
        Err(e) if rows.len() == 1 => vec![Err(e)],
        Err(_) => {
            let mut results = Vec::with_capacity(rows.len());
            for row in rows {
                results.push(insert(pool, std::slice::from_ref(row)).await.map(|()| 1));
            }
            results
        }
    }
}

/// Writes the rows, all or none: on PostgreSQL one statement, atomic on its own; on SQLite one
/// transaction of a few multi-row statements (see [`store::insert_all`]).
async fn insert(pool: &DbPool, rows: &[LogRow]) -> Result<(), CommsError> {
    let new: Vec<NewMessageRow<'_>> = rows.iter().map(LogRow::as_new).collect();
    match pool.backend() {
        Backend::Postgres => {
            let mut pooled = pool.get().await?;
            Ok(store::insert_all(&mut pooled.conn(), &new).await?)
        }
        Backend::Sqlite => kernel::write_tx!(pool, CommsError, |tx| Ok(store::insert_all(
            tx, &new
        )
        .await?)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kernel::testing::{TestDb, WriteLock};

    fn row(provider_id: &str) -> LogRow {
        LogRow {
            channel: Channel::Email,
            recipients: r#"["a@example.com"]"#.into(),
            subject: Some("Hi".into()),
            preview: None,
            provider_id: Some(provider_id.into()),
            status: "sent".into(),
            error: None,
            user_id: Some(7),
            at: kernel::time::now(),
            reference: None,
        }
    }

    async fn logged(pool: &DbPool) -> Vec<String> {
        let mut pooled = pool.get().await.unwrap();
        let (rows, _) = store::list(&mut pooled.conn(), Default::default(), 0, 1000)
            .await
            .unwrap();
        let mut ids: Vec<String> = rows.into_iter().filter_map(|r| r.provider_id).collect();
        ids.sort();
        ids
    }

    async fn a_bad_row_costs_only_itself(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let results = write_all(&pool, &[row("a"), row("b"), row("a"), row("c")]).await;
        let written: Vec<Option<usize>> = results.into_iter().map(Result::ok).collect();
        assert_eq!(written, [Some(1), Some(1), None, Some(1)]);
        assert_eq!(logged(&pool).await, ["a", "b", "c"]);
    }

    async fn rows_queued_behind_a_write_are_committed_together(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let writer = std::sync::Arc::new(LogWriter::new(pool.clone()));
        // The table's write lock holds the writer's first statement while 100 rows queue.
        let lock = WriteLock::take(&db.url, "comms_messages").await;
        let writes: Vec<_> = (0..100)
            .map(|i| {
                let writer = writer.clone();
                tokio::spawn(async move { writer.write(row(&format!("m{i:03}"))).await })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        lock.release().await;
        let mut together = Vec::new();
        for write in writes {
            together.push(write.await.unwrap().unwrap());
        }
        // The first write took the rows queued when it began; the rest went in one more.
        let batches: usize = together
            .iter()
            .map(|&n| 1.0 / n as f64)
            .sum::<f64>()
            .round() as usize;
        assert!(
            batches <= 2,
            "100 rows in {batches} statements: {together:?}"
        );
        // A duplicate among concurrent rows fails alone.
        let (dup, fresh) = tokio::join!(writer.write(row("m000")), writer.write(row("n")));
        assert!(dup.is_err());
        fresh.unwrap();
        let mut expected: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
        expected.push("n".into());
        assert_eq!(logged(&pool).await, expected);
    }

    kernel::backend_tests! {
        a_bad_row_costs_only_itself,
        rows_queued_behind_a_write_are_committed_together,
    }
}
