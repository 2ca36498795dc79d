//! Every SQL query of the communications module.

use chrono::NaiveDateTime;
use diesel::{
    ExpressionMethods, OptionalExtension, QueryDsl, QueryResult, Queryable, Selectable,
    SelectableHelper,
};
use kernel::db::Cached;
use kernel::time::StoredTime;
use kernel::{DbConn, with_conn};

use crate::schema::comms_messages;

mod insert;
pub mod suppressions;

pub use insert::{NewMessageRow, insert_all};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = comms_messages)]
pub struct MessageRow {
    pub id: i64,
    pub channel: String,
    pub provider: String,
    pub recipients: String,
    pub subject: Option<String>,
    pub preview: Option<String>,
    pub provider_id: Option<String>,
    pub status: String,
    pub error: Option<String>,
    pub user_id: Option<i64>,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
}

/// Which messages a list shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageFilter<'a> {
    pub channel: Option<&'a str>,
    pub status: Option<&'a str>,
    /// Only this user's messages.
    pub user_id: Option<i64>,
}

pub async fn find(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<MessageRow>> {
    with_conn!(conn, |c| {
        comms_messages::table
            .find(id)
            .select(MessageRow::as_select())
            .get_result(c)
            .await
            .optional()
    })
}

/// One page of the log, newest first, and the number of messages that match.
pub async fn list(
    conn: &mut DbConn<'_>,
    filter: MessageFilter<'_>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<MessageRow>, i64)> {
    // Built twice (rows and count): boxed queries cannot be cloned.
    macro_rules! filtered {
        () => {{
            let mut query = comms_messages::table.into_boxed();
            if let Some(channel) = filter.channel {
                query = query.filter(comms_messages::channel.eq(channel));
            }
            if let Some(status) = filter.status {
                query = query.filter(comms_messages::status.eq(status));
            }
            if let Some(user_id) = filter.user_id {
                query = query.filter(comms_messages::user_id.eq(user_id));
            }
            query
        }};
    }
    with_conn!(conn, |c| {
        let rows = filtered!()
            .order((comms_messages::created_at.desc(), comms_messages::id.desc()))
            .offset(offset)
            .limit(limit)
            .select(MessageRow::as_select())
            .load(c)
            .await?;
        let total = filtered!().count().get_result(c).await?;
        Ok((rows, total))
    })
}

/// How a provider's event names its message.
#[derive(Debug, Clone, Copy)]
pub enum MessageKey<'a> {
    /// By keel's reference (an email's `keel_message` tag), with the provider's id the event
    /// names, which must be the row's too.
    Reference {
        reference: &'a str,
        provider_id: &'a str,
    },
    /// By the provider's id, among the rows without a reference (SMS, calls, and the emails
    /// logged before references): the rows its unique index holds.
    Provider { provider: &'a str, id: &'a str },
}

/// Moves the message `key` names to `status`, only from a status in `below` (so never
/// backwards, and a replay changes nothing); `error` is kept when `None`. The number of rows
/// changed (0 or 1).
pub async fn advance(
    conn: &mut DbConn<'_>,
    key: MessageKey<'_>,
    status: &str,
    below: &[&str],
    error: Option<&str>,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    use comms_messages::dsl as m;
    // One statement per key and per whether the error changes.
    macro_rules! set_status {
        ($c:ident, $target:expr) => {
            match error {
                Some(error) => {
                    Cached(diesel::update($target).set((
                        m::status.eq(status),
                        m::error.eq(error),
                        m::updated_at.eq(now),
                    )))
                    .execute($c)
                    .await
                }
                None => {
                    Cached(
                        diesel::update($target).set((m::status.eq(status), m::updated_at.eq(now))),
                    )
                    .execute($c)
                    .await
                }
            }
        };
    }
    with_conn!(conn, |c| match key {
        MessageKey::Reference {
            reference,
            provider_id,
        } => set_status!(
            c,
            m::comms_messages
                .filter(m::reference.eq(reference))
                .filter(m::provider_id.eq(provider_id))
                .filter(m::status.eq_any(below))
        ),
        MessageKey::Provider { provider, id } => set_status!(
            c,
            m::comms_messages
                .filter(m::provider.eq(provider))
                .filter(m::provider_id.eq(id))
                .filter(m::reference.is_null())
                .filter(m::status.eq_any(below))
        ),
    })
}

