//! Every SQL query of the blog module.

use chrono::NaiveDateTime;
use diesel::{
    AsChangeset, BoolExpressionMethods, ExpressionMethods, Insertable, OptionalExtension, QueryDsl,
    QueryResult, Queryable, Selectable, SelectableHelper,
};
use kernel::db::{Backend, Rendered};
use kernel::time::{StoredTime, StoredTimeOpt};
use kernel::{DbConn, with_conn};

use crate::domain::post::PostStatus;
use crate::domain::view::{PostFields, shown_excerpt};
use crate::schema::{blog_post_counts, blog_post_tags, blog_posts, blog_tags};

pub mod bulk;
pub mod schedule;

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
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub published_at: Option<NaiveDateTime>,
    pub content_html: String,
    pub derived_excerpt: String,
    /// Read with [`tag_ids_of`].
    pub tag_ids: String,
    /// When a draft is to be published by itself.
    #[diesel(deserialize_as = StoredTimeOpt)]
    pub scheduled_at: Option<NaiveDateTime>,
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
    pub scheduled_at: Option<Option<NaiveDateTime>>,
}

impl<'a> From<&'a PostRow> for PostFields<'a> {
    fn from(row: &'a PostRow) -> Self {
        PostFields {
            title: &row.title,
            slug: &row.slug,
            excerpt: shown_excerpt(row.excerpt.as_deref(), &row.derived_excerpt),
            content: &row.content,
            content_html: &row.content_html,
            status: PostStatus::parse(&row.status).unwrap_or(PostStatus::Draft),
            author_id: row.author_id,
            author_name: row.author_name.as_deref(),
            created_at: row.created_at.into(),
            updated_at: row.updated_at.into(),
            published_at: row.published_at.map(Into::into),
            seo_title: row.seo_title.as_deref(),
            seo_description: row.seo_description.as_deref(),
            hero_image_url: row.hero_image_url.as_deref(),
            scheduled_at: row.scheduled_at.map(Into::into),
        }
    }
}

impl<'a> From<&'a NewPostRow<'a>> for PostFields<'a> {
    fn from(new: &'a NewPostRow<'a>) -> Self {
        PostFields {
            title: new.title,
            slug: new.slug,
            excerpt: shown_excerpt(new.excerpt, new.derived_excerpt),
            content: new.content,
            content_html: new.content_html,
            status: PostStatus::parse(new.status).unwrap_or(PostStatus::Draft),
            author_id: new.author_id,
            author_name: new.author_name,
            created_at: new.created_at.into(),
            updated_at: new.updated_at.into(),
            published_at: new.published_at.map(Into::into),
            seo_title: new.seo_title,
            seo_description: new.seo_description,
            hero_image_url: new.hero_image_url,
            // A new post is never scheduled.
            scheduled_at: None,
        }
    }
}

