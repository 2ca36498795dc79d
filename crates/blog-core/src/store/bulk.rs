//! The import's statements: each writes or reads many rows at once, so that an import costs a
//! few round trips per chunk of posts instead of several per post.

use diesel::{ExpressionMethods, QueryDsl, QueryResult, SelectableHelper};
use kernel::{DbConn, with_conn};

use super::{NewPostRow, NewTagRow, PostRow, PostTagRow, TagRow, tag_ids_text};
use crate::domain::view::PostFields;
use crate::schema::{blog_post_tags, blog_posts, blog_tags};

/// Rows per multi-row statement: well under both backends' limits on bound values (PostgreSQL
/// 65,535; SQLite 32,766) for the widest row (18 columns).
pub const ROWS_PER_STATEMENT: usize = 1000;

/// The posts of these slugs (of any status).
pub async fn posts_by_slugs(conn: &mut DbConn<'_>, slugs: &[&str]) -> QueryResult<Vec<PostRow>> {
    let mut rows = Vec::new();
    for part in slugs.chunks(ROWS_PER_STATEMENT) {
        rows.extend(with_conn!(&mut *conn, |c| {
            blog_posts::table
                .filter(blog_posts::slug.eq_any(part))
                .select(PostRow::as_select())
                .load(c)
                .await
        })?);
    }
    Ok(rows)
}

/// The tags whose slug is one of `slugs` (a post may name any number of tags).
pub async fn tags_by_slugs(conn: &mut DbConn<'_>, slugs: &[&str]) -> QueryResult<Vec<TagRow>> {
    let mut rows = Vec::new();
    for part in slugs.chunks(ROWS_PER_STATEMENT) {
        rows.extend(with_conn!(&mut *conn, |c| {
            blog_tags::table
                .filter(blog_tags::slug.eq_any(part))
                .select(TagRow::as_select())
                .load(c)
                .await
        })?);
    }
    Ok(rows)
}

/// The tags whose `name_key` is one of `keys`.
pub async fn tags_by_name_keys(conn: &mut DbConn<'_>, keys: &[&str]) -> QueryResult<Vec<TagRow>> {
    let mut rows = Vec::new();
    for part in keys.chunks(ROWS_PER_STATEMENT) {
        rows.extend(with_conn!(&mut *conn, |c| {
            blog_tags::table
                .filter(blog_tags::name_key.eq_any(part))
                .select(TagRow::as_select())
                .load(c)
                .await
        })?);
    }
    Ok(rows)
}

/// Inserts tags; their rows.
pub async fn insert_tags(conn: &mut DbConn<'_>, new: &[NewTagRow<'_>]) -> QueryResult<Vec<TagRow>> {
    let mut rows = Vec::with_capacity(new.len());
    for part in new.chunks(ROWS_PER_STATEMENT) {
        rows.extend(with_conn!(&mut *conn, |c| {
            diesel::insert_into(blog_tags::table)
                .values(part)
                .returning(TagRow::as_returning())
                .get_results(c)
                .await
        })?);
    }
    Ok(rows)
}

/// Inserts posts, each with its JSON and its tags' ids (`tag_ids[i]` for `new[i]`); returns
/// `(id, slug)` of each. Their links to the tags are [`insert_links`]'.
pub async fn insert_posts(
    conn: &mut DbConn<'_>,
    new: &[NewPostRow<'_>],
    tag_ids: &[Vec<i64>],
) -> QueryResult<Vec<(i64, String)>> {
    let extra: Vec<(String, String)> = new
        .iter()
        .zip(tag_ids)
        .map(|(post, tags)| (PostFields::from(post).to_json(), tag_ids_text(tags)))
        .collect();
    let mut ids = Vec::with_capacity(new.len());
    for (posts, extra) in new
        .chunks(ROWS_PER_STATEMENT)
        .zip(extra.chunks(ROWS_PER_STATEMENT))
    {
        let part: Vec<_> = posts
            .iter()
            .zip(extra)
            .map(|(post, (json, tags))| {
                (
                    post,
                    blog_posts::api_json.eq(json.as_str()),
                    blog_posts::tag_ids.eq(tags.as_str()),
                )
            })
            .collect();
        ids.extend(with_conn!(&mut *conn, |c| {
            diesel::insert_into(blog_posts::table)
                .values(part)
                .returning((blog_posts::id, blog_posts::slug))
                .get_results::<(i64, String)>(c)
                .await
        })?);
    }
    Ok(ids)
}

/// Links posts to tags.
pub async fn insert_links(conn: &mut DbConn<'_>, links: &[PostTagRow]) -> QueryResult<()> {
    for part in links.chunks(ROWS_PER_STATEMENT) {
        with_conn!(&mut *conn, |c| {
            diesel::insert_into(blog_post_tags::table)
                .values(part)
                .execute(c)
                .await
        })?;
    }
    Ok(())
}
