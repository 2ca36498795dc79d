//! The queries of refresh tokens and mail tokens. Both tables hold the SHA-256 of each token
//! (hex), never the token; expiry and use are checked on the row in Rust, in the transaction that
//! then marks it used (`WHERE used_at IS NULL`, so that two concurrent uses cannot both win).

use chrono::NaiveDateTime;
use diesel::{
    ExpressionMethods, Insertable, OptionalExtension, QueryDsl, QueryResult, Queryable, Selectable,
    SelectableHelper,
};
use kernel::time::{StoredTime, StoredTimeOpt};
use kernel::{DbConn, with_conn};

use crate::schema::{auth_mail_tokens, auth_refresh_tokens};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = auth_refresh_tokens)]
pub struct RefreshRow {
    pub id: i64,
    pub user_id: i64,
    pub family: String,
    #[diesel(deserialize_as = StoredTime)]
    pub expires_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub used_at: Option<NaiveDateTime>,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub revoked_at: Option<NaiveDateTime>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = auth_refresh_tokens)]
pub struct NewRefreshRow<'a> {
    pub user_id: i64,
    pub family: &'a str,
    pub token_hash: &'a str,
    pub created_at: NaiveDateTime,
    pub expires_at: NaiveDateTime,
}

pub async fn insert_refresh(conn: &mut DbConn<'_>, new: &NewRefreshRow<'_>) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::insert_into(auth_refresh_tokens::table)
            .values(new)
            .execute(c)
            .await
    })
}

pub async fn find_refresh(conn: &mut DbConn<'_>, hash: &str) -> QueryResult<Option<RefreshRow>> {
    with_conn!(conn, |c| {
        auth_refresh_tokens::table
            .filter(auth_refresh_tokens::token_hash.eq(hash))
            .select(RefreshRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

/// Marks a refresh token used (rotated); 0 when it was used or revoked meanwhile.
pub async fn mark_refresh_used(
    conn: &mut DbConn<'_>,
    id: i64,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::update(
            auth_refresh_tokens::table
                .find(id)
                .filter(auth_refresh_tokens::used_at.is_null())
                .filter(auth_refresh_tokens::revoked_at.is_null()),
        )
        .set(auth_refresh_tokens::used_at.eq(now))
        .execute(c)
        .await
    })
}

/// Revokes every token of a family not revoked yet.
pub async fn revoke_family(
    conn: &mut DbConn<'_>,
    family: &str,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::update(
            auth_refresh_tokens::table
                .filter(auth_refresh_tokens::family.eq(family))
                .filter(auth_refresh_tokens::revoked_at.is_null()),
        )
        .set(auth_refresh_tokens::revoked_at.eq(now))
        .execute(c)
        .await
    })
}

/// Revokes every refresh token of a user not revoked yet.
pub async fn revoke_user_refresh(
    conn: &mut DbConn<'_>,
    user_id: i64,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::update(
            auth_refresh_tokens::table
                .filter(auth_refresh_tokens::user_id.eq(user_id))
                .filter(auth_refresh_tokens::revoked_at.is_null()),
        )
        .set(auth_refresh_tokens::revoked_at.eq(now))
        .execute(c)
        .await
    })
}

/// Deletes a user's refresh tokens that expired before `now` (kept until then, so that a reused
/// token is recognised as one).
pub async fn delete_expired_refresh(
    conn: &mut DbConn<'_>,
    user_id: i64,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::delete(
            auth_refresh_tokens::table
                .filter(auth_refresh_tokens::user_id.eq(user_id))
                .filter(auth_refresh_tokens::expires_at.lt(now)),
        )
        .execute(c)
        .await
    })
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = auth_mail_tokens)]
pub struct MailTokenRow {
    pub id: i64,
    pub user_id: i64,
    #[diesel(deserialize_as = StoredTime)]
    pub expires_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub used_at: Option<NaiveDateTime>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = auth_mail_tokens)]
pub struct NewMailTokenRow<'a> {
    pub user_id: i64,
    pub purpose: &'a str,
    pub token_hash: &'a str,
    pub created_at: NaiveDateTime,
    pub expires_at: NaiveDateTime,
}

pub async fn insert_mail_token(
    conn: &mut DbConn<'_>,
    new: &NewMailTokenRow<'_>,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::insert_into(auth_mail_tokens::table)
            .values(new)
            .execute(c)
            .await
    })
}

/// The mail token of `purpose` whose hash is `hash`.
pub async fn find_mail_token(
    conn: &mut DbConn<'_>,
    purpose: &str,
    hash: &str,
) -> QueryResult<Option<MailTokenRow>> {
    with_conn!(conn, |c| {
        auth_mail_tokens::table
            .filter(auth_mail_tokens::token_hash.eq(hash))
            .filter(auth_mail_tokens::purpose.eq(purpose))
            .select(MailTokenRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

/// Marks every unused token of a user and purpose used (the one being consumed included): 0 when
/// none was left.
pub async fn use_up_mail_tokens(
    conn: &mut DbConn<'_>,
    user_id: i64,
    purpose: &str,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::update(
            auth_mail_tokens::table
                .filter(auth_mail_tokens::user_id.eq(user_id))
                .filter(auth_mail_tokens::purpose.eq(purpose))
                .filter(auth_mail_tokens::used_at.is_null()),
        )
        .set(auth_mail_tokens::used_at.eq(now))
        .execute(c)
        .await
    })
}

/// Marks one mail token used; 0 when it was used meanwhile.
pub async fn consume_mail_token(
    conn: &mut DbConn<'_>,
    id: i64,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::update(
            auth_mail_tokens::table
                .find(id)
                .filter(auth_mail_tokens::used_at.is_null()),
        )
        .set(auth_mail_tokens::used_at.eq(now))
        .execute(c)
        .await
    })
}

/// Deletes a user's mail tokens that expired before `now`.
pub async fn delete_expired_mail_tokens(
    conn: &mut DbConn<'_>,
    user_id: i64,
    now: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::delete(
            auth_mail_tokens::table
                .filter(auth_mail_tokens::user_id.eq(user_id))
                .filter(auth_mail_tokens::expires_at.lt(now)),
        )
        .execute(c)
        .await
    })
}

/// Moves the expiry of every token of a user to `at` (tests: an expired token without waiting).
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub async fn expire_all(
    conn: &mut DbConn<'_>,
    user_id: i64,
    at: NaiveDateTime,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        let refresh = diesel::update(
            auth_refresh_tokens::table.filter(auth_refresh_tokens::user_id.eq(user_id)),
        )
        .set(auth_refresh_tokens::expires_at.eq(at))
        .execute(c)
        .await?;
        let mail =
            diesel::update(auth_mail_tokens::table.filter(auth_mail_tokens::user_id.eq(user_id)))
                .set(auth_mail_tokens::expires_at.eq(at))
                .execute(c)
                .await?;
        QueryResult::Ok(refresh + mail)
    })
}

/// Every stored hash of a user's refresh and mail tokens (tests).
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub async fn hashes_of(conn: &mut DbConn<'_>, user_id: i64) -> QueryResult<Vec<String>> {
    with_conn!(conn, |c| {
        let mut hashes: Vec<String> = auth_refresh_tokens::table
            .filter(auth_refresh_tokens::user_id.eq(user_id))
            .select(auth_refresh_tokens::token_hash)
            .load(c)
            .await?;
        let mail: Vec<String> = auth_mail_tokens::table
            .filter(auth_mail_tokens::user_id.eq(user_id))
            .select(auth_mail_tokens::token_hash)
            .load(c)
            .await?;
        hashes.extend(mail);
        QueryResult::Ok(hashes)
    })
}
