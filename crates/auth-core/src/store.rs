//! Every SQL query of the auth module.

use chrono::NaiveDateTime;
use diesel::{
    AsChangeset, ExpressionMethods, Insertable, OptionalExtension, QueryDsl, QueryResult,
    Queryable, Selectable, SelectableHelper,
};
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
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
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
}

#[derive(Debug, Default, AsChangeset)]
#[diesel(table_name = users)]
pub struct UserChanges<'a> {
    pub is_active: Option<bool>,
    pub role: Option<&'a str>,
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
            .select(UserRow::as_select())
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

#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub async fn delete(conn: &mut DbConn<'_>, id: i64) -> QueryResult<usize> {
    with_conn!(conn, |c| diesel::delete(users::table.find(id))
        .execute(c)
        .await)
}
