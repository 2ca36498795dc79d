//! Every SQL query of the blog module.

use chrono::NaiveDateTime;
use diesel::{
    AsChangeset, BoolExpressionMethods, ExpressionMethods, Insertable, OptionalExtension, QueryDsl,
    QueryResult, Queryable, Selectable, SelectableHelper,
};
use kernel::{DbConn, with_conn};

use crate::schema::{blog_post_tags, blog_posts, blog_tags};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = blog_posts)]
pub struct PostRow {
    pub id: i64,
    pub title: String,
    pub slug: String,
    pub excerpt: Option<String>,
    pub content: String,
    pub status: String,
    pub author_id: Option<i64>,
    pub author_name: Option<String>,
    pub seo_title: Option<String>,
    pub seo_description: Option<String>,
    pub hero_image_url: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub published_at: Option<NaiveDateTime>,
    pub content_html: String,
    pub derived_excerpt: String,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = blog_posts)]
pub struct NewPostRow<'a> {
    pub title: &'a str,
    pub slug: &'a str,
    pub excerpt: Option<&'a str>,
    pub content: &'a str,
    pub status: &'a str,
    pub author_id: Option<i64>,
    pub author_name: Option<&'a str>,
    pub seo_title: Option<&'a str>,
    pub seo_description: Option<&'a str>,
    pub hero_image_url: Option<&'a str>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub published_at: Option<NaiveDateTime>,
    pub content_html: &'a str,
    pub derived_excerpt: &'a str,
}

/// A change to a post: `None` leaves a column alone; `Some(None)` sets a nullable column to NULL.
#[derive(Debug, Default, AsChangeset)]
#[diesel(table_name = blog_posts)]
pub struct PostChanges<'a> {
    pub title: Option<&'a str>,
    pub slug: Option<&'a str>,
    pub excerpt: Option<Option<&'a str>>,
    pub content: Option<&'a str>,
    pub status: Option<&'a str>,
    pub author_name: Option<Option<&'a str>>,
    pub seo_title: Option<Option<&'a str>>,
    pub seo_description: Option<Option<&'a str>>,
    pub hero_image_url: Option<Option<&'a str>>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub published_at: Option<Option<NaiveDateTime>>,
    pub content_html: Option<&'a str>,
    pub derived_excerpt: Option<&'a str>,
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = blog_tags)]
pub struct TagRow {
    pub id: i64,
    pub name: String,
    pub name_key: String,
    pub slug: String,
    pub created_at: NaiveDateTime,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = blog_tags)]
pub struct NewTagRow<'a> {
    pub name: &'a str,
    pub name_key: &'a str,
    pub slug: &'a str,
    pub created_at: NaiveDateTime,
}

#[derive(Debug, Default, AsChangeset)]
#[diesel(table_name = blog_tags)]
pub struct TagChanges<'a> {
    pub name: Option<&'a str>,
    pub name_key: Option<&'a str>,
    pub slug: Option<&'a str>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = blog_post_tags)]
pub struct PostTagRow {
    pub post_id: i64,
    pub tag_id: i64,
}

/// Which posts a list shows, and in which order.
#[derive(Debug, Clone, Copy)]
pub struct PostFilter<'a> {
    pub status: Option<&'a str>,
    pub tag_id: Option<i64>,
    pub order: PostOrder,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostOrder {
    /// `published_at DESC, id DESC` (the public list).
    NewestPublished,
    /// `created_at DESC, id DESC` (the editor list).
    NewestCreated,
}

// ---------------------------------------------------------------------------------------------
// Posts

pub async fn insert_post(conn: &mut DbConn<'_>, new: &NewPostRow<'_>) -> QueryResult<PostRow> {
    with_conn!(conn, |c| {
        diesel::insert_into(blog_posts::table)
            .values(new)
            .returning(PostRow::as_returning())
            .get_result(c)
            .await
    })
}

