//! The blog service: the rules of posts, tags, lists, export and import, over the store.
//! Transactions live here.

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
use crate::domain::post::{self, Checker, PostStatus, tag_name_key};
use crate::domain::slug::{POST_SLUG_MAX, TAG_SLUG_MAX, slugify};
use crate::domain::upload::{ParsedItem, UploadError, ZipLimits, parse_upload};
use crate::error::BlogError;
use crate::store::{
    self, NewPostRow, NewTagRow, PostChanges, PostFilter, PostOrder, PostRow, TagChanges, TagRow,
};

/// Posts read from the database per round trip while exporting.
const EXPORT_BATCH: i64 = 200;
/// Imported posts written per transaction (except under `on_conflict=fail`, where the whole
/// batch is one transaction).
const IMPORT_CHUNK: usize = 100;

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

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = blog::ImportResult)]
pub struct ImportResult {
    pub created: u64,
    pub updated: u64,
    pub skipped: u64,
    pub failed: u64,
    pub errors: Vec<ImportErrorItem>,
}

/// Why one post of an import did not land.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = blog::ImportErrorItem)]
pub struct ImportErrorItem {
    /// The file (or zip entry, or `file.json[index]`) the post came from.
    pub file: String,
    /// The post's slug, or empty when it could not be worked out.
    pub slug: String,
    pub message: String,
}

/// What an import does with a post whose slug exists (matched against posts of any status).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnConflict {
    /// Leave the stored post alone (counted in `skipped`).
    #[default]
    Skip,
    /// Replace every field of the stored post (author and created_at only when given).
    Overwrite,
    /// Stop: nothing of the batch is kept.
    Fail,
}

impl OnConflict {
    pub fn parse(raw: &str) -> Option<OnConflict> {
        match raw {
            "skip" => Some(OnConflict::Skip),
            "overwrite" => Some(OnConflict::Overwrite),
            "fail" => Some(OnConflict::Fail),
            _ => None,
        }
    }
}

/// How far an import is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportProgress {
    /// Posts handled so far (created, updated, skipped or failed).
    pub processed: usize,
    /// Posts in the upload.
    pub total: usize,
}

/// Called after each post of an import (e.g. to draw a progress bar).
pub type ProgressFn = Arc<dyn Fn(ImportProgress) + Send + Sync>;

#[derive(Clone, Default)]
pub struct ImportOptions {
    pub on_conflict: OnConflict,
    /// The importing user: `author_id` of new posts, and their `author_name` when the file names
    /// no author.
    pub author: Author,
    pub progress: Option<ProgressFn>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// Only posts of this status; every post when `None`.
    pub status: Option<PostStatus>,
}

/// A finished export in an anonymous temporary file (removed when dropped), positioned at its
/// start.
#[derive(Debug)]
pub struct ExportFile {
    pub file: std::fs::File,
    pub len: u64,
    pub posts: usize,
    pub format: ExportFormat,
}

impl ExportFile {
    /// `blog-export.json` or `blog-export.zip`.
    pub fn file_name(&self) -> &'static str {
        self.format.file_name()
    }

    pub fn content_type(&self) -> &'static str {
        self.format.content_type()
    }
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
}

impl BlogServiceImpl {
    pub fn new(pool: DbPool, limits: ZipLimits) -> Self {
        Self { pool, limits }
    }

