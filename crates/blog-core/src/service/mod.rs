//! The blog service: the rules of posts, tags, lists, export and import, over the store.
//! Transactions live here. The trait and the shared types are here; the work is split by
//! resource: [`posts`], [`tags`], and [`transfer`] (export and import).

mod posts;
mod tags;
mod transfer;

pub use transfer::{
    ExportFile, ExportOptions, ImportErrorItem, ImportOptions, ImportProgress, ImportResult,
    OnConflict, ProgressFn,
};

use std::collections::HashMap;
use std::io::{BufWriter, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::NaiveDateTime;
use kernel::pagination::Page;
use kernel::{DbConn, DbPool, Principal, write_tx};
use serde::{Deserialize, Serialize};

use crate::domain::export::{
    ExportFormat, ExportWriteError, ExportedPost, ExportedTag, write_json, write_zip,
};
use crate::domain::frontmatter::IncomingPost;
use crate::domain::markdown::{self, Rendered};
use crate::domain::post::{self, Checker, PostStatus, tag_name_key};
use crate::domain::slug::{POST_SLUG_MAX, TAG_SLUG_MAX, slugify};
use crate::domain::upload::{ParsedItem, UploadError, ZipLimits, parse_upload};
use crate::error::BlogError;
use crate::store::{
    self, NewPostRow, NewTagRow, PostChanges, PostFilter, PostOrder, PostRow, TagChanges, TagRow,
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
    async fn get_post(&self, id: i64) -> Result<Post, BlogError>;
    async fn create_post(&self, author: &Author, input: NewPost) -> Result<Post, BlogError>;
    async fn update_post(&self, id: i64, patch: PostPatch) -> Result<Post, BlogError>;
    async fn publish_post(&self, id: i64) -> Result<Post, BlogError>;
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
}

/// Rendered JSON of the public reads (list pages, posts by slug, the tag list), by request.
pub type PublicCache = kernel::cache::ReadCache<String, actix_web::web::Bytes>;

impl BlogServiceImpl {
    pub fn new(pool: DbPool, limits: ZipLimits, public: Arc<PublicCache>) -> Self {
        Self {
            pool,
            limits,
            public,
        }
    }

    /// After a write: the next public read goes to the database.
    fn changed<T>(&self, result: Result<T, BlogError>) -> Result<T, BlogError> {
        self.public.invalidate();
        result
    }

    /// The posts of `rows` with their tags (named by each row's `tag_ids`), loaded in one query.
    async fn with_tags(conn: &mut DbConn<'_>, rows: Vec<PostRow>) -> Result<Vec<Post>, BlogError> {
        let lists = rows
            .iter()
            .map(|row| {
                store::tag_ids_of(&row.tag_ids).ok_or_else(|| {
                    BlogError::Internal(format!("post {} has unreadable tag ids", row.id))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut wanted: Vec<i64> = lists.iter().flatten().copied().collect();
        wanted.sort_unstable();
        wanted.dedup();
        // Each tag read and put in display order once; a post's tags are then picked by rank.
        let mut read = store::tags_by_ids(conn, &wanted).await?;
        read.sort_by(tag_order);
        let mut rank_by_id: Vec<(i64, usize)> = read
            .iter()
            .enumerate()
            .map(|(rank, tag)| (tag.id, rank))
            .collect();
        rank_by_id.sort_unstable();
        let tags: Vec<Tag> = read.into_iter().map(Tag::from).collect();
        Ok(rows
            .into_iter()
            .zip(lists)
            .map(|(row, ids)| {
                // A tag deleted since the row was read (PostgreSQL reads no snapshot) is left out.
                let mut ranks: Vec<usize> = ids
                    .iter()
                    .filter_map(|id| rank_by_id.binary_search_by_key(id, |&(id, _)| id).ok())
                    .map(|at| rank_by_id[at].1)
                    .collect();
                ranks.sort_unstable();
                let tags = ranks.into_iter().map(|rank| tags[rank].clone()).collect();
                assemble(row, tags)
            })
            .collect())
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
            let tag_id = match filter.tag {
                Some(raw) => {
                    match store::find_tag_by_slug(conn, &slugify(raw, TAG_SLUG_MAX)).await? {
                        Some(tag) => Some(tag.id),
                        None => {
                            return Ok(PostPage {
                                posts: Vec::new(),
                                total: 0,
                            });
                        }
                    }
                }
                None => None,
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

struct ListFilter<'a> {
    status: Option<PostStatus>,
    tag: Option<&'a str>,
    order: PostOrder,
}

/// A post of `row` with `tags` (already in display order).
fn assemble(row: PostRow, tags: Vec<Tag>) -> Post {
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