pub async fn find_post(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<PostRow>> {
    with_conn!(conn, |c| {
        blog_posts::table
            .find(id)
            .select(PostRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

pub async fn find_post_by_slug(conn: &mut DbConn<'_>, slug: &str) -> QueryResult<Option<PostRow>> {
    with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::slug.eq(slug))
            .select(PostRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

pub async fn update_post(
    conn: &mut DbConn<'_>,
    id: i64,
    changes: &PostChanges<'_>,
) -> QueryResult<Option<PostRow>> {
    with_conn!(conn, |c| {
        diesel::update(blog_posts::table.find(id))
            .set(changes)
            .returning(PostRow::as_returning())
            .get_result(c)
            .await
            .optional()
    })
}

/// Deletes a post and its tag links; the number of posts deleted.
pub async fn delete_post(conn: &mut DbConn<'_>, id: i64) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::delete(blog_post_tags::table.filter(blog_post_tags::post_id.eq(id)))
            .execute(c)
            .await?;
        diesel::delete(blog_posts::table.find(id)).execute(c).await
    })
}

/// One page of posts and the total number that match.
pub async fn list_posts(
    conn: &mut DbConn<'_>,
    filter: PostFilter<'_>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<PostRow>, i64)> {
    // Built twice (rows and count): boxed queries cannot be cloned.
    macro_rules! filtered {
        () => {{
            let mut query = blog_posts::table.into_boxed();
            if let Some(status) = filter.status {
                query = query.filter(blog_posts::status.eq(status));
            }
            if let Some(tag_id) = filter.tag_id {
                query = query.filter(
                    blog_posts::id.eq_any(
                        blog_post_tags::table
                            .filter(blog_post_tags::tag_id.eq(tag_id))
                            .select(blog_post_tags::post_id),
                    ),
                );
            }
            query
        }};
    }
    with_conn!(conn, |c| {
        let query = filtered!();
        let query = match filter.order {
            PostOrder::NewestPublished => {
                query.order((blog_posts::published_at.desc(), blog_posts::id.desc()))
            }
            PostOrder::NewestCreated => {
                query.order((blog_posts::created_at.desc(), blog_posts::id.desc()))
            }
        };
        let rows = query
            .offset(offset)
            .limit(limit)
            .select(PostRow::as_select())
            .load(c)
            .await?;
        let total = filtered!().count().get_result(c).await?;
        Ok((rows, total))
    })
}

/// Up to `limit` posts after `cursor` in `created_at ASC, id ASC` order (the export's order).
pub async fn posts_after(
    conn: &mut DbConn<'_>,
    status: Option<&str>,
    cursor: Option<(NaiveDateTime, i64)>,
    limit: i64,
) -> QueryResult<Vec<PostRow>> {
    with_conn!(conn, |c| {
        let mut query = blog_posts::table.into_boxed();
        if let Some(status) = status {
            query = query.filter(blog_posts::status.eq(status));
        }
        if let Some((created_at, id)) = cursor {
            query = query.filter(
                blog_posts::created_at
                    .gt(created_at)
                    .or(blog_posts::created_at
                        .eq(created_at)
                        .and(blog_posts::id.gt(id))),
            );
        }
        query
            .order((blog_posts::created_at.asc(), blog_posts::id.asc()))
            .limit(limit)
            .select(PostRow::as_select())
            .load(c)
            .await
    })
}

/// Posts with content but no rendered HTML (written before rendering existed), after `after_id`,
/// as (id, content), by id.
pub async fn unrendered_posts(
    conn: &mut DbConn<'_>,
    after_id: i64,
    limit: i64,
) -> QueryResult<Vec<(i64, String)>> {
    with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::id.gt(after_id))
            .filter(blog_posts::content_html.eq(""))
            .filter(blog_posts::content.ne(""))
            .order(blog_posts::id)
            .limit(limit)
            .select((blog_posts::id, blog_posts::content))
            .load(c)
            .await
    })
}

/// Stores a post's rendering without touching anything else (`updated_at` included).
pub async fn set_rendered(
    conn: &mut DbConn<'_>,
    id: i64,
    html: &str,
    excerpt: &str,
) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::update(blog_posts::table.find(id))
            .set((
                blog_posts::content_html.eq(html),
                blog_posts::derived_excerpt.eq(excerpt),
            ))
            .execute(c)
            .await
    })
}

pub async fn count_posts(conn: &mut DbConn<'_>) -> QueryResult<i64> {
    with_conn!(conn, |c| blog_posts::table.count().get_result(c).await)
}

// ---------------------------------------------------------------------------------------------
// Tags of posts