    /// The posts of `rows` with their tags, loaded in one query.
    async fn with_tags(conn: &mut DbConn<'_>, rows: Vec<PostRow>) -> Result<Vec<Post>, BlogError> {
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let mut tags: HashMap<i64, Vec<TagRow>> = HashMap::new();
        for (post_id, tag) in store::tags_of_posts(conn, &ids).await? {
            tags.entry(post_id).or_default().push(tag);
        }
        Ok(rows
            .into_iter()
            .map(|row| {
                let tags = tags.remove(&row.id).unwrap_or_default();
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

    async fn list(&self, page: Page, filter: ListFilter<'_>) -> Result<PostPage, BlogError> {
        let mut pooled = self.pool.get().await?;
        let mut conn = pooled.conn();
        let tag_id = match filter.tag {
            Some(raw) => {
                match store::find_tag_by_slug(&mut conn, &slugify(raw, TAG_SLUG_MAX)).await? {
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
            store::list_posts(&mut conn, store_filter, page.offset(), page.limit()).await?;
        let posts = Self::with_tags(&mut conn, rows).await?;
        Ok(PostPage { posts, total })
    }

    /// Writes an export through a blocking writer fed with batches from the database, so that
    /// only a couple of batches are in memory at once.
    async fn export_into<F>(
        &self,
        options: ExportOptions,
        open: F,
    ) -> Result<(std::fs::File, usize), BlogError>
    where
        F: FnOnce() -> std::io::Result<std::fs::File> + Send + 'static,
    {
        let (sender, mut receiver) = tokio::sync::mpsc::channel::<Vec<ExportedPost>>(2);
        let format = options.format;
        let writer = tokio::task::spawn_blocking(
            move || -> Result<(std::fs::File, usize), ExportWriteError> {
                let file = open()?;
                let batches = std::iter::from_fn(|| receiver.blocking_recv());
                let buffered = BufWriter::new(file);
                let (buffered, count) = match format {
                    ExportFormat::Json => write_json(buffered, batches)?,
                    ExportFormat::Markdown => write_zip(buffered, batches)?,
                };
                let file = buffered.into_inner().map_err(|e| e.into_error())?;
                Ok((file, count))
            },
        );
        let status = options.status.map(PostStatus::as_str);
        let pool = self.pool.clone();
        let feed = async move {
            let mut cursor = None;
            loop {
                let posts = {
                    let mut pooled = pool.get().await?;
                    let mut conn = pooled.conn();
                    let rows = store::posts_after(&mut conn, status, cursor, EXPORT_BATCH).await?;
                    cursor = rows.last().map(|r| (r.created_at, r.id));
                    Self::with_tags(&mut conn, rows).await?
                };
                let full = posts.len() as i64 == EXPORT_BATCH;
                if !posts.is_empty() {
                    let batch = posts.into_iter().map(ExportedPost::from).collect();
                    if sender.send(batch).await.is_err() {
                        break; // the writer failed; its error is reported below
                    }
                }
                if !full {
                    break;
                }
            }
            Ok::<(), BlogError>(())
        };
        let fed = feed.await;
        let written = writer
            .await
            .map_err(|e| BlogError::Internal(format!("export writer: {e}")))?
            .map_err(|e| BlogError::Internal(format!("export writer: {e}")));
        fed?;
        written
    }

    async fn store_items(
        &self,
        items: Vec<ParsedItem>,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let total = items.len();
        let mut run = ImportRun {
            result: ImportResult::default(),
            tags: HashMap::new(),
            options,
            now: kernel::time::now(),
            processed: 0,
            total,
        };
        if run.options.on_conflict == OnConflict::Fail {
            let run = &mut run;
            write_tx!(&self.pool, BlogError, |tx| {
                for item in &items {
                    run.store(tx, item).await?;
                }
                Ok(())
            })?;
        } else {
            for chunk in items.chunks(IMPORT_CHUNK) {
                let run = &mut run;
                write_tx!(&self.pool, BlogError, |tx| {
                    for item in chunk {
                        run.store(tx, item).await?;
                    }
                    Ok(())
                })?;
            }
        }
        Ok(run.result)
    }
}

struct ListFilter<'a> {
    status: Option<PostStatus>,
    tag: Option<&'a str>,
    order: PostOrder,
}

/// The state of one import while its posts are written.
struct ImportRun {
    result: ImportResult,
    /// Tag slug → tag id, for tags met (or created) so far.
    tags: HashMap<String, i64>,
    options: ImportOptions,
    now: NaiveDateTime,
    processed: usize,
    total: usize,
}

impl ImportRun {
    fn fail(&mut self, file: &str, slug: &str, message: String) {
        self.result.failed += 1;
        self.result.errors.push(ImportErrorItem {
            file: file.to_owned(),
            slug: slug.to_owned(),
            message,
        });
    }

    async fn store(&mut self, tx: &mut DbConn<'_>, item: &ParsedItem) -> Result<(), BlogError> {
        let outcome = match &item.post {
            Err(e) => {
                self.fail(&item.file, &e.slug, e.message.clone());
                Ok(())
            }
            Ok(post) => self.store_post(tx, &item.file, post).await,
        };
        self.processed += 1;
        if let Some(progress) = &self.options.progress {
            progress(ImportProgress {
                processed: self.processed,
                total: self.total,
            });
        }
        outcome
    }

    async fn store_post(
        &mut self,
        tx: &mut DbConn<'_>,
        file: &str,
        post: &IncomingPost,
    ) -> Result<(), BlogError> {
        let existing = store::find_post_by_slug(tx, &post.slug).await?;
        let post_id = match (existing, self.options.on_conflict) {
            (Some(_), OnConflict::Skip) => {
                self.result.skipped += 1;
                return Ok(());
            }
            (Some(_), OnConflict::Fail) => {
                let message = format!("Post slug already exists: {}", post.slug);
                self.fail(file, &post.slug, message);
                return Err(BlogError::ImportConflict {
                    slug: post.slug.clone(),
                    result: Box::new(self.result.clone()),
                });
            }
            (Some(row), OnConflict::Overwrite) => {
                let changes = PostChanges {
                    title: Some(&post.title),
                    slug: Some(&post.slug),
                    excerpt: Some(post.excerpt.as_deref()),
                    content: Some(&post.content),
                    status: Some(post.status.as_str()),
                    author_name: post.author_name.as_deref().map(Some),
                    seo_title: Some(post.seo_title.as_deref()),
                    seo_description: Some(post.seo_description.as_deref()),
                    hero_image_url: Some(post.hero_image_url.as_deref()),
                    created_at: post.created_at,
                    updated_at: Some(post.updated_at.unwrap_or(self.now)),
                    published_at: Some(post.published_at),
                };
                store::update_post(tx, row.id, &changes).await?;
                self.result.updated += 1;
                row.id
            }
            (None, _) => {
                let author_name =
                    post.author_name
                        .as_deref()
                        .or(self.options.author.name.as_deref());
                let new = NewPostRow {
                    title: &post.title,
                    slug: &post.slug,
                    excerpt: post.excerpt.as_deref(),
                    content: &post.content,
                    status: post.status.as_str(),
                    author_id: self.options.author.id,
                    author_name,
                    seo_title: post.seo_title.as_deref(),
                    seo_description: post.seo_description.as_deref(),
                    hero_image_url: post.hero_image_url.as_deref(),
                    created_at: post.created_at.unwrap_or(self.now),
                    updated_at: post.updated_at.unwrap_or(self.now),
                    published_at: post.published_at,
                };
                let row = store::insert_post(tx, &new).await?;
                self.result.created += 1;
                row.id
            }
        };
        let mut tag_ids = Vec::with_capacity(post.tags.len());
        for tag in &post.tags {
            let id = match self.tags.get(&tag.slug) {
                Some(id) => *id,
                None => {
                    let key = tag_name_key(&tag.name);
                    let found = match store::find_tag_by_slug(tx, &tag.slug).await? {
                        Some(t) => Some(t),
                        None => store::find_tag_by_name_key(tx, &key).await?,
                    };
                    let id = match found {
                        Some(t) => t.id,
                        None => {
                            let new = NewTagRow {
                                name: &tag.name,
                                name_key: &key,
                                slug: &tag.slug,
                                created_at: self.now,
                            };
                            store::insert_tag(tx, &new).await?.id
                        }
                    };
                    self.tags.insert(tag.slug.clone(), id);
                    id
                }
            };
            if !tag_ids.contains(&id) {
                tag_ids.push(id);
            }
        }
        store::set_post_tags(tx, post_id, &tag_ids).await?;
        Ok(())
    }
}

fn assemble(row: PostRow, mut tags: Vec<TagRow>) -> Post {
    tags.sort_by(tag_order);
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
        tags: tags.into_iter().map(Tag::from).collect(),
    }
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
        let filter = ListFilter {
            status: Some(PostStatus::Published),
            tag,
            order: PostOrder::NewestPublished,
        };
        self.list(page, filter).await
    }

    async fn list_all(
        &self,
        page: Page,
        status: Option<PostStatus>,
        tag: Option<&str>,
    ) -> Result<PostPage, BlogError> {
        let filter = ListFilter {
            status,
            tag,
            order: PostOrder::NewestCreated,
        };
        self.list(page, filter).await
    }

    async fn get_published(&self, slug: &str) -> Result<Post, BlogError> {
        let mut pooled = self.pool.get().await?;
        let mut conn = pooled.conn();
        let row = store::find_post_by_slug(&mut conn, &slugify(slug, POST_SLUG_MAX))
            .await?
            .filter(|r| r.status == PostStatus::Published.as_str())
            .ok_or(BlogError::PostNotFound)?;
        Self::load_post(&mut conn, row).await
    }

    async fn get_post(&self, id: i64) -> Result<Post, BlogError> {
        let mut pooled = self.pool.get().await?;
        let mut conn = pooled.conn();
        let row = store::find_post(&mut conn, id)
            .await?
            .ok_or(BlogError::PostNotFound)?;
        Self::load_post(&mut conn, row).await
    }

    async fn create_post(&self, author: &Author, input: NewPost) -> Result<Post, BlogError> {
        let mut check = Checker::default();
        let title = match &input.title {
            Some(t) => check.title(t),
            None => {
                check.fail("title", "title is required");
                String::new()
            }
        };
        let slug = match given(&input.slug) {
            Some(s) => check.post_slug(s),
            None => slugify(&title, POST_SLUG_MAX),
        };
        let content = input.content.unwrap_or_default();
        check.content(&content);
        check.post_extras(
            input.excerpt.as_deref(),
            input.seo_title.as_deref(),
            input.seo_description.as_deref(),
            input.hero_image_url.as_deref(),
        );
        done(check, ())?;
        let now = kernel::time::now();
        let tag_slugs = input.tag_slugs.unwrap_or_default();
        let result = write_tx!(&self.pool, BlogError, |tx| {
            let tag_ids = resolve_tag_slugs(tx, &tag_slugs).await?;
            if store::find_post_by_slug(tx, &slug).await?.is_some() {
                return Err(BlogError::PostSlugTaken(slug.clone()));
            }
            let new = NewPostRow {
                title: &title,
                slug: &slug,
                excerpt: input.excerpt.as_deref(),
                content: &content,
                status: PostStatus::Draft.as_str(),
                author_id: author.id,
                author_name: author.name.as_deref(),
                seo_title: input.seo_title.as_deref(),
                seo_description: input.seo_description.as_deref(),
                hero_image_url: input.hero_image_url.as_deref(),
                created_at: now,
                updated_at: now,
                published_at: None,
            };
            let row = store::insert_post(tx, &new).await?;
            store::set_post_tags(tx, row.id, &tag_ids).await?;
            Self::load_post(tx, row).await
        });
        match result {
            Err(BlogError::Db(kernel::DbError::Query(e)))
                if kernel::db::is_unique_violation(&e) =>
            {
                Err(BlogError::PostSlugTaken(slug))
            }
            other => other,
        }
    }

    async fn update_post(&self, id: i64, patch: PostPatch) -> Result<Post, BlogError> {
        let mut check = Checker::default();
        let title = patch.title.as_deref().map(|t| check.title(t));
        let slug = given(&patch.slug).map(|s| check.post_slug(s));
        if let Some(content) = &patch.content {
            check.content(content);
        }
        check.post_extras(
            flat(&patch.excerpt),
            flat(&patch.seo_title),
            flat(&patch.seo_description),
            flat(&patch.hero_image_url),
        );
        done(check, ())?;
        let now = kernel::time::now();
        let result = write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_post(tx, id)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            let tag_ids = match &patch.tag_slugs {
                Some(slugs) => Some(resolve_tag_slugs(tx, slugs).await?),
                None => None,
            };
            if let Some(slug) = &slug
                && *slug != current.slug
                && store::find_post_by_slug(tx, slug).await?.is_some()
            {
                return Err(BlogError::PostSlugTaken(slug.clone()));
            }
            let changes = PostChanges {
                title: title.as_deref(),
                slug: slug.as_deref(),
                excerpt: nullable(&patch.excerpt),
                content: patch.content.as_deref(),
                seo_title: nullable(&patch.seo_title),
                seo_description: nullable(&patch.seo_description),
                hero_image_url: nullable(&patch.hero_image_url),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            if let Some(tag_ids) = &tag_ids {
                store::set_post_tags(tx, id, tag_ids).await?;
            }
            Self::load_post(tx, row).await
        });
        match result {
            Err(BlogError::Db(kernel::DbError::Query(e)))
                if kernel::db::is_unique_violation(&e) =>
            {
                Err(BlogError::PostSlugTaken(slug.unwrap_or_default()))
            }
            other => other,
        }
    }

    async fn publish_post(&self, id: i64) -> Result<Post, BlogError> {
        let now = kernel::time::now();
        write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_post(tx, id)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            let (status, published_at) = post::publish(current.published_at, now);
            let changes = PostChanges {
                status: Some(status.as_str()),
                published_at: Some(published_at),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            Self::load_post(tx, row).await
        })
    }

    async fn archive_post(&self, id: i64) -> Result<Post, BlogError> {
        let now = kernel::time::now();
        write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_post(tx, id)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            let (status, published_at) = post::archive(current.published_at);
            let changes = PostChanges {
                status: Some(status.as_str()),
                published_at: Some(published_at),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            Self::load_post(tx, row).await
        })
    }

    async fn delete_post(&self, id: i64) -> Result<(), BlogError> {
        let deleted = write_tx!(&self.pool, BlogError, |tx| Ok(
            store::delete_post(tx, id).await?
        ))?;
        if deleted == 0 {
            Err(BlogError::PostNotFound)
        } else {
            Ok(())
        }
    }

    async fn list_tags(&self) -> Result<Vec<Tag>, BlogError> {
        let mut pooled = self.pool.get().await?;
        let mut rows = store::list_tags(&mut pooled.conn()).await?;
        rows.sort_by(tag_order);
        Ok(rows.into_iter().map(Tag::from).collect())
    }

    async fn create_tag(&self, input: NewTag) -> Result<Tag, BlogError> {
        let mut check = Checker::default();
        let name = match &input.name {
            Some(n) => check.tag_name("name", n),
            None => {
                check.fail("name", "name is required");
                String::new()
            }
        };
        let slug = match given(&input.slug) {
            Some(s) => check.tag_slug("slug", s),
            None => slugify(&name, TAG_SLUG_MAX),
        };
        done(check, ())?;
        let key = tag_name_key(&name);
        let now = kernel::time::now();
        let result = write_tx!(&self.pool, BlogError, |tx| {
            if store::find_tag_clash(tx, &key, &slug, None)
                .await?
                .is_some()
            {
                return Err(BlogError::TagTaken(slug.clone()));
            }
            let new = NewTagRow {
                name: &name,
                name_key: &key,
                slug: &slug,
                created_at: now,
            };
            Ok(Tag::from(store::insert_tag(tx, &new).await?))
        });
        match result {
            Err(BlogError::Db(kernel::DbError::Query(e)))
                if kernel::db::is_unique_violation(&e) =>
            {
                Err(BlogError::TagTaken(slug))
            }
            other => other,
        }
    }

    async fn update_tag(&self, id: i64, patch: TagPatch) -> Result<Tag, BlogError> {
        let mut check = Checker::default();
        let name = patch.name.as_deref().map(|n| check.tag_name("name", n));
        let slug = given(&patch.slug).map(|s| check.tag_slug("slug", s));
        done(check, ())?;
        let key = name.as_deref().map(tag_name_key);
        let result = write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_tag(tx, id)
                .await?
                .ok_or(BlogError::TagNotFound)?;
            if name.is_none() && slug.is_none() {
                return Ok(Tag::from(current));
            }
            let new_key = key.clone().unwrap_or_else(|| current.name_key.clone());
            let new_slug = slug.clone().unwrap_or_else(|| current.slug.clone());
            if store::find_tag_clash(tx, &new_key, &new_slug, Some(id))
                .await?
                .is_some()
            {
                return Err(BlogError::TagTaken(new_slug));
            }
            let changes = TagChanges {
                name: name.as_deref(),
                name_key: key.as_deref(),
                slug: slug.as_deref(),
            };
            let row = store::update_tag(tx, id, &changes)
                .await?
                .ok_or(BlogError::TagNotFound)?;
            Ok(Tag::from(row))
        });
        match result {
            Err(BlogError::Db(kernel::DbError::Query(e)))
                if kernel::db::is_unique_violation(&e) =>
            {
                Err(BlogError::TagTaken(slug.unwrap_or_default()))
            }
            other => other,
        }
    }

    async fn delete_tag(&self, id: i64) -> Result<(), BlogError> {
        let deleted = write_tx!(&self.pool, BlogError, |tx| Ok(
            store::delete_tag(tx, id).await?
        ))?;
        if deleted == 0 {
            Err(BlogError::TagNotFound)
        } else {
            Ok(())
        }
    }

    async fn export(&self, options: ExportOptions) -> Result<ExportFile, BlogError> {
        let (file, posts) = self.export_into(options, tempfile::tempfile).await?;
        let (file, len) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
            let mut file = file;
            let len = file.seek(SeekFrom::End(0))?;
            file.seek(SeekFrom::Start(0))?;
            Ok((file, len))
        })
        .await
        .map_err(join_error)??;
        Ok(ExportFile {
            file,
            len,
            posts,
            format: options.format,
        })
    }

    async fn export_to_path(
        &self,
        options: ExportOptions,
        path: &Path,
    ) -> Result<usize, BlogError> {
        let path = path.to_owned();
        let (file, posts) = self
            .export_into(options, move || std::fs::File::create(path))
            .await?;
        tokio::task::spawn_blocking(move || file.sync_all())
            .await
            .map_err(join_error)??;
        Ok(posts)
    }

    async fn export_bytes(&self, options: ExportOptions) -> Result<Vec<u8>, BlogError> {
        let export = self.export(options).await?;
        tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
            let mut bytes = Vec::with_capacity(usize::try_from(export.len).unwrap_or(0));
            let mut file = export.file;
            file.read_to_end(&mut bytes)?;
            Ok(bytes)
        })
        .await
        .map_err(join_error)?
        .map_err(BlogError::from)
    }

    async fn import_bytes(
        &self,
        file_name: &str,
        bytes: Vec<u8>,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let limits = self.limits;
        let name = file_name.to_owned();
        let now = kernel::time::now();
        let items = tokio::task::spawn_blocking(move || parse_upload(&name, &bytes, limits, now))
            .await
            .map_err(join_error)??;
        self.store_items(items, options).await
    }

    async fn import_path(
        &self,
        path: &Path,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| UploadError::Unreadable(format!("{}: {e}", path.display())))?;
        self.import_bytes(&file_name, bytes, options).await
    }
}
