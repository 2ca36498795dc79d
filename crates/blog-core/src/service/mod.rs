//! The blog service: the rules of posts, tags, lists, export and import, over the store.
//! Transactions live here. The trait and the shared types are here; the work is split by
//! resource: [`posts`], [`tags`], and [`transfer`] (export and import).

mod detached;
mod posts;
pub(crate) mod schedule;
mod tags;
mod transfer;

pub use schedule::{PUBLISH_TASK, Scheduled};

pub use transfer::{
    ExportFile, ExportOptions, ImportErrorItem, ImportOptions, ImportProgress, ImportResult,
    OnConflict, ProgressFn,
};

use std::collections::HashMap;
use std::io::{BufWriter, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use actix_web::web::Bytes;
use async_trait::async_trait;
use chrono::NaiveDateTime;
use kernel::json::is_spliceable;
use kernel::pagination::Page;
use kernel::{DbConn, DbPool, Principal, write_tx};
use serde::{Deserialize, Serialize};

use crate::domain::export::{
    ExportFormat, ExportWriteError, ExportedPost, ExportedTag, write_json, write_zip,
};
use crate::domain::feed::SitemapEntry;
use crate::domain::frontmatter::IncomingPost;
use crate::domain::markdown::{self, Rendered};
use crate::domain::post::{self, Checker, PostStatus, tag_name_key};
use crate::domain::slug::{POST_SLUG_MAX, TAG_SLUG_MAX, slugify};
use crate::domain::upload::{ParsedItem, UploadError, ZipLimits, parse_upload};
use crate::domain::view;
use crate::error::BlogError;
use crate::store::{
    self, NewPostRow, NewTagRow, PostChanges, PostFilter, PostJsonRow, PostOrder, PostRow,
    TagChanges, TagRow,
};

/// Who writes: the caller when auth is mounted, else nobody in particular.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Author {
    pub id: Option<i64>,
    /// The full name, else the e-mail address.
    pub name: Option<String>,
}

impl Author {
    pub fn anonymous() -> Self {
        Self::default()
    }
}

