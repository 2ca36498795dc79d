//! Every SQL query of the auth module: users here, the refresh and mail tokens in [`tokens`].

pub mod tokens;

use chrono::NaiveDateTime;
use diesel::{
    AsChangeset, ExpressionMethods, Insertable, OptionalExtension, QueryDsl, QueryResult,
    Queryable, Selectable, SelectableHelper,
};
use kernel::db::Rendered;
use kernel::time::StoredTime;
use kernel::{DbConn, with_conn};

use crate::schema::users;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = users)]
pub struct UserRow {
    pub id: i64,
    pub email: String,
    pub email_key: String,
    pub full_name: Option<String>,
    pub hashed_password: String,
    pub is_active: bool,
    pub role: String,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
    pub email_verified: bool,
    /// Carried by access tokens (claim `sv`); raised to end every session.
    pub session_version: i32,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = users)]
pub struct NewUserRow<'a> {
    pub email: &'a str,
    pub email_key: &'a str,
    pub full_name: Option<&'a str>,
    pub hashed_password: &'a str,
    pub is_active: bool,
    pub role: &'a str,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub email_verified: bool,
}

#[derive(Debug, Default, AsChangeset)]
#[diesel(table_name = users)]
pub struct UserChanges<'a> {
    pub is_active: Option<bool>,
    pub role: Option<&'a str>,
    pub email_verified: Option<bool>,
    pub hashed_password: Option<&'a str>,
    pub updated_at: Option<NaiveDateTime>,
}

pub async fn insert(conn: &mut DbConn<'_>, new: &NewUserRow<'_>) -> QueryResult<UserRow> {
    with_conn!(conn, |c| {
        diesel::insert_into(users::table)
            .values(new)
            .returning(UserRow::as_returning())
            .get_result(c)
            .await
    })
}

pub async fn find(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<UserRow>> {
    with_conn!(conn, |c| {
        users::table
            .find(id)
            // The hot read of every authenticated request: its eleven columns written once.
            .select(Rendered(UserRow::as_select()))
            .first(c)
            .await
            .optional()
    })
}

pub async fn find_by_email_key(conn: &mut DbConn<'_>, key: &str) -> QueryResult<Option<UserRow>> {
    with_conn!(conn, |c| {
        users::table
            .filter(users::email_key.eq(key))
            .select(UserRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

/// One page of users by id, and the total count.
pub async fn list(
    conn: &mut DbConn<'_>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<UserRow>, i64)> {
    with_conn!(conn, |c| {
        let rows = users::table
            .order(users::id.asc())
            .offset(offset)
            .limit(limit)
            .select(UserRow::as_select())
            .load(c)
            .await?;
        let total = users::table.count().get_result(c).await?;
        Ok((rows, total))
    })
}

pub async fn update(
    conn: &mut DbConn<'_>,
    id: i64,
    changes: &UserChanges<'_>,
) -> QueryResult<Option<UserRow>> {
    with_conn!(conn, |c| {
        diesel::update(users::table.find(id))
            .set(changes)
            .returning(UserRow::as_returning())
            .get_result(c)
            .await
            .optional()
    })
}

/// Raises a user's session version: every access token issued before stops working.
pub async fn end_sessions(
    conn: &mut DbConn<'_>,
    id: i64,
    now: NaiveDateTime,
) -> QueryResult<Option<UserRow>> {
    with_conn!(conn, |c| {
        diesel::update(users::table.find(id))
            .set((
                users::session_version.eq(users::session_version + 1),
                users::updated_at.eq(now),
            ))
            .returning(UserRow::as_returning())
            .get_result(c)
            .await
            .optional()
    })
}

#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub async fn delete(conn: &mut DbConn<'_>, id: i64) -> QueryResult<usize> {
    with_conn!(conn, |c| diesel::delete(users::table.find(id))
        .execute(c)
        .await)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::Utc;
    use kernel::testing::{StatementLog, TestDb};

    use super::*;

    kernel::backend_tests! { user_lookups_are_prepared_once_and_reused }

    /// The lookup behind every authenticated request (user by id) and the login's (by email):
    /// prepared once per connection and reused with other values.
    async fn user_lookups_are_prepared_once_and_reused(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let now = Utc::now().naive_utc();
        let mut ids = Vec::new();
        for email in ["a@example.com", "b@example.com"] {
            let new = NewUserRow {
                email,
                email_key: email,
                full_name: None,
                hashed_password: "x",
                is_active: true,
                role: "user",
                created_at: now,
                updated_at: now,
                email_verified: false,
            };
            ids.push(insert(&mut conn, &new).await.unwrap().id);
        }
        let log = StatementLog::default();
        log.attach(&mut conn);
        for id in [ids[0], ids[1], 999] {
            find(&mut conn, id).await.unwrap();
        }
        for key in ["a@example.com", "nobody@example.com"] {
            find_by_email_key(&mut conn, key).await.unwrap();
        }
        assert_eq!(log.statements_run(), 5);
        assert_eq!(log.not_reused(), Vec::<String>::new(), "{:?}", db.backend);
    }
}
