//! The import's statements: each writes or reads many rows at once, so that an import costs a
//! few round trips per chunk of posts instead of several per post.

use diesel::{ExpressionMethods, QueryDsl, QueryResult, SelectableHelper};
use kernel::{DbConn, with_conn};

use super::{NewPostRow, NewTagRow, PostTagRow, TagRow, tag_ids_text};
use crate::domain::view::PostFields;
use crate::schema::blog_tags;

/// Rows per multi-row statement: well under both backends' limits on bound values (PostgreSQL
/// 65,535; SQLite 32,766) for the widest row (18 columns).
pub const ROWS_PER_STATEMENT: usize = 1000;

/// `(id, slug)` of the posts of these slugs (of any status).
///
/// On PostgreSQL each slug is looked up on its own in the slug's index (a lateral subquery that
/// the planner cannot turn into a join): the session plans a statement once (see
/// `kernel::db::postgres`), and `slug = ANY($1)` planned while the table was small scans the
/// whole table for every later call, so that an import into an empty blog slowed with each of
/// its chunks (from 9 to 130 ms per chunk over 10,000 posts).
pub async fn posts_by_slugs(
    conn: &mut DbConn<'_>,
    slugs: &[&str],
) -> QueryResult<Vec<(i64, String)>> {
    let mut rows = Vec::new();
    for part in slugs.chunks(ROWS_PER_STATEMENT) {
        rows.extend(with_conn!(
            &mut *conn,
            postgres | c | {
                use diesel::sql_types::{Array, Text};
                use kernel::db::Cached;
                let found: Vec<pg::IdSlug> =
                    Cached(diesel::sql_query(pg::POSTS_BY_SLUGS).bind::<Array<Text>, _>(part))
                        .load(c)
                        .await?;
                let found = found.into_iter().map(|row| (row.id, row.slug));
                Ok::<_, diesel::result::Error>(found.collect::<Vec<_>>())
            },
            sqlite | c | {
                use crate::schema::blog_posts;
                blog_posts::table
                    .filter(blog_posts::slug.eq_any(part))
                    .select((blog_posts::id, blog_posts::slug))
                    .load(c)
                    .await
            }
        )?);
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
/// `(id, slug)` of each, in no promised order. Their links to the tags are [`insert_links`]'.
///
/// On PostgreSQL the posts go in one statement of one array per column (`unnest`): its text is
/// the same for any number of posts, so it is prepared once, and the server neither parses nor
/// plans a `VALUES` list of thousands of parameters. SQLite takes multi-row `VALUES`.
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
    with_conn!(
        conn,
        postgres | c | {
            use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamp};
            use kernel::db::Cached;
            let rows: Vec<pg::IdSlug> = Cached(
                diesel::sql_query(pg::INSERT_POSTS)
                    .bind::<Array<Text>, _>(pg::column(new, |p| p.title))
                    .bind::<Array<Text>, _>(pg::column(new, |p| p.slug))
                    .bind::<Array<Nullable<Text>>, _>(pg::column(new, |p| p.excerpt))
                    .bind::<Array<Text>, _>(pg::column(new, |p| p.content))
                    .bind::<Array<Text>, _>(pg::column(new, |p| p.status))
                    .bind::<Array<Nullable<BigInt>>, _>(pg::column(new, |p| p.author_id))
                    .bind::<Array<Nullable<Text>>, _>(pg::column(new, |p| p.author_name))
                    .bind::<Array<Nullable<Text>>, _>(pg::column(new, |p| p.seo_title))
                    .bind::<Array<Nullable<Text>>, _>(pg::column(new, |p| p.seo_description))
                    .bind::<Array<Nullable<Text>>, _>(pg::column(new, |p| p.hero_image_url))
                    .bind::<Array<Timestamp>, _>(pg::column(new, |p| p.created_at))
                    .bind::<Array<Timestamp>, _>(pg::column(new, |p| p.updated_at))
                    .bind::<Array<Nullable<Timestamp>>, _>(pg::column(new, |p| p.published_at))
                    .bind::<Array<Text>, _>(pg::column(new, |p| p.content_html))
                    .bind::<Array<Text>, _>(pg::column(new, |p| p.derived_excerpt))
                    .bind::<Array<Text>, _>(extra.iter().map(|(json, _)| json).collect::<Vec<_>>())
                    .bind::<Array<Text>, _>(extra.iter().map(|(_, tags)| tags).collect::<Vec<_>>()),
            )
            .load(c)
            .await?;
            Ok(rows.into_iter().map(|row| (row.id, row.slug)).collect())
        },
        sqlite | c | {
            use crate::schema::blog_posts;
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
                ids.extend(
                    diesel::insert_into(blog_posts::table)
                        .values(part)
                        .returning((blog_posts::id, blog_posts::slug))
                        .get_results::<(i64, String)>(c)
                        .await?,
                );
            }
            Ok(ids)
        }
    )
}