/// The tags of the given posts, as (post id, tag), in one query.
pub async fn tags_of_posts(
    conn: &mut DbConn<'_>,
    post_ids: &[i64],
) -> QueryResult<Vec<(i64, TagRow)>> {
    if post_ids.is_empty() {
        return Ok(Vec::new());
    }
    with_conn!(conn, |c| {
        blog_post_tags::table
            .inner_join(blog_tags::table)
            .filter(blog_post_tags::post_id.eq_any(post_ids))
            .select((blog_post_tags::post_id, TagRow::as_select()))
            .load(c)
            .await
    })
}

/// Replaces the tags of a post. (One insert per link: SQLite's multi-row insert is not available
/// through the async wrapper, and a post has few tags.)
pub async fn set_post_tags(
    conn: &mut DbConn<'_>,
    post_id: i64,
    tag_ids: &[i64],
) -> QueryResult<()> {
    with_conn!(conn, |c| {
        diesel::delete(blog_post_tags::table.filter(blog_post_tags::post_id.eq(post_id)))
            .execute(c)
            .await?;
        for tag_id in tag_ids {
            diesel::insert_into(blog_post_tags::table)
                .values(PostTagRow {
                    post_id,
                    tag_id: *tag_id,
                })
                .execute(c)
                .await?;
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Tags

pub async fn insert_tag(conn: &mut DbConn<'_>, new: &NewTagRow<'_>) -> QueryResult<TagRow> {
    with_conn!(conn, |c| {
        diesel::insert_into(blog_tags::table)
            .values(new)
            .returning(TagRow::as_returning())
            .get_result(c)
            .await
    })
}

pub async fn find_tag(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<TagRow>> {
    with_conn!(conn, |c| {
        blog_tags::table
            .find(id)
            .select(TagRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

pub async fn find_tag_by_slug(conn: &mut DbConn<'_>, slug: &str) -> QueryResult<Option<TagRow>> {
    with_conn!(conn, |c| {
        blog_tags::table
            .filter(blog_tags::slug.eq(slug))
            .select(TagRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

pub async fn find_tag_by_name_key(
    conn: &mut DbConn<'_>,
    name_key: &str,
) -> QueryResult<Option<TagRow>> {
    with_conn!(conn, |c| {
        blog_tags::table
            .filter(blog_tags::name_key.eq(name_key))
            .select(TagRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

/// Another tag (not `except`) with this name key or slug.
pub async fn find_tag_clash(
    conn: &mut DbConn<'_>,
    name_key: &str,
    slug: &str,
    except: Option<i64>,
) -> QueryResult<Option<TagRow>> {
    with_conn!(conn, |c| {
        let mut query = blog_tags::table
            .filter(
                blog_tags::name_key
                    .eq(name_key)
                    .or(blog_tags::slug.eq(slug)),
            )
            .into_boxed();
        if let Some(id) = except {
            query = query.filter(blog_tags::id.ne(id));
        }
        query.select(TagRow::as_select()).first(c).await.optional()
    })
}

pub async fn tags_by_slugs(conn: &mut DbConn<'_>, slugs: &[String]) -> QueryResult<Vec<TagRow>> {
    if slugs.is_empty() {
        return Ok(Vec::new());
    }
    with_conn!(conn, |c| {
        blog_tags::table
            .filter(blog_tags::slug.eq_any(slugs))
            .select(TagRow::as_select())
            .load(c)
            .await
    })
}

pub async fn update_tag(
    conn: &mut DbConn<'_>,
    id: i64,
    changes: &TagChanges<'_>,
) -> QueryResult<Option<TagRow>> {
    with_conn!(conn, |c| {
        diesel::update(blog_tags::table.find(id))
            .set(changes)
            .returning(TagRow::as_returning())
            .get_result(c)
            .await
            .optional()
    })
}

/// Deletes a tag and its links to posts; the number of tags deleted.
pub async fn delete_tag(conn: &mut DbConn<'_>, id: i64) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::delete(blog_post_tags::table.filter(blog_post_tags::tag_id.eq(id)))
            .execute(c)
            .await?;
        diesel::delete(blog_tags::table.find(id)).execute(c).await
    })
}

pub async fn list_tags(conn: &mut DbConn<'_>) -> QueryResult<Vec<TagRow>> {
    with_conn!(conn, |c| {
        blog_tags::table.select(TagRow::as_select()).load(c).await
    })
}