/// A post as the public reads write it: its stored JSON (see `domain::view`) and what a read
/// adds to it.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = blog_posts)]
pub struct PostJsonRow {
    pub id: i64,
    pub status: String,
    /// The `Last-Modified` of a post's page.
    #[diesel(deserialize_as = StoredTime)]
    pub updated_at: NaiveDateTime,
    /// Read with [`tag_ids_of`].
    pub tag_ids: String,
    /// The post's own fields as JSON; `None` when not rendered.
    pub api_json: Option<String>,
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = blog_tags)]
pub struct TagRow {
    pub id: i64,
    pub name: String,
    pub name_key: String,
    pub slug: String,
    #[diesel(deserialize_as = StoredTime)]
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

/// Inserts a post with its JSON (see `domain::view`).
pub async fn insert_post(conn: &mut DbConn<'_>, new: &NewPostRow<'_>) -> QueryResult<PostRow> {
    let json = PostFields::from(new).to_json();
    with_conn!(conn, |c| {
        diesel::insert_into(blog_posts::table)
            .values((new, blog_posts::api_json.eq(&json)))
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

/// Changes a post, then writes its JSON again (see `domain::view`); the post as changed.
pub async fn update_post(
    conn: &mut DbConn<'_>,
    id: i64,
    changes: &PostChanges<'_>,
) -> QueryResult<Option<PostRow>> {
    let row = with_conn!(&mut *conn, |c| {
        diesel::update(blog_posts::table.find(id))
            .set(changes)
            .returning(PostRow::as_returning())
            .get_result(c)
            .await
            .optional()
    })?;
    if let Some(row) = &row {
        store_json(conn, row).await?;
    }
    Ok(row)
}

/// Writes the JSON of a post from its row (see `domain::view`).
pub async fn store_json(conn: &mut DbConn<'_>, row: &PostRow) -> QueryResult<()> {
    let json = PostFields::from(row).to_json();
    with_conn!(conn, |c| {
        diesel::update(blog_posts::table.find(row.id))
            .set(blog_posts::api_json.eq(&json))
            .execute(c)
            .await
            .map(drop)
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
                query = query.filter(blog_posts::id.eq_any(posts_tagged(tag_id)));
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

/// A page of the public list (one status, newest published first, with or without a tag) as
/// stored JSON, and the number of posts that match: statements of a fixed shape, so that both
/// backends prepare them once per connection and reuse them.
pub async fn public_page(
    conn: &mut DbConn<'_>,
    status: &str,
    tag_id: Option<i64>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<PostJsonRow>, i64)> {
    with_conn!(conn, |c| {
        let with_status = blog_posts::table.filter(blog_posts::status.eq(status));
        let newest = (blog_posts::published_at.desc(), blog_posts::id.desc());
        match tag_id {
            None => {
                // The total is kept by triggers with every write (one row read, not every post
                // counted) and comes with each row of the page; a page past the end reads it alone.
                let kept = blog_post_counts::table
                    .filter(blog_post_counts::status.eq(status))
                    .select(blog_post_counts::posts)
                    .single_value();
                let rows: Vec<(PostJsonRow, Option<i64>)> = with_status
                    .order(newest)
                    .offset(offset)
                    .limit(limit)
                    .select((PostJsonRow::as_select(), kept))
                    .load(c)
                    .await?;
                let total = match rows.as_slice().first() {
                    Some(&(_, total)) => total.unwrap_or(0),
                    None => blog_post_counts::table
                        .find(status)
                        .select(blog_post_counts::posts)
                        .first(c)
                        .await
                        .optional()?
                        .unwrap_or(0),
                };
                Ok((rows.into_iter().map(|(row, _)| row).collect(), total))
            }
            Some(tag_id) => {
                let tagged = with_status.filter(blog_posts::id.eq_any(posts_tagged(tag_id)));
                let rows = tagged
                    .order(newest)
                    .offset(offset)
                    .limit(limit)
                    .select(PostJsonRow::as_select())
                    .load(c)
                    .await?;
                let total = tagged.count().get_result(c).await?;
                Ok((rows, total))
            }
        }
    })
}

/// A post by slug as stored JSON.
pub async fn find_post_json_by_slug(
    conn: &mut DbConn<'_>,
    slug: &str,
) -> QueryResult<Option<PostJsonRow>> {
    with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::slug.eq(slug))
            .select(PostJsonRow::as_select())
            .first(c)
            .await
            .optional()
    })
}

/// The posts with the given ids, by id (in one query; for the rare rows without stored JSON).
pub async fn posts_by_ids(conn: &mut DbConn<'_>, ids: &[i64]) -> QueryResult<Vec<PostRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::id.eq_any(ids))
            .order(blog_posts::id)
            .select(PostRow::as_select())
            .load(c)
            .await
    })
}

/// The ids of the posts that carry a tag (a subquery).
fn posts_tagged(
    tag_id: i64,
) -> diesel::dsl::Select<
    diesel::dsl::Filter<blog_post_tags::table, diesel::dsl::Eq<blog_post_tags::tag_id, i64>>,
    blog_post_tags::post_id,
> {
    blog_post_tags::table
        .filter(blog_post_tags::tag_id.eq(tag_id))
        .select(blog_post_tags::post_id)
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

/// Posts without stored JSON (written before it existed, or changed by a writer that does not
/// write it), after `after_id`, by id. Those written before rendering existed also lack their
/// HTML (empty, while their content is not).
pub async fn unrendered_posts(
    conn: &mut DbConn<'_>,
    after_id: i64,
    limit: i64,
) -> QueryResult<Vec<PostRow>> {
    with_conn!(conn, |c| {
        blog_posts::table
            .filter(blog_posts::id.gt(after_id))
            .filter(blog_posts::api_json.is_null())
            .order(blog_posts::id)
            .limit(limit)
            .select(PostRow::as_select())
            .load(c)
            .await
    })
}

/// The post `id` as it is now if it still has no stored JSON, locked for the rest of the
/// transaction (a write on PostgreSQL, where a concurrent writer may have rendered it meanwhile;
/// SQLite's write transaction holds the whole file already).
pub async fn claim_unrendered(conn: &mut DbConn<'_>, id: i64) -> QueryResult<Option<PostRow>> {
    with_conn!(conn, |c| {
        diesel::update(
            blog_posts::table
                .find(id)
                .filter(blog_posts::api_json.is_null()),
        )
        .set(blog_posts::api_json.eq(None::<String>))
        .returning(PostRow::as_returning())
        .get_result(c)
        .await
        .optional()
    })
}

pub async fn count_posts(conn: &mut DbConn<'_>) -> QueryResult<i64> {
    with_conn!(conn, |c| blog_posts::table.count().get_result(c).await)
}

// ---------------------------------------------------------------------------------------------
// Tags of posts

/// The tag ids of a post's `tag_ids` column: ids separated by commas, `""` for none. `None` for
/// anything else (only a hand-edited row could hold it).
pub fn tag_ids_of(text: &str) -> Option<Vec<i64>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',').map(|id| id.parse().ok()).collect()
}

/// The `tag_ids` text of `ids`.
fn tag_ids_text(ids: &[i64]) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(ids.len() * 4);
    for (i, id) in ids.iter().enumerate() {
        let comma = if i > 0 { "," } else { "" };
        let _ = write!(text, "{comma}{id}"); // writing to a String cannot fail
    }
    text
}

