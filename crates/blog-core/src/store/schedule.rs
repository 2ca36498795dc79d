//! The statements of scheduled publishing and of the sitemap.

use chrono::NaiveDateTime;
use diesel::{
    ExpressionMethods, NullableExpressionMethods, OptionalExtension, QueryDsl, QueryResult,
    SelectableHelper,
};
use kernel::time::StoredTime;
use kernel::{DbConn, with_conn};

use super::PostRow;
use crate::domain::feed::SitemapEntry;
use crate::domain::post::PostStatus;
use crate::schema::blog_posts;

/// The draft `id` as it is now, locked for the rest of the transaction (a no-op update: on
/// PostgreSQL a second transaction claiming it waits for this one and then sees what it wrote;
/// SQLite's write transaction holds the whole file already). `None` when it is not a draft.
pub async fn claim_draft(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<PostRow>> {
    with_conn!(conn, |c| {
        diesel::update(
            blog_posts::table
                .find(id)
                .filter(blog_posts::status.eq(PostStatus::Draft.as_str())),
        )
        .set(blog_posts::id.eq(blog_posts::id))
        .returning(PostRow::as_returning())
        .get_result(c)
        .await
        .optional()
    })
}

/// Drafts whose scheduled time is `now` or earlier, oldest first: `(id, scheduled_at)`.
pub async fn overdue(
    conn: &mut DbConn<'_>,
    now: NaiveDateTime,
    limit: i64,
) -> QueryResult<Vec<(i64, NaiveDateTime)>> {
    let rows: Vec<(i64, StoredTime)> = with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::status.eq(PostStatus::Draft.as_str()))
            .filter(blog_posts::scheduled_at.le(now))
            .order((blog_posts::scheduled_at.asc(), blog_posts::id.asc()))
            .limit(limit)
            .select((blog_posts::id, blog_posts::scheduled_at.assume_not_null()))
            .load(c)
            .await
    })?;
    Ok(rows.into_iter().map(|(id, at)| (id, at.0)).collect())
}

/// The published posts for the sitemap, newest publication first, at most `limit`.
pub async fn sitemap(conn: &mut DbConn<'_>, limit: i64) -> QueryResult<Vec<SitemapEntry>> {
    let rows: Vec<(String, StoredTime)> = with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::status.eq(PostStatus::Published.as_str()))
            .order((blog_posts::published_at.desc(), blog_posts::id.desc()))
            .limit(limit)
            .select((blog_posts::slug, blog_posts::updated_at))
            .load(c)
            .await
    })?;
    Ok(rows
        .into_iter()
        .map(|(slug, at)| SitemapEntry {
            slug,
            updated_at: at.0,
        })
        .collect())
}