impl From<&Principal> for Author {
    fn from(p: &Principal) -> Self {
        Author {
            id: Some(p.user_id),
            name: Some(p.display_name().to_owned()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub id: i64,
    pub name: String,
    pub slug: String,
    pub created_at: NaiveDateTime,
}

impl From<TagRow> for Tag {
    fn from(row: TagRow) -> Self {
        Tag {
            id: row.id,
            name: row.name,
            slug: row.slug,
            created_at: row.created_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub id: i64,
    pub title: String,
    pub slug: String,
    pub excerpt: Option<String>,
    pub content: String,
    pub status: PostStatus,
    pub author_id: Option<i64>,
    pub author_name: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub published_at: Option<NaiveDateTime>,
    pub seo_title: Option<String>,
    pub seo_description: Option<String>,
    pub hero_image_url: Option<String>,
    /// When a draft is to be published by itself.
    pub scheduled_at: Option<NaiveDateTime>,
    /// The content rendered to HTML (raw HTML escaped).
    pub content_html: String,
    /// Plain text from the start of the content, for posts without an excerpt.
    pub derived_excerpt: String,
    /// Ordered by name.
    pub tags: Vec<Tag>,
}

impl From<Post> for ExportedPost {
    fn from(p: Post) -> Self {
        ExportedPost {
            title: p.title,
            slug: p.slug,
            excerpt: p.excerpt,
            content: p.content,
            status: p.status,
            author_name: p.author_name,
            created_at: p.created_at,
            updated_at: p.updated_at,
            published_at: p.published_at,
            seo_title: p.seo_title,
            seo_description: p.seo_description,
            hero_image_url: p.hero_image_url,
            tags: p
                .tags
                .into_iter()
                .map(|t| ExportedTag {
                    name: t.name,
                    slug: t.slug,
                })
                .collect(),
        }
    }
}

/// One page of a list and the number of posts that match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostPage {
    pub posts: Vec<Post>,
    pub total: i64,
}

/// A new post, as sent.
#[derive(Debug, Clone, Default)]
pub struct NewPost {
    pub title: Option<String>,
    pub slug: Option<String>,
    pub content: Option<String>,
    pub excerpt: Option<String>,
    pub tag_slugs: Option<Vec<String>>,
    pub seo_title: Option<String>,
    pub seo_description: Option<String>,
    pub hero_image_url: Option<String>,
}

/// A change to a post. `title`, `slug`, `content`: `None` keeps the value. The nullable fields:
/// `None` keeps, `Some(None)` clears, `Some(Some(v))` sets. `tag_slugs`: `None` keeps the tags,
/// a list replaces them (`[]` removes them all).
#[derive(Debug, Clone, Default)]
pub struct PostPatch {
    pub title: Option<String>,
    pub slug: Option<String>,
    pub content: Option<String>,
    pub excerpt: Option<Option<String>>,
    pub seo_title: Option<Option<String>>,
    pub seo_description: Option<Option<String>>,
    pub hero_image_url: Option<Option<String>>,
    pub tag_slugs: Option<Vec<String>>,
    /// Cancels a scheduled publication.
    pub unschedule: bool,
}

#[derive(Debug, Clone, Default)]
pub struct NewTag {
    pub name: Option<String>,
    pub slug: Option<String>,
}

/// A change to a tag; `None` keeps the value.
#[derive(Debug, Clone, Default)]
pub struct TagPatch {
    pub name: Option<String>,
    pub slug: Option<String>,
}

#[async_trait]
pub trait BlogService: Send + Sync {
    /// Published posts, newest publication first; `tag` is a tag slug.
    async fn list_published(&self, page: Page, tag: Option<&str>) -> Result<PostPage, BlogError>;
    /// Posts of every status (or of `status`), newest first.
    async fn list_all(
        &self,
        page: Page,
        status: Option<PostStatus>,
        tag: Option<&str>,
    ) -> Result<PostPage, BlogError>;
    /// A published post by slug; `PostNotFound` for other statuses.
    async fn get_published(&self, slug: &str) -> Result<Post, BlogError>;
    /// [`list_published`](BlogService::list_published) as the HTTP answer's body
    /// (`BlogPostListResponse` as JSON), written from each post's JSON stored with it.
    async fn list_published_json(&self, page: Page, tag: Option<&str>) -> Result<Bytes, BlogError>;
    /// [`get_published`](BlogService::get_published) as the HTTP answer's body
    /// (`BlogPostResponse` as JSON), written from the JSON stored with the post, and the post's
    /// `updated_at`.
    async fn get_published_json(&self, slug: &str) -> Result<(Bytes, NaiveDateTime), BlogError>;
    /// The published posts for the sitemap (slug and `updated_at`), newest publication first.
    async fn sitemap_entries(&self, limit: i64) -> Result<Vec<SitemapEntry>, BlogError>;
    async fn get_post(&self, id: i64) -> Result<Post, BlogError>;
    async fn create_post(&self, author: &Author, input: NewPost) -> Result<Post, BlogError>;
    async fn update_post(&self, id: i64, patch: PostPatch) -> Result<Post, BlogError>;
    /// Publishes now (and cancels a scheduled publication).
    async fn publish_post(&self, id: i64) -> Result<Post, BlogError>;
    /// Schedules the draft `id` to be published at `at` (in the future; else publishes now):
    /// `SchedulingUnavailable` without a job queue, `NotSchedulable` for other statuses.
    async fn schedule_post(&self, id: i64, at: NaiveDateTime) -> Result<Post, BlogError>;
    /// The scheduled publication's task: publishes `id` if it is still a draft scheduled for
    /// `at` and `at` has come.
    async fn publish_scheduled(&self, id: i64, at: NaiveDateTime) -> Result<Scheduled, BlogError>;
    /// Publishes every scheduled draft whose time has passed (the sweep); how many.
    async fn publish_overdue(&self) -> Result<usize, BlogError>;
    /// Archives (and cancels a scheduled publication).
    async fn archive_post(&self, id: i64) -> Result<Post, BlogError>;
    async fn delete_post(&self, id: i64) -> Result<(), BlogError>;
    /// Every tag, ordered by name.
    async fn list_tags(&self) -> Result<Vec<Tag>, BlogError>;
    async fn create_tag(&self, input: NewTag) -> Result<Tag, BlogError>;
    async fn update_tag(&self, id: i64, patch: TagPatch) -> Result<Tag, BlogError>;
    async fn delete_tag(&self, id: i64) -> Result<(), BlogError>;
    /// Builds an export in a temporary file (bounded memory, written off the async executor).
    async fn export(&self, options: ExportOptions) -> Result<ExportFile, BlogError>;
    /// Writes an export to `path`; returns the number of posts.
    async fn export_to_path(&self, options: ExportOptions, path: &Path)
    -> Result<usize, BlogError>;
    /// An export in memory (for small blogs and tests).
    async fn export_bytes(&self, options: ExportOptions) -> Result<Vec<u8>, BlogError>;
    /// Imports an uploaded file; its name's extension says what it is (`.md`, `.markdown`,
    /// `.zip`, `.json`).
    async fn import_bytes(
        &self,
        file_name: &str,
        bytes: Vec<u8>,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError>;
    /// Imports a file from disk (the CLI).
    async fn import_path(
        &self,
        path: &Path,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError>;
}

pub struct BlogServiceImpl {
    pool: DbPool,
    limits: ZipLimits,
    /// The public answers cached by the HTTP layer; cleared after every write.
    public: Arc<PublicCache>,
    /// The job queue that runs scheduled publications, when the tasks module is mounted.
    jobs: Option<Arc<dyn kernel::jobs::JobQueue>>,
}

/// The public reads' answers (list pages, posts by slug, the tag list, the feeds, the sitemap)
/// with their entity tags, by request.
pub type PublicCache = kernel::cache::ReadCache<String, crate::http::caching::CachedBody>;

impl BlogServiceImpl {
    pub fn new(
        pool: DbPool,
        limits: ZipLimits,
        public: Arc<PublicCache>,
        jobs: Option<Arc<dyn kernel::jobs::JobQueue>>,
    ) -> Self {
        Self {
            pool,
            limits,
            public,
            jobs,
        }
    }

    /// After a write: the next public read goes to the database.
    fn changed<T>(&self, result: Result<T, BlogError>) -> Result<T, BlogError> {
        self.public.invalidate();
        result
    }

    /// The posts of `rows` with their tags (named by each row's `tag_ids`), loaded in one query.
    async fn with_tags(conn: &mut DbConn<'_>, rows: Vec<PostRow>) -> Result<Vec<Post>, BlogError> {
        let lists = tag_id_lists(rows.iter().map(|row| (row.id, row.tag_ids.as_str())))?;
        let tags = PageTags::load(conn, &lists).await?;
        let ranks: Vec<Vec<usize>> = lists.iter().map(|ids| tags.ranks(ids)).collect();
        let tags: Vec<Tag> = tags.in_order.into_iter().map(Tag::from).collect();
        Ok(rows
            .into_iter()
            .zip(ranks)
            .map(|(row, ranks)| {
                let tags = ranks.into_iter().map(|rank| tags[rank].clone()).collect();
                assemble(row, tags)
            })
            .collect())
    }

    /// Writes `rows` (stored JSON, see `domain::view`) as post responses with their tags, each
    /// after the previous one (comma-separated). A row without usable stored JSON is written from
    /// its columns, all such rows read in one query.
    async fn write_posts_json(
        conn: &mut DbConn<'_>,
        mut rows: Vec<PostJsonRow>,
        out: &mut Vec<u8>,
    ) -> Result<(), BlogError> {
        let missing: Vec<i64> = rows
            .iter()
            .filter(|r| !r.api_json.as_deref().is_some_and(is_spliceable))
            .map(|r| r.id)
            .collect();
        if !missing.is_empty() {
            let full = store::posts_by_ids(conn, &missing).await?;
            for row in &mut rows {
                if let Ok(at) = full.binary_search_by_key(&row.id, |f| f.id) {
                    row.api_json = Some(view::PostFields::from(&full[at]).to_json());
                }
            }
        }
        let lists = tag_id_lists(rows.iter().map(|row| (row.id, row.tag_ids.as_str())))?;
        let tags = PageTags::load(conn, &lists).await?;
        let tag_json: Vec<Vec<u8>> = tags
            .in_order
            .iter()
            .map(|t| view::tag_json(t.id, &t.name, &t.slug, t.created_at))
            .collect();
        let mut first = true;
        for (row, ids) in rows.iter().zip(&lists) {
            let Some(fields) = row.api_json.as_deref().filter(|j| is_spliceable(j)) else {
                // Deleted between the two statements (PostgreSQL reads no snapshot).
                continue;
            };
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            let ranks = tags.ranks(ids);
            view::write_post(
                out,
                row.id,
                fields,
                ranks.iter().map(|&rank| tag_json[rank].as_slice()),
            );
        }
        Ok(())
    }

    async fn load_post(conn: &mut DbConn<'_>, row: PostRow) -> Result<Post, BlogError> {
        let mut posts = Self::with_tags(conn, vec![row]).await?;
        posts
            .pop()
            .ok_or_else(|| BlogError::Internal("post vanished".to_owned()))
    }

    /// One page of posts with their tags and the total, read from one snapshot.
    async fn list(&self, page: Page, filter: ListFilter<'_>) -> Result<PostPage, BlogError> {
        kernel::read_snapshot!(&self.pool, BlogError, |conn| {
            let Some(tag_id) = tag_filter(conn, filter.tag).await? else {
                return Ok(PostPage {
                    posts: Vec::new(),
                    total: 0,
                });
            };
            let store_filter = PostFilter {
                status: filter.status.map(PostStatus::as_str),
                tag_id,
                order: filter.order,
            };
            let (rows, total) =
                store::list_posts(conn, store_filter, page.offset(), page.limit()).await?;
            let posts = Self::with_tags(conn, rows).await?;
            Ok(PostPage { posts, total })
        })
    }
}

/// What a list's `tag` (a slug, as sent) asks for: `Some(None)` for no filter, `Some(Some(id))`
/// for a tag, `None` for a tag that does not exist (an empty list).
async fn tag_filter(
    conn: &mut DbConn<'_>,
    tag: Option<&str>,
) -> Result<Option<Option<i64>>, BlogError> {
    match tag {
        None => Ok(Some(None)),
        Some(raw) => Ok(store::find_tag_by_slug(conn, &slugify(raw, TAG_SLUG_MAX))
            .await?
            .map(|tag| Some(tag.id))),
    }
}

/// The tag ids of each row's `tag_ids` (rows given as id and text).
fn tag_id_lists<'a>(
    rows: impl Iterator<Item = (i64, &'a str)>,
) -> Result<Vec<Vec<i64>>, BlogError> {
    rows.map(|(id, text)| {
        store::tag_ids_of(text)
            .ok_or_else(|| BlogError::Internal(format!("post {id} has unreadable tag ids")))
    })
    .collect()
}

/// The tags of a page of posts, each read once (in one query) and put in display order once;
/// a post then picks its tags by rank.
struct PageTags {
    /// Display order: by name, as `tag_order` says.
    in_order: Vec<TagRow>,
    /// (tag id, rank in `in_order`), by id.
    rank_by_id: Vec<(i64, usize)>,
}

impl PageTags {
    /// The tags named by any of `lists`.
    async fn load(conn: &mut DbConn<'_>, lists: &[Vec<i64>]) -> Result<PageTags, BlogError> {
        let mut wanted: Vec<i64> = lists.iter().flatten().copied().collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut in_order = store::tags_by_ids(conn, &wanted).await?;
        in_order.sort_by(tag_order);
        let mut rank_by_id: Vec<(i64, usize)> = in_order
            .iter()
            .enumerate()
            .map(|(rank, tag)| (tag.id, rank))
            .collect();
        rank_by_id.sort_unstable();
        Ok(PageTags {
            in_order,
            rank_by_id,
        })
    }

    /// The ranks of the tags `ids`, in display order. A tag deleted since the row was read
    /// (PostgreSQL reads no snapshot) is left out.
    fn ranks(&self, ids: &[i64]) -> Vec<usize> {
        let mut ranks: Vec<usize> = ids
            .iter()
            .filter_map(|id| self.rank_by_id.binary_search_by_key(id, |&(id, _)| id).ok())
            .map(|at| self.rank_by_id[at].1)
            .collect();
        ranks.sort_unstable();
        ranks
    }
}

struct ListFilter<'a> {
    status: Option<PostStatus>,
    tag: Option<&'a str>,
    order: PostOrder,
}

/// A post of `row` with `tags` (already in display order).
pub(crate) fn assemble(row: PostRow, tags: Vec<Tag>) -> Post {
    Post {
        id: row.id,
        title: row.title,
        slug: row.slug,
        excerpt: row.excerpt,
        content: row.content,
        status: PostStatus::parse(&row.status).unwrap_or(PostStatus::Draft),
        author_id: row.author_id,
        author_name: row.author_name,
        created_at: row.created_at,
        updated_at: row.updated_at,
        published_at: row.published_at,
        seo_title: row.seo_title,
        seo_description: row.seo_description,
        hero_image_url: row.hero_image_url,
        scheduled_at: row.scheduled_at,
        content_html: row.content_html,
        derived_excerpt: row.derived_excerpt,
        tags,
    }
}

/// Content this long or longer is rendered on the blocking pool, not on the executor.
const RENDER_INLINE_MAX: usize = 16 * 1024;

/// Renders a post's content; hands it back with what it rendered to.
async fn render(content: String) -> Result<(String, Rendered), BlogError> {
    if content.len() < RENDER_INLINE_MAX {
        let rendered = markdown::render(&content);
        return Ok((content, rendered));
    }
    tokio::task::spawn_blocking(move || {
        let rendered = markdown::render(&content);
        (content, rendered)
    })
    .await
    .map_err(join_error)
}

/// Tags by name, case-insensitively, the same on both databases (which collate differently).
fn tag_order(a: &TagRow, b: &TagRow) -> std::cmp::Ordering {
    a.name_key
        .cmp(&b.name_key)
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.id.cmp(&b.id))
}

/// The tags named by `tag_slugs`, in the order given without repeats; `UnknownTag` for the
/// first one that does not exist.
async fn resolve_tag_slugs(conn: &mut DbConn<'_>, raw: &[String]) -> Result<Vec<i64>, BlogError> {
    let wanted: Vec<(String, String)> = raw
        .iter()
        .map(|r| (r.trim().to_owned(), slugify(r, TAG_SLUG_MAX)))
        .collect();
    let slugs: Vec<String> = wanted.iter().map(|(_, s)| s.clone()).collect();
    let found: HashMap<String, i64> = store::tags_by_slugs(conn, &slugs)
        .await?
        .into_iter()
        .map(|t| (t.slug, t.id))
        .collect();
    let mut ids = Vec::with_capacity(wanted.len());
    for (given, slug) in &wanted {
        let id = *found
            .get(slug)
            .ok_or_else(|| BlogError::UnknownTag(given.clone()))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The value of a nullable field of a patch, if it sets one.
fn flat(v: &Option<Option<String>>) -> Option<&str> {
    v.as_ref().and_then(|v| v.as_deref())
}

/// A nullable field of a patch as a column change: keep, clear or set.
fn nullable(v: &Option<Option<String>>) -> Option<Option<&str>> {
    v.as_ref().map(|v| v.as_deref())
}

/// A slug given by a client: blank counts as not given.
fn given(slug: &Option<String>) -> Option<&str> {
    slug.as_deref().filter(|s| !s.trim().is_empty())
}

fn done<T>(check: Checker, value: T) -> Result<T, BlogError> {
    if check.is_ok() {
        Ok(value)
    } else {
        Err(BlogError::Invalid(check.errors))
    }
}

fn join_error(e: tokio::task::JoinError) -> BlogError {
    BlogError::Internal(format!("blocking task failed: {e}"))
}

#[async_trait]
impl BlogService for BlogServiceImpl {
    async fn list_published(&self, page: Page, tag: Option<&str>) -> Result<PostPage, BlogError> {
        BlogServiceImpl::list_published(self, page, tag).await
    }

    async fn list_all(
        &self,
        page: Page,
        status: Option<PostStatus>,
        tag: Option<&str>,
    ) -> Result<PostPage, BlogError> {
        BlogServiceImpl::list_all(self, page, status, tag).await
    }

    async fn get_published(&self, slug: &str) -> Result<Post, BlogError> {
        BlogServiceImpl::get_published(self, slug).await
    }

    async fn list_published_json(&self, page: Page, tag: Option<&str>) -> Result<Bytes, BlogError> {
        BlogServiceImpl::list_published_json(self, page, tag).await
    }

    async fn get_published_json(&self, slug: &str) -> Result<(Bytes, NaiveDateTime), BlogError> {
        BlogServiceImpl::get_published_json(self, slug).await
    }

    async fn sitemap_entries(&self, limit: i64) -> Result<Vec<SitemapEntry>, BlogError> {
        BlogServiceImpl::sitemap_entries(self, limit).await
    }

    async fn get_post(&self, id: i64) -> Result<Post, BlogError> {
        BlogServiceImpl::get_post(self, id).await
    }

    async fn create_post(&self, author: &Author, input: NewPost) -> Result<Post, BlogError> {
        let result = BlogServiceImpl::create_post(self, author, input).await;
        self.changed(result)
    }

    async fn update_post(&self, id: i64, patch: PostPatch) -> Result<Post, BlogError> {
        let result = BlogServiceImpl::update_post(self, id, patch).await;
        self.changed(result)
    }

    async fn publish_post(&self, id: i64) -> Result<Post, BlogError> {
        let result = BlogServiceImpl::publish_post(self, id).await;
        self.changed(result)
    }

    async fn schedule_post(&self, id: i64, at: NaiveDateTime) -> Result<Post, BlogError> {
        let result = BlogServiceImpl::schedule_post(self, id, at).await;
        self.changed(result)
    }

    async fn publish_scheduled(&self, id: i64, at: NaiveDateTime) -> Result<Scheduled, BlogError> {
        let result = BlogServiceImpl::publish_scheduled(self, id, at).await;
        self.changed(result)
    }

    async fn publish_overdue(&self) -> Result<usize, BlogError> {
        let result = BlogServiceImpl::publish_overdue(self).await;
        self.changed(result)
    }

    async fn archive_post(&self, id: i64) -> Result<Post, BlogError> {
        let result = BlogServiceImpl::archive_post(self, id).await;
        self.changed(result)
    }

    async fn delete_post(&self, id: i64) -> Result<(), BlogError> {
        let result = BlogServiceImpl::delete_post(self, id).await;
        self.changed(result)
    }

    async fn list_tags(&self) -> Result<Vec<Tag>, BlogError> {
        BlogServiceImpl::list_tags(self).await
    }

    async fn create_tag(&self, input: NewTag) -> Result<Tag, BlogError> {
        let result = BlogServiceImpl::create_tag(self, input).await;
        self.changed(result)
    }

    async fn update_tag(&self, id: i64, patch: TagPatch) -> Result<Tag, BlogError> {
        let result = BlogServiceImpl::update_tag(self, id, patch).await;
        self.changed(result)
    }

    async fn delete_tag(&self, id: i64) -> Result<(), BlogError> {
        let result = BlogServiceImpl::delete_tag(self, id).await;
        self.changed(result)
    }

    async fn export(&self, options: ExportOptions) -> Result<ExportFile, BlogError> {
        BlogServiceImpl::export(self, options).await
    }

    async fn export_to_path(
        &self,
        options: ExportOptions,
        path: &Path,
    ) -> Result<usize, BlogError> {
        BlogServiceImpl::export_to_path(self, options, path).await
    }

    async fn export_bytes(&self, options: ExportOptions) -> Result<Vec<u8>, BlogError> {
        BlogServiceImpl::export_bytes(self, options).await
    }

    async fn import_bytes(
        &self,
        file_name: &str,
        bytes: Vec<u8>,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let result = BlogServiceImpl::import_bytes(self, file_name, bytes, options).await;
        self.changed(result)
    }

    async fn import_path(
        &self,
        path: &Path,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let result = BlogServiceImpl::import_path(self, path, options).await;
        self.changed(result)
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    use super::*;
    use crate::http::dto::BlogPostResponse;

    fn time(seconds: i64, micros: u32) -> NaiveDateTime {
        DateTime::from_timestamp(seconds, micros * 1000)
            .map(|t| t.naive_utc())
            .unwrap_or_default()
    }

    prop_compose! {
        fn any_row()(
            id in any::<i64>(),
            texts in proptest::collection::vec(any::<String>(), 5),
            optional in proptest::collection::vec(proptest::option::of(any::<String>()), 5),
            status in proptest::sample::select(vec!["draft", "published", "archived"]),
            author_id in proptest::option::of(any::<i64>()),
            times in proptest::collection::vec((0..4_102_444_800_i64, 0..1_000_000_u32), 3),
            published in any::<bool>(),
            derived_empty in any::<bool>(),
        ) -> PostRow {
            PostRow {
                id,
                title: texts[0].clone(),
                slug: texts[1].clone(),
                excerpt: optional[0].clone(),
                content: texts[2].clone(),
                status: status.to_owned(),
                author_id,
                author_name: optional[1].clone(),
                seo_title: optional[2].clone(),
                seo_description: optional[3].clone(),
                hero_image_url: optional[4].clone(),
                created_at: time(times[0].0, times[0].1),
                updated_at: time(times[1].0, times[1].1),
                published_at: published.then(|| time(times[2].0, times[2].1)),
                content_html: texts[3].clone(),
                derived_excerpt: if derived_empty { String::new() } else { texts[4].clone() },
                tag_ids: String::new(),
                scheduled_at: (!published).then(|| time(times[0].0, times[0].1)),
            }
        }
    }

    prop_compose! {
        fn any_tags()(tags in proptest::collection::vec(
            (any::<i64>(), any::<String>(), any::<String>(), 0..4_102_444_800_i64), 0..4,
        )) -> Vec<Tag> {
            tags.into_iter()
                .map(|(id, name, slug, at)| Tag { id, name, slug, created_at: time(at, 0) })
                .collect()
        }
    }

    proptest! {
        #![proptest_config(Config { failure_persistence: None, ..Config::with_cases(256) })]

        /// A post written from its stored JSON is, byte for byte, the post response the typed
        /// path writes, whatever its text holds (escapes, control characters, any Unicode).
        #[test]
        fn stored_json_writes_the_typed_response(row in any_row(), tags in any_tags()) {
            let stored = view::PostFields::from(&row).to_json();
            prop_assert!(is_spliceable(&stored));
            let tag_json: Vec<Vec<u8>> = tags
                .iter()
                .map(|t| view::tag_json(t.id, &t.name, &t.slug, t.created_at))
                .collect();
            let mut spliced = Vec::new();
            view::write_post(&mut spliced, row.id, &stored, tag_json.iter().map(Vec::as_slice));
            let typed = BlogPostResponse::from(assemble(row, tags));
            let by_serde = serde_json::to_vec(&typed).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let by_sonic = kernel::http::to_json_bytes(&typed)
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(String::from_utf8_lossy(&spliced), String::from_utf8_lossy(&by_serde));
            prop_assert_eq!(&spliced[..], &by_sonic[..]);
        }
    }
}
