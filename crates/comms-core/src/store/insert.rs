//! The message log's insert: the rows of one batch of the log's writer, all or none.

use diesel::QueryResult;
use kernel::time::StoredTime;
use kernel::{DbConn, with_conn};

/// A row of the log to insert.
#[derive(Debug, Clone)]
pub struct NewMessageRow<'a> {
    pub channel: &'a str,
    pub provider: &'a str,
    pub recipients: &'a str,
    pub subject: Option<&'a str>,
    pub preview: Option<&'a str>,
    pub provider_id: Option<&'a str>,
    pub status: &'a str,
    pub error: Option<&'a str>,
    pub user_id: Option<i64>,
    /// Written on SQLite by kernel's own writer of diesel's text (see [`StoredTime`]).
    pub created_at: StoredTime,
    pub updated_at: StoredTime,
    /// keel's own name for the message, which the provider's events carry back (emails only).
    pub reference: Option<&'a str>,
}

/// Inserts the rows, all or none. On PostgreSQL in one statement of one array per column
/// (`unnest`): atomic on its own, so it needs no transaction (two round trips fewer), and its text
/// is the same for any number of rows, so it is prepared once per connection. Its commit is
/// asynchronous: the statement sets `synchronous_commit` off for its own transaction (the whole
/// transaction, when called inside one: the log writer never does), so the rows are visible to
/// every session at once but the commit does not wait for the WAL to reach the disk. A crash of
/// the database server can lose the last fraction of a second of rows (never half of a batch):
/// the durability SQLite's `synchronous=NORMAL` gives every write. The log row follows a provider
/// call that was already made, and the wait for the disk was about a third of its time under
/// load; nothing else is written this way (docs/comms.md). On SQLite, inside the caller's
/// transaction, by multi-row statements of a power of two rows each (see [`sqlite::Rows`]).
pub async fn insert_all(conn: &mut DbConn<'_>, new: &[NewMessageRow<'_>]) -> QueryResult<()> {
    with_conn!(
        conn,
        postgres | c | {
            use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamp};
            fn column<'a, T>(
                rows: &[NewMessageRow<'a>],
                field: impl Fn(&NewMessageRow<'a>) -> T,
            ) -> Vec<T> {
                rows.iter().map(field).collect()
            }
            kernel::db::Cached(
                diesel::sql_query(INSERT_ALL)
                    .bind::<Array<Text>, _>(column(new, |r| r.channel))
                    .bind::<Array<Text>, _>(column(new, |r| r.provider))
                    .bind::<Array<Text>, _>(column(new, |r| r.recipients))
                    .bind::<Array<Nullable<Text>>, _>(column(new, |r| r.subject))
                    .bind::<Array<Nullable<Text>>, _>(column(new, |r| r.preview))
                    .bind::<Array<Nullable<Text>>, _>(column(new, |r| r.provider_id))
                    .bind::<Array<Text>, _>(column(new, |r| r.status))
                    .bind::<Array<Nullable<Text>>, _>(column(new, |r| r.error))
                    .bind::<Array<Nullable<BigInt>>, _>(column(new, |r| r.user_id))
                    .bind::<Array<Timestamp>, _>(column(new, |r| r.created_at.0))
                    .bind::<Array<Timestamp>, _>(column(new, |r| r.updated_at.0))
                    .bind::<Array<Nullable<Text>>, _>(column(new, |r| r.reference)),
            )
            .execute(c)
            .await
            .map(drop)
        },
        sqlite | c | {
            let mut rest = new;
            while !rest.is_empty() {
                let (chunk, tail) = rest.split_at(sqlite::chunk(rest.len()));
                sqlite::insert(c, chunk).await?;
                rest = tail;
            }
            Ok(())
        }
    )
}

/// The rows of [`insert_all`] on PostgreSQL, one array per column, given ids in their order.
#[allow(dead_code)] // read only in the PostgreSQL arm, which an SQLite-only kernel leaves out
const INSERT_ALL: &str = "INSERT INTO comms_messages (channel, provider, recipients, subject, \
    preview, provider_id, status, error, user_id, created_at, updated_at, reference) \
    SELECT channel, provider, recipients, subject, preview, provider_id, status, error, user_id, \
    created_at, updated_at, reference \
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
    $7::text[], $8::text[], $9::int8[], $10::timestamp[], $11::timestamp[], $12::text[]) \
    WITH ORDINALITY \
    AS m (channel, provider, recipients, subject, preview, provider_id, status, error, user_id, \
    created_at, updated_at, reference, n) \
    CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit \
    ORDER BY n";

