//! Every SQL query of the communications module.

use chrono::NaiveDateTime;
use diesel::{
    ExpressionMethods, Insertable, OptionalExtension, QueryDsl, QueryResult, Queryable, Selectable,
    SelectableHelper,
};
use kernel::db::Cached;
use kernel::time::StoredTime;
use kernel::{DbConn, with_conn};

use crate::schema::comms_messages;

pub mod suppressions;

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

#[derive(Debug, Insertable)]
#[diesel(table_name = comms_messages)]
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
    pub created_at: NaiveDateTime,
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

pub async fn insert(conn: &mut DbConn<'_>, new: &NewMessageRow<'_>) -> QueryResult<MessageRow> {
    with_conn!(conn, |c| {
        Cached(
            diesel::insert_into(comms_messages::table)
                .values(new)
                .returning(MessageRow::as_returning()),
        )
        .get_result(c)
        .await
    })
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

/// Moves the message a provider knows as `provider_id` to `status`, only from a status in `below`
/// (so never backwards, and a replay changes nothing); `error` is kept when `None`. The number of
/// rows changed (0 or 1).
pub async fn advance(
    conn: &mut DbConn<'_>,
    provider: &str,
    provider_id: &str,
    status: &str,
    below: &[&str],
    error: Option<&str>,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        let target = comms_messages::table
            .filter(comms_messages::provider.eq(provider))
            .filter(comms_messages::provider_id.eq(provider_id))
            .filter(comms_messages::status.eq_any(below));
        match error {
            Some(error) => {
                Cached(diesel::update(target).set((
                    comms_messages::status.eq(status),
                    comms_messages::error.eq(error),
                    comms_messages::updated_at.eq(now),
                )))
                .execute(c)
                .await
            }
            None => {
                Cached(diesel::update(target).set((
                    comms_messages::status.eq(status),
                    comms_messages::updated_at.eq(now),
                )))
                .execute(c)
                .await
            }
        }
    })
}

pub async fn count(conn: &mut DbConn<'_>) -> QueryResult<i64> {
    with_conn!(conn, |c| comms_messages::table.count().get_result(c).await)
}