pub async fn count(conn: &mut DbConn<'_>) -> QueryResult<i64> {
    with_conn!(conn, |c| comms_messages::table.count().get_result(c).await)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kernel::testing::{StatementLog, TestDb};

    use super::*;

    fn row(provider_id: &str) -> NewMessageRow<'_> {
        let now = StoredTime(kernel::time::now());
        NewMessageRow {
            channel: "email",
            provider: "resend",
            recipients: "[]",
            subject: None,
            preview: None,
            provider_id: Some(provider_id),
            status: "sent",
            error: None,
            user_id: None,
            created_at: now,
            updated_at: now,
            reference: None,
        }
    }

    /// A send's statements are prepared once per connection: the log's insert (on PostgreSQL
    /// one text of arrays whatever the number of rows, on SQLite one text for each power of two
    /// rows) and the suppression check (`= ANY($1)` on PostgreSQL, a JSON array through
    /// `json_each` on SQLite, whatever the number of addresses).
    async fn a_sends_statements_are_prepared_once(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let log = StatementLog::default();
        log.attach(&mut conn);
        let lists = [
            &["a@example.com"][..],
            &["b@example.com", "c@example.com"],
            &["d@example.com", "e@example.com", "f@example.com"],
        ];
        for addresses in lists {
            let addresses: Vec<String> = addresses.iter().map(|a| a.to_string()).collect();
            suppressions::find_any(&mut conn, &addresses).await.unwrap();
            suppressions::find_any(&mut conn, &addresses).await.unwrap();
        }
        insert_all(&mut conn, &[row("m1")]).await.unwrap();
        let full_at = chrono::NaiveDate::from_ymd_opt(2026, 1, 2)
            .and_then(|d| d.and_hms_micro_opt(3, 4, 5, 678_901))
            .unwrap();
        let full = NewMessageRow {
            created_at: StoredTime(full_at),
            subject: Some("Hi"),
            preview: Some("Hello"),
            error: Some("bounced"),
            user_id: Some(7),
            ..row("m3")
        };
        insert_all(&mut conn, &[row("m2"), full]).await.unwrap();
        insert_all(&mut conn, &[row("m4"), row("m5")])
            .await
            .unwrap();
        let not_reused = log.not_reused();
        assert!(
            !not_reused
                .iter()
                .any(|sql| ["SELECT", "INSERT"].iter().any(|k| sql.starts_with(k))),
            "{:?}: {not_reused:?}",
            db.backend
        );
        assert_eq!(count(&mut conn).await.unwrap(), 5);
        // Every field lands, and the rows of a batch take ids in their order.
        let (mut rows, _) = list(&mut conn, MessageFilter::default(), 0, 10)
            .await
            .unwrap();
        rows.sort_by_key(|r| r.id);
        let order: Vec<&str> = rows
            .iter()
            .filter_map(|r| r.provider_id.as_deref())
            .collect();
        assert_eq!(order, ["m1", "m2", "m3", "m4", "m5"]);
        let m3 = &rows[2];
        assert_eq!(
            (
                m3.subject.as_deref(),
                m3.preview.as_deref(),
                m3.error.as_deref()
            ),
            (Some("Hi"), Some("Hello"), Some("bounced"))
        );
        assert_eq!(
            (m3.user_id, rows[1].user_id, rows[1].subject.as_deref()),
            (Some(7), None, None)
        );
        assert_eq!(
            (
                m3.channel.as_str(),
                m3.provider.as_str(),
                m3.status.as_str()
            ),
            ("email", "resend", "sent")
        );
        assert_eq!(m3.created_at, full_at);
    }

    /// A row with a reference is found by it (and its provider id), one without by its provider
    /// id; each lookup through its own index, and only rows without a reference must have
    /// provider ids of their own.
    async fn events_find_their_row_by_reference_or_provider_id(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let referenced = |id, reference| NewMessageRow {
            reference: Some(reference),
            ..row(id)
        };
        insert_all(&mut conn, &[row("p1"), referenced("p2", "r2")])
            .await
            .unwrap();
        let reference = |reference, provider_id| MessageKey::Reference {
            reference,
            provider_id,
        };
        let provider = |id| MessageKey::Provider {
            provider: "resend",
            id,
        };
        let now = kernel::time::now();
        for (key, changed) in [
            (provider("p2"), 0),
            (reference("r2", "p1"), 0),
            (reference("r1", "p1"), 0),
            (reference("r2", "p2"), 1),
            (provider("p1"), 1),
        ] {
            let n = advance(&mut conn, key, "delivered", &["sent"], None, now)
                .await
                .unwrap();
            assert_eq!(n, changed, "{key:?}");
        }
        // A provider answering an id twice: a second row with a reference is kept, one without
        // is refused; a reference is never used twice.
        insert_all(&mut conn, &[referenced("p2", "r3")])
            .await
            .unwrap();
        assert!(insert_all(&mut conn, &[row("p1")]).await.is_err());
        assert!(
            insert_all(&mut conn, &[referenced("p4", "r3")])
                .await
                .is_err()
        );

        let by_reference = "UPDATE comms_messages SET status = 'delivered' \
            WHERE reference = $1 AND provider_id = $2 AND status IN ('sent')";
        let by_provider_id = "UPDATE comms_messages SET status = 'delivered' \
            WHERE provider = $1 AND provider_id = $2 AND reference IS NULL AND status IN ('sent')";
        for (sql, index) in [
            (by_reference, "comms_messages_reference_idx"),
            (by_provider_id, "comms_messages_provider_id_idx"),
        ] {
            let plan = plan(&mut conn, sql, "(text, text)").await;
            assert!(plan.contains(index), "{sql}: {plan}");
        }
    }

    /// A page newest first reads its index backwards, sorting nothing (the indexes ascend, so
    /// that new rows go at their end).
    async fn pages_newest_first_read_an_index_backwards(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let everyone = "SELECT id FROM comms_messages \
            ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET $1";
        let one_user = "SELECT id FROM comms_messages WHERE user_id = $1 \
            ORDER BY created_at DESC, id DESC LIMIT 20";
        for (sql, index) in [
            (everyone, "comms_messages_created_idx"),
            (one_user, "comms_messages_user_idx"),
        ] {
            let plan = plan(&mut conn, sql, "(int8)").await;
            assert!(plan.contains(index), "{sql}: {plan}");
            assert!(
                !plan.contains("Sort") && !plan.contains("TEMP B-TREE"),
                "{sql}: {plan}"
            );
            let definition = texts_of(
                &mut conn,
                &format!("SELECT indexdef AS text FROM pg_indexes WHERE indexname = '{index}'"),
                &format!("SELECT sql AS text FROM sqlite_master WHERE name = '{index}'"),
            )
            .await;
            assert!(
                definition.contains("created_at") && !definition.contains("DESC"),
                "{definition}"
            );
        }
    }

    /// On PostgreSQL the log's insert commits without waiting for the disk, and only its own
    /// transaction does: the setting does not stay on the connection, which goes back to the
    /// pool for other modules' writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_logs_insert_alone_commits_asynchronously() {
        let Some(db) = TestDb::postgres().await else {
            eprintln!("TEST_DATABASE_URL is not set: PostgreSQL run skipped");
            return;
        };
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let setting = "SELECT current_setting('synchronous_commit') AS text";
        let run = async |conn: &mut DbConn<'_>, sql: &str| {
            with_conn!(conn, |c| diesel::sql_query(sql).execute(c).await).unwrap();
        };
        // The server's own setting (`on` unless configured otherwise).
        let server = texts_of(&mut conn, setting, "").await;
        assert_ne!(
            server, "off",
            "the test needs a server that commits synchronously"
        );
        run(&mut conn, "BEGIN").await;
        insert_all(&mut conn, &[row("a1")]).await.unwrap();
        assert_eq!(texts_of(&mut conn, setting, "").await, "off");
        run(&mut conn, "ROLLBACK").await;
        assert_eq!(texts_of(&mut conn, setting, "").await, server);
        insert_all(&mut conn, &[row("a2"), row("a3")])
            .await
            .unwrap();
        assert_eq!(texts_of(&mut conn, setting, "").await, server);
        assert_eq!(count(&mut conn).await.unwrap(), 2);
    }

    /// The one text column `text` of a query's rows, joined: `pg` on PostgreSQL, `sqlite` on
    /// SQLite.
    async fn texts_of(conn: &mut DbConn<'_>, pg: &str, sqlite: &str) -> String {
        #[derive(diesel::QueryableByName)]
        struct Line {
            #[diesel(sql_type = diesel::sql_types::Text)]
            text: String,
        }
        let lines: Vec<Line> = with_conn!(
            conn,
            postgres | c | diesel::sql_query(pg).load(c).await,
            sqlite | c | diesel::sql_query(sqlite).load(c).await
        )
        .unwrap();
        lines
            .into_iter()
            .map(|l| l.text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The plan of `sql` (placeholders `$1`, `$2` of the given types): on PostgreSQL as sessions
    /// plan it (once, generic), with an index wherever one can serve (the table is too small for
    /// the planner to prefer it); on SQLite with `'a'`, `'b'` in their place.
    async fn plan(conn: &mut DbConn<'_>, sql: &str, types: &str) -> String {
        if conn.backend() == kernel::db::Backend::Sqlite {
            let sql = sql.replace("$1", "'a'").replace("$2", "'b'");
            return kernel::testing::sqlite_plan(conn, &sql).await;
        }
        #[derive(diesel::QueryableByName)]
        struct PgLine {
            #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
            text: String,
        }
        let lines: Vec<String> = with_conn!(
            conn,
            postgres | c | {
                use diesel_async::SimpleAsyncConnection;
                c.batch_execute(&format!(
                    "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; \
                     DEALLOCATE ALL; PREPARE planned {types} AS {sql}"
                ))
                .await
                .unwrap();
                let args = if types.contains(',') {
                    "('a', 'b')"
                } else {
                    "(1)"
                };
                diesel::sql_query(format!("EXPLAIN EXECUTE planned {args}"))
                    .load::<PgLine>(c)
                    .await
                    .map(|lines| lines.into_iter().map(|l| l.text).collect())
            },
            sqlite | _c | Ok(Vec::new())
        )
        .unwrap();
        lines.join("\n")
    }

    kernel::backend_tests! {
        a_sends_statements_are_prepared_once,
        events_find_their_row_by_reference_or_provider_id,
        pages_newest_first_read_an_index_backwards,
    }
}