/// The tags with the given ids, by id, in one query whose text does not depend on the number of
/// ids (so that it is prepared once).
pub async fn tags_by_ids(conn: &mut DbConn<'_>, ids: &[i64]) -> QueryResult<Vec<TagRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    with_conn!(
        conn,
        postgres | c | {
            blog_tags::table
                .filter(blog_tags::id.eq_any(ids))
                .order(blog_tags::id)
                .select(TagRow::as_select())
                .load(c)
                .await
        },
        sqlite | c | {
            blog_tags::table
                .filter(kernel::db::in_ids(blog_tags::id, ids))
                .order(blog_tags::id)
                .select(TagRow::as_select())
                .load(c)
                .await
        }
    )
}

/// Replaces the tags of a post: its links, and its `tag_ids` column, which the reads use; the
/// new `tag_ids` text. (One insert per link: SQLite's multi-row insert is not available through
/// the async wrapper, and a post has few tags.)
pub async fn set_post_tags(
    conn: &mut DbConn<'_>,
    post_id: i64,
    tag_ids: &[i64],
) -> QueryResult<String> {
    let text = tag_ids_text(tag_ids);
    with_conn!(conn, |c| {
        diesel::update(blog_posts::table.find(post_id))
            .set(blog_posts::tag_ids.eq(&text))
            .execute(c)
            .await?;
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
        Ok(text)
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

/// Deletes a tag and its links to posts, and takes it out of those posts' `tag_ids` (one
/// statement for all of them); the number of tags deleted.
pub async fn delete_tag(conn: &mut DbConn<'_>, id: i64) -> QueryResult<usize> {
    use diesel::sql_types::{BigInt, Text};
    // Each tagged post's other links, joined as `tag_ids` are: the aggregate is named differently.
    let others = match conn.backend() {
        Backend::Postgres => "string_agg(l.tag_id::text, ',')",
        Backend::Sqlite => "group_concat(l.tag_id, ',')",
    };
    let remaining = diesel::dsl::sql::<Text>(&format!(
        "COALESCE((SELECT {others} FROM blog_post_tags l \
         WHERE l.post_id = blog_posts.id AND l.tag_id <> "
    ))
    .bind::<BigInt, _>(id)
    .sql("), '')");
    with_conn!(conn, |c| {
        diesel::update(blog_posts::table.filter(blog_posts::id.eq_any(posts_tagged(id))))
            .set(blog_posts::tag_ids.eq(remaining))
            .execute(c)
            .await?;
        diesel::delete(blog_post_tags::table.filter(blog_post_tags::tag_id.eq(id)))
            .execute(c)
            .await?;
        diesel::delete(blog_tags::table.find(id)).execute(c).await
    })
}

pub async fn list_tags(conn: &mut DbConn<'_>) -> QueryResult<Vec<TagRow>> {
    with_conn!(conn, |c| {
        blog_tags::table
            .select(Rendered(TagRow::as_select()))
            .load(c)
            .await
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::Utc;
    use kernel::testing::{StatementLog, TestDb};

    use super::*;

    kernel::backend_tests! {
        hot_reads_are_prepared_once_and_reused,
        the_kept_counts_follow_every_write,
        tag_ids_follow_the_links,
        the_stored_json_follows_every_write,
    }

    #[test]
    fn tag_ids_text_reads_back() {
        for ids in [vec![], vec![7], vec![3, 12, 9_007_199_254_740_993]] {
            assert_eq!(tag_ids_of(&tag_ids_text(&ids)), Some(ids));
        }
        for bad in [",", "1,", "1,,2", "x", " 1", "1;2"] {
            assert_eq!(tag_ids_of(bad), None, "{bad:?}");
        }
    }

    /// Each post's `tag_ids` names exactly its links after tags are set, replaced, cleared, and
    /// after a tag that several posts carry is deleted.
    async fn tag_ids_follow_the_links(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let tags = insert_tags(&mut conn, &["alpha", "beta", "gamma"]).await;
        let mut posts = Vec::new();
        for slug in ["one", "two", "three"] {
            posts.push(
                insert_post(&mut conn, &new_post(slug, "published"))
                    .await
                    .unwrap()
                    .id,
            );
        }
        let check = async |conn: &mut DbConn<'_>| {
            for &post in &posts {
                let row = find_post(conn, post).await.unwrap().unwrap();
                let mut kept = tag_ids_of(&row.tag_ids).unwrap();
                kept.sort_unstable();
                let linked: Vec<i64> = with_conn!(&mut *conn, |c| {
                    blog_post_tags::table
                        .filter(blog_post_tags::post_id.eq(post))
                        .select(blog_post_tags::tag_id)
                        .order(blog_post_tags::tag_id)
                        .load(c)
                        .await
                })
                .unwrap();
                assert_eq!(kept, linked, "post {post}");
            }
        };
        check(&mut conn).await;
        set_post_tags(&mut conn, posts[0], &tags).await.unwrap();
        set_post_tags(&mut conn, posts[1], &[tags[1], tags[0]])
            .await
            .unwrap();
        set_post_tags(&mut conn, posts[2], &tags[2..])
            .await
            .unwrap();
        check(&mut conn).await;
        set_post_tags(&mut conn, posts[2], &[]).await.unwrap();
        set_post_tags(&mut conn, posts[0], &tags[1..])
            .await
            .unwrap();
        check(&mut conn).await;
        assert_eq!(delete_tag(&mut conn, tags[1]).await.unwrap(), 1);
        check(&mut conn).await;
        let row = find_post(&mut conn, posts[1]).await.unwrap().unwrap();
        assert_eq!(tag_ids_of(&row.tag_ids), Some(vec![tags[0]]));
    }

    /// The stored JSON of a post is its row's own, after an insert, an update and a change of
    /// tags; a write that changes a shown field without writing the JSON (a hand edit) leaves it
    /// NULL, never stale; claiming and storing it again restores it.
    async fn the_stored_json_follows_every_write(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let stored = async |conn: &mut DbConn<'_>, id: i64| -> Option<String> {
            with_conn!(&mut *conn, |c| {
                blog_posts::table
                    .find(id)
                    .select(blog_posts::api_json)
                    .first(c)
                    .await
            })
            .unwrap()
        };
        let expected = async |conn: &mut DbConn<'_>, id: i64| -> String {
            PostFields::from(&find_post(conn, id).await.unwrap().unwrap()).to_json()
        };
        let id = insert_post(&mut conn, &new_post("one", "draft"))
            .await
            .unwrap()
            .id;
        assert_eq!(
            stored(&mut conn, id).await,
            Some(expected(&mut conn, id).await)
        );
        let changes = PostChanges {
            title: Some("renamed"),
            status: Some("published"),
            excerpt: Some(Some("said")),
            ..Default::default()
        };
        update_post(&mut conn, id, &changes).await.unwrap();
        let json = stored(&mut conn, id).await.unwrap();
        assert_eq!(json, expected(&mut conn, id).await);
        assert!(json.contains(r#""title":"renamed""#) && json.contains(r#""excerpt":"said""#));
        let tags = insert_tags(&mut conn, &["alpha"]).await;
        set_post_tags(&mut conn, id, &tags).await.unwrap();
        assert_eq!(stored(&mut conn, id).await, Some(json));
        let edited: usize = with_conn!(&mut conn, |c| {
            diesel::sql_query("UPDATE blog_posts SET title = 'by hand'")
                .execute(c)
                .await
        })
        .unwrap();
        assert_eq!(edited, 1);
        assert_eq!(stored(&mut conn, id).await, None);
        let claimed = claim_unrendered(&mut conn, id).await.unwrap().unwrap();
        assert_eq!(claimed.title, "by hand");
        store_json(&mut conn, &claimed).await.unwrap();
        assert_eq!(
            stored(&mut conn, id).await,
            Some(expected(&mut conn, id).await)
        );
        assert!(claim_unrendered(&mut conn, id).await.unwrap().is_none());
    }

    /// Tags named (and slugged) `names`; their ids.
    async fn insert_tags(conn: &mut DbConn<'_>, names: &[&str]) -> Vec<i64> {
        let now = Utc::now().naive_utc();
        let mut ids = Vec::new();
        for &name in names {
            let new = NewTagRow {
                name,
                name_key: name,
                slug: name,
                created_at: now,
            };
            ids.push(insert_tag(conn, &new).await.unwrap().id);
        }
        ids
    }

    fn new_post<'a>(slug: &'a str, status: &'a str) -> NewPostRow<'a> {
        let now = Utc::now().naive_utc();
        NewPostRow {
            title: slug,
            slug,
            excerpt: None,
            content: "body",
            status,
            author_id: None,
            author_name: None,
            seo_title: None,
            seo_description: None,
            hero_image_url: None,
            created_at: now,
            updated_at: now,
            published_at: (status == "published").then_some(now),
            content_html: "<p>body</p>",
            derived_excerpt: "body",
        }
    }

    /// The total of the public list comes from counts kept by triggers: after inserts, status
    /// changes both ways, an update that leaves the status alone, and deletes, each kept count
    /// equals a real count.
    async fn the_kept_counts_follow_every_write(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let mut ids = Vec::new();
        for (i, status) in ["published", "draft", "published", "archived", "published"]
            .into_iter()
            .enumerate()
        {
            let slug = format!("post-{i}");
            ids.push(
                insert_post(&mut conn, &new_post(&slug, status))
                    .await
                    .unwrap()
                    .id,
            );
        }
        let check = async |conn: &mut DbConn<'_>, published: i64| {
            for status in ["draft", "published", "archived"] {
                let (_, kept) = public_page(conn, status, None, 0, 1).await.unwrap();
                let counted = with_conn!(&mut *conn, |c| {
                    blog_posts::table
                        .filter(blog_posts::status.eq(status))
                        .count()
                        .get_result::<i64>(c)
                        .await
                })
                .unwrap();
                assert_eq!(kept, counted, "{status}");
                // A page past the end reads the kept count alone.
                let (rows, past_end) = public_page(conn, status, None, 1_000, 1).await.unwrap();
                assert!(rows.is_empty());
                assert_eq!(past_end, counted, "{status} past the end");
            }
            let (_, total) = public_page(conn, "published", None, 0, 1).await.unwrap();
            assert_eq!(total, published);
        };
        check(&mut conn, 3).await;
        let to_draft = PostChanges {
            status: Some("draft"),
            ..Default::default()
        };
        update_post(&mut conn, ids[0], &to_draft).await.unwrap();
        check(&mut conn, 2).await;
        let title_only = PostChanges {
            title: Some("renamed"),
            ..Default::default()
        };
        update_post(&mut conn, ids[2], &title_only).await.unwrap();
        check(&mut conn, 2).await;
        let publish = PostChanges {
            status: Some("published"),
            ..Default::default()
        };
        update_post(&mut conn, ids[1], &publish).await.unwrap();
        update_post(&mut conn, ids[3], &publish).await.unwrap();
        check(&mut conn, 4).await;
        delete_post(&mut conn, ids[4]).await.unwrap();
        delete_post(&mut conn, ids[0]).await.unwrap();
        check(&mut conn, 3).await;
    }

    /// The public list (rows, count, tags of the page), with and without a tag filter, and a post by
    /// slug: every statement is prepared once per connection and reused with other values.
    async fn hot_reads_are_prepared_once_and_reused(db: TestDb) {
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let mut conn = pooled.conn();
        let tags = insert_tags(&mut conn, &["alpha", "beta"]).await;
        for i in 0..5 {
            let slug = format!("post-{i}");
            let post = insert_post(&mut conn, &new_post(&slug, "published"))
                .await
                .unwrap();
            set_post_tags(&mut conn, post.id, &tags[..1 + i % 2])
                .await
                .unwrap();
        }
        let log = StatementLog::default();
        log.attach(&mut conn);
        for (page, tag) in [(0, None), (2, None), (0, Some(tags[0])), (1, Some(tags[1]))] {
            let (rows, total) = public_page(&mut conn, "published", tag, page, 2 + page)
                .await
                .unwrap();
            assert!(total > 0 && !rows.is_empty());
            let mut ids: Vec<i64> = rows
                .iter()
                .flat_map(|r| tag_ids_of(&r.tag_ids).unwrap())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            assert!(!tags_by_ids(&mut conn, &ids).await.unwrap().is_empty());
        }
        for slug in ["post-1", "post-3", "none"] {
            find_post_json_by_slug(&mut conn, slug).await.unwrap();
        }
        // Two pages with their total and tags, two tagged pages with a count, three slugs.
        assert_eq!(log.statements_run(), 2 * 2 + 2 * 3 + 3);
        assert_eq!(log.not_reused(), Vec::<String>::new(), "{:?}", db.backend);
    }
}