// Compiled where kernel has SQLite, as the arm of `with_conn!` that calls it is.
kernel::__sqlite! {
    mod sqlite {
        //! A batch of rows as few multi-row statements. One statement per row paid, for each
        //! row, the statement's own start and end (its transaction opcode, the `AUTOINCREMENT`
        //! counter read and written again) and diesel's per-statement work; one statement for
        //! the whole batch has a text that grows with it, which SQLite would parse and plan again
        //! for each new length. So a batch goes as statements of 64, 32, ... 1 rows: at most
        //! seven texts, each fixed by its Rust type (the number of rows is a const parameter),
        //! which diesel prepares once per connection and finds again without writing the text.

        use diesel::QueryResult;
        use diesel::query_builder::{AstPass, QueryFragment, QueryId};
        use diesel::sql_types::{BigInt, Nullable, Text, Timestamp};
        use diesel::sqlite::Sqlite;
        use kernel::db::{SqliteConn, SqliteRunQueryDsl};

        use super::NewMessageRow;

        /// The most rows of one statement: 768 parameters, far below SQLite's limit (32,766).
        const MOST: usize = 64;

        /// How many of `left` rows the next statement takes: the largest power of two that fits.
        pub(super) fn chunk(left: usize) -> usize {
            1 << left.min(MOST).ilog2()
        }

        /// Inserts `rows` (a length [`chunk`] gives) in one statement.
        pub(super) async fn insert(
            c: &mut SqliteConn,
            rows: &[NewMessageRow<'_>],
        ) -> QueryResult<()> {
            macro_rules! sized {
                ($($n:literal)*) => {
                    match rows.len() {
                        $($n => Rows::<$n>(exactly(rows)?).execute(c).await,)*
                        _ => Err(diesel::result::Error::QueryBuilderError(
                            "the log's rows are inserted in chunks of a power of two".into(),
                        )),
                    }
                };
            }
            sized!(1 2 4 8 16 32 64).map(drop)
        }

        fn exactly<'s, 'a, const N: usize>(
            rows: &'s [NewMessageRow<'a>],
        ) -> QueryResult<&'s [NewMessageRow<'a>; N]> {
            rows.try_into()
                .map_err(|_| diesel::result::Error::QueryBuilderError("a chunk's length".into()))
        }

        /// `INSERT INTO comms_messages (...) VALUES (...), ...` of exactly `N` rows.
        pub(super) struct Rows<'s, 'a, const N: usize>(&'s [NewMessageRow<'a>; N]);

        impl<const N: usize> QueryId for Rows<'_, '_, N> {
            type QueryId = Rows<'static, 'static, N>;
            const HAS_STATIC_QUERY_ID: bool = true;
        }

        impl<const N: usize> QueryFragment<Sqlite> for Rows<'_, '_, N> {
            fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
                out.push_sql(
                    "INSERT INTO comms_messages (channel, provider, recipients, subject, \
                     preview, provider_id, status, error, user_id, created_at, updated_at, \
                     reference) VALUES ",
                );
                for (i, row) in self.0.iter().enumerate() {
                    out.push_sql(if i == 0 { "(" } else { ", (" });
                    out.push_bind_param::<Text, _>(row.channel)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Text, _>(row.provider)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Text, _>(row.recipients)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Nullable<Text>, _>(&row.subject)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Nullable<Text>, _>(&row.preview)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Nullable<Text>, _>(&row.provider_id)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Text, _>(row.status)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Nullable<Text>, _>(&row.error)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Nullable<BigInt>, _>(&row.user_id)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Timestamp, _>(&row.created_at)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Timestamp, _>(&row.updated_at)?;
                    out.push_sql(", ");
                    out.push_bind_param::<Nullable<Text>, _>(&row.reference)?;
                    out.push_sql(")");
                }
                Ok(())
            }
        }

        impl<Conn, const N: usize> diesel::RunQueryDsl<Conn> for Rows<'_, '_, N> {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use diesel::{QueryDsl, SelectableHelper};
    use kernel::testing::{StatementLog, TestDb};

    use super::*;
    use crate::schema::comms_messages;
    use crate::store::MessageRow;

    /// Batches of every shape land whole, in their order, with every field the log shows (the
    /// reference: `events_find_their_row_by_reference_or_provider_id`): a batch longer than a
    /// statement's most rows and lengths that are no power of two (on SQLite several statements,
    /// each prepared once whatever the batches).
    async fn batches_of_any_length_land_in_order(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let log = StatementLog::default();
        log.attach(&mut conn);
        let base = chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
            .and_then(|d| d.and_hms_opt(18, 0, 0))
            .unwrap();
        let ids: Vec<String> = (0..300).map(|i| format!("p{i:03}")).collect();
        let subjects: Vec<String> = (0..300).map(|i| format!("subject {i}")).collect();
        let row = |i: usize| NewMessageRow {
            channel: if i.is_multiple_of(2) { "email" } else { "sms" },
            provider: if i.is_multiple_of(2) {
                "resend"
            } else {
                "twilio"
            },
            recipients: "[\"a@example.com\"]",
            subject: (!i.is_multiple_of(3)).then_some(subjects[i].as_str()),
            preview: (!i.is_multiple_of(4)).then_some("Hello"),
            provider_id: Some(ids[i].as_str()),
            status: if i.is_multiple_of(7) {
                "failed"
            } else {
                "sent"
            },
            error: i.is_multiple_of(7).then_some("bounced"),
            user_id: (!i.is_multiple_of(5)).then_some(i as i64),
            created_at: StoredTime(base + chrono::TimeDelta::microseconds(i as i64 * 1_001)),
            updated_at: StoredTime(base),
            reference: None,
        };
        let mut next = 0;
        for len in [3, 71, 64, 1, 127, 34] {
            let batch: Vec<NewMessageRow<'_>> = (next..next + len).map(row).collect();
            insert_all(&mut conn, &batch).await.unwrap();
            next += len;
        }
        let texts = log.texts_run();
        assert!(log.not_reused().is_empty(), "{:?}", log.not_reused());
        assert!(texts <= 7, "{texts} texts");
        let rows: Vec<MessageRow> = kernel::with_conn!(&mut conn, |c| {
            comms_messages::table
                .order(comms_messages::id)
                .select(MessageRow::as_select())
                .load(c)
                .await
        })
        .unwrap();
        assert_eq!(rows.len(), next);
        for (i, got) in rows.iter().enumerate() {
            let want = row(i);
            assert_eq!(
                (
                    got.channel.as_str(),
                    got.provider.as_str(),
                    got.recipients.as_str(),
                    got.subject.as_deref(),
                    got.preview.as_deref(),
                    got.provider_id.as_deref(),
                    got.status.as_str(),
                    got.error.as_deref(),
                    got.user_id,
                    got.created_at,
                    got.updated_at,
                ),
                (
                    want.channel,
                    want.provider,
                    want.recipients,
                    want.subject,
                    want.preview,
                    want.provider_id,
                    want.status,
                    want.error,
                    want.user_id,
                    want.created_at.0,
                    want.updated_at.0,
                ),
                "row {i}"
            );
        }
    }

    /// A batch with a bad row writes none of its rows, however many statements it takes.
    async fn a_batch_is_all_or_nothing(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let now = StoredTime(kernel::time::now());
        let ids: Vec<String> = (0..70).map(|i| format!("q{i}")).collect();
        let mut batch: Vec<NewMessageRow<'_>> = ids
            .iter()
            .map(|id| NewMessageRow {
                channel: "sms",
                provider: "twilio",
                recipients: "[]",
                subject: None,
                preview: None,
                provider_id: Some(id),
                status: "sent",
                error: None,
                user_id: None,
                created_at: now,
                updated_at: now,
                reference: None,
            })
            .collect();
        // The last row repeats the first's provider id: the unique index refuses it, in the
        // batch's last statement on SQLite.
        batch[69].provider_id = Some("q0");
        let written = kernel::write_tx!(&pool, crate::error::CommsError, |tx| Ok(insert_all(
            tx, &batch
        )
        .await?));
        assert!(written.is_err());
        let mut pooled = pool.get().await.unwrap();
        let (_, total) = crate::store::list(&mut pooled.conn(), Default::default(), 0, 1)
            .await
            .unwrap();
        assert_eq!(total, 0);
    }

    kernel::backend_tests! {
        batches_of_any_length_land_in_order,
        a_batch_is_all_or_nothing,
    }
}