/// Links posts to tags: on PostgreSQL in one statement of two arrays, as [`insert_posts`].
pub async fn insert_links(conn: &mut DbConn<'_>, links: &[PostTagRow]) -> QueryResult<()> {
    if links.is_empty() {
        return Ok(());
    }
    with_conn!(
        conn,
        postgres | c | {
            use diesel::sql_types::{Array, BigInt};
            use kernel::db::Cached;
            Cached(
                diesel::sql_query(pg::INSERT_LINKS)
                    .bind::<Array<BigInt>, _>(links.iter().map(|l| l.post_id).collect::<Vec<_>>())
                    .bind::<Array<BigInt>, _>(links.iter().map(|l| l.tag_id).collect::<Vec<_>>()),
            )
            .execute(c)
            .await
            .map(drop)
        },
        sqlite | c | {
            for part in links.chunks(ROWS_PER_STATEMENT) {
                diesel::insert_into(crate::schema::blog_post_tags::table)
                    .values(part)
                    .execute(c)
                    .await?;
            }
            Ok(())
        }
    )
}

/// The PostgreSQL side of the import's statements.
// Read only in the PostgreSQL arms, which an SQLite-only kernel leaves out.
#[allow(dead_code)]
mod pg {
    use super::NewPostRow;

    /// The posts of [`super::insert_posts`], one array per column, kept in their order.
    pub(super) const INSERT_POSTS: &str = "INSERT INTO blog_posts (title, slug, excerpt, content, status, \
        author_id, author_name, seo_title, seo_description, hero_image_url, created_at, updated_at, \
        published_at, content_html, derived_excerpt, api_json, tag_ids) \
        SELECT title, slug, excerpt, content, status, author_id, author_name, seo_title, \
        seo_description, hero_image_url, created_at, updated_at, published_at, content_html, \
        derived_excerpt, api_json, tag_ids \
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], \
        $7::text[], $8::text[], $9::text[], $10::text[], $11::timestamp[], $12::timestamp[], \
        $13::timestamp[], $14::text[], $15::text[], $16::text[], $17::text[]) WITH ORDINALITY \
        AS p (title, slug, excerpt, content, status, author_id, author_name, seo_title, \
        seo_description, hero_image_url, created_at, updated_at, published_at, content_html, \
        derived_excerpt, api_json, tag_ids, n) \
        ORDER BY n RETURNING id, slug";

    /// The links of [`super::insert_links`].
    pub(super) const INSERT_LINKS: &str = "INSERT INTO blog_post_tags (post_id, tag_id) \
        SELECT * FROM unnest($1::int8[], $2::int8[])";

    /// The posts of [`super::posts_by_slugs`]; `LIMIT 1` keeps the subquery a lookup per slug.
    pub(super) const POSTS_BY_SLUGS: &str = "SELECT p.id, p.slug FROM unnest($1::text[]) AS s (slug) \
        CROSS JOIN LATERAL (SELECT id, slug FROM blog_posts WHERE blog_posts.slug = s.slug LIMIT 1) AS p";

    /// A post's id and slug, as [`INSERT_POSTS`] and [`POSTS_BY_SLUGS`] return them.
    #[derive(diesel::QueryableByName)]
    pub(super) struct IdSlug {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        pub(super) id: i64,
        #[diesel(sql_type = diesel::sql_types::Text)]
        pub(super) slug: String,
    }

    /// One field of every row, for a column's array.
    pub(super) fn column<'a, T>(
        rows: &[NewPostRow<'a>],
        field: impl Fn(&NewPostRow<'a>) -> T,
    ) -> Vec<T> {
        rows.iter().map(field).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kernel::testing::TestDb;

    /// The import's slug lookup, planned once on an empty table as a session plans it, reads
    /// the slug's index: a scan of the table would be planned for the whole session, and the
    /// import into an empty blog would read every post it wrote before for each chunk.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_slug_lookup_uses_the_index_whatever_the_size_when_planned() {
        let Some(db) = TestDb::postgres().await else {
            eprintln!("TEST_DATABASE_URL is not set: PostgreSQL run skipped");
            return;
        };
        #[derive(diesel::QueryableByName)]
        struct Line {
            #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
            text: String,
        }
        let pool = db.migrated_pool(&[crate::MIGRATIONS]).await;
        let mut pooled = pool.get().await.unwrap();
        let plan: Vec<Line> = kernel::with_conn!(&mut pooled.conn(), |c| {
            use diesel_async::SimpleAsyncConnection;
            c.batch_execute(&format!(
                "PREPARE lookup (text[]) AS {}",
                super::pg::POSTS_BY_SLUGS
            ))
            .await
            .unwrap();
            diesel::sql_query("EXPLAIN (VERBOSE) EXECUTE lookup ('{a,b}')")
                .load(c)
                .await
                .unwrap()
        });
        let plan: Vec<&str> = plan.iter().map(|line| line.text.as_str()).collect();
        let plan = plan.join("\n");
        assert!(
            plan.contains("Index Scan using blog_posts_slug_key"),
            "{plan}"
        );
        assert!(!plan.contains("Seq Scan on blog_posts"), "{plan}");
        // The statement of one array per slug list: the plan above is generic, as the
        // session's (`plan_cache_mode`).
        assert!(plan.contains("unnest($1)"), "{plan}");
    }
}
