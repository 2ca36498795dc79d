//! Export (zip of Markdown files or a JSON array, streamed from the database in batches) and
//! import (files parsed off the executor, written in chunks or one all-or-nothing transaction).

use std::collections::HashSet;

use super::*;
use crate::domain::frontmatter::IncomingTag;
use crate::store::{PostTagRow, bulk};

/// Posts read from the database per round trip while exporting.
const EXPORT_BATCH: i64 = 200;
/// Imported posts written per transaction (except under `on_conflict=fail`, where the whole
/// batch is one transaction), each chunk with a few multi-row statements.
const IMPORT_CHUNK: usize = bulk::ROWS_PER_STATEMENT;

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
    /// A slot of a limit on imports at once (the HTTP upload's), held until this import is
    /// done, even when its caller has left: the import still holds its upload in memory.
    pub slot: Option<Arc<tokio::sync::OwnedSemaphorePermit>>,
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

impl BlogServiceImpl {
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
                for chunk in items.chunks(IMPORT_CHUNK) {
                    run.store_chunk(tx, chunk).await?;
                }
                Ok(())
            })?;
        } else {
            for chunk in items.chunks(IMPORT_CHUNK) {
                let run = &mut run;
                write_tx!(&self.pool, BlogError, |tx| run.store_chunk(tx, chunk).await)?;
            }
        }
        Ok(run.result)
    }

    pub(super) async fn export(&self, options: ExportOptions) -> Result<ExportFile, BlogError> {
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

    pub(super) async fn export_to_path(
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

    pub(super) async fn export_bytes(&self, options: ExportOptions) -> Result<Vec<u8>, BlogError> {
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

    pub(super) async fn import_bytes(
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

    pub(super) async fn import_path(
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

    /// Counts one item handled and reports the progress.
    fn handled(&mut self) {
        self.processed += 1;
        if let Some(progress) = &self.options.progress {
            progress(ImportProgress {
                processed: self.processed,
                total: self.total,
            });
        }
    }

    /// Stores one chunk of items, in order, inside the caller's transaction, with a few
    /// statements for the whole chunk: the stored posts of its slugs are read at once, its tags
    /// resolved (and the missing ones created) at once, and its new posts and their links
    /// inserted at once. What it does is what storing the items one by one would do: a slug met
    /// twice is judged against the post its first item made.
    async fn store_chunk(
        &mut self,
        tx: &mut DbConn<'_>,
        items: &[ParsedItem],
    ) -> Result<(), BlogError> {
        let slugs: Vec<&str> = items
            .iter()
            .filter_map(|i| i.post.as_ref().ok())
            .map(|p| p.slug.as_str())
            .collect();
        let mut stored: HashMap<String, i64> = bulk::posts_by_slugs(tx, &slugs)
            .await?
            .into_iter()
            .map(|(id, slug)| (slug, id))
            .collect();
        self.resolve_tags(tx, items).await?;
        let mut pending: Vec<&IncomingPost> = Vec::new();
        let mut pending_slugs: HashSet<&str> = HashSet::new();
        for item in items {
            let post = match &item.post {
                Err(e) => {
                    self.fail(&item.file, &e.slug, e.message.clone());
                    self.handled();
                    continue;
                }
                Ok(post) => post,
            };
            if pending_slugs.contains(post.slug.as_str()) {
                self.insert_pending(tx, &mut pending, &mut stored).await?;
                pending_slugs.clear();
            }
            match (stored.get(&post.slug), self.options.on_conflict) {
                (Some(_), OnConflict::Skip) => self.result.skipped += 1,
                (Some(_), OnConflict::Fail) => {
                    let message = format!("Post slug already exists: {}", post.slug);
                    self.fail(&item.file, &post.slug, message);
                    return Err(BlogError::ImportConflict {
                        slug: post.slug.clone(),
                        result: Box::new(self.result.clone()),
                    });
                }
                (Some(&id), OnConflict::Overwrite) => {
                    self.overwrite(tx, id, post).await?;
                    self.result.updated += 1;
                }
                (None, _) => {
                    // Counted now (inserted with the chunk's others), as the result so far of
                    // a batch that a later conflict stops shows it.
                    pending.push(post);
                    pending_slugs.insert(&post.slug);
                    self.result.created += 1;
                }
            }
            self.handled();
        }
        self.insert_pending(tx, &mut pending, &mut stored).await
    }

    /// The ids of `post`'s tags, in its order, once each (resolved by [`Self::resolve_tags`]).
    fn tag_ids(&self, post: &IncomingPost) -> Vec<i64> {
        let mut ids = Vec::with_capacity(post.tags.len());
        for id in post.tags.iter().filter_map(|t| self.tags.get(&t.slug)) {
            if !ids.contains(id) {
                ids.push(*id);
            }
        }
        ids
    }

    /// Finds or creates every tag the chunk's posts name that this import has not met yet: by
    /// slug, else by name (case and surrounding spaces aside), else a new tag; two new tags of
    /// one name become one.
    async fn resolve_tags(
        &mut self,
        tx: &mut DbConn<'_>,
        items: &[ParsedItem],
    ) -> Result<(), BlogError> {
        let mut seen: HashSet<&str> = HashSet::new();
        let wanted: Vec<&IncomingTag> = items
            .iter()
            .filter_map(|i| i.post.as_ref().ok())
            .flat_map(|p| &p.tags)
            .filter(|t| !self.tags.contains_key(&t.slug) && seen.insert(&t.slug))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let slugs: Vec<&str> = wanted.iter().map(|t| t.slug.as_str()).collect();
        for row in bulk::tags_by_slugs(tx, &slugs).await? {
            self.tags.insert(row.slug, row.id);
        }
        let wanted: Vec<&IncomingTag> = wanted
            .into_iter()
            .filter(|t| !self.tags.contains_key(&t.slug))
            .collect();
        let keys: Vec<String> = wanted.iter().map(|t| tag_name_key(&t.name)).collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut by_key: HashMap<String, i64> = bulk::tags_by_name_keys(tx, &key_refs)
            .await?
            .into_iter()
            .map(|row| (row.name_key, row.id))
            .collect();
        // The first tag of each name still missing is created; the others of its name join it.
        let mut new_rows = Vec::new();
        let mut new_keys: HashSet<&str> = HashSet::new();
        for (tag, key) in wanted.iter().zip(&keys) {
            if !by_key.contains_key(key) && new_keys.insert(key) {
                new_rows.push(NewTagRow {
                    name: &tag.name,
                    name_key: key,
                    slug: &tag.slug,
                    created_at: self.now,
                });
            }
        }
        for row in bulk::insert_tags(tx, &new_rows).await? {
            by_key.insert(row.name_key, row.id);
        }
        for (tag, key) in wanted.iter().zip(&keys) {
            if let Some(id) = by_key.get(key) {
                self.tags.insert(tag.slug.clone(), *id);
            }
        }
        Ok(())
    }

    /// Inserts the posts waiting in `pending` and their links, and records their ids in `stored`.
    async fn insert_pending(
        &self,
        tx: &mut DbConn<'_>,
        pending: &mut Vec<&IncomingPost>,
        stored: &mut HashMap<String, i64>,
    ) -> Result<(), BlogError> {
        if pending.is_empty() {
            return Ok(());
        }
        let rows: Vec<NewPostRow> = pending.iter().map(|post| self.new_row(post)).collect();
        let tag_ids: Vec<Vec<i64>> = pending.iter().map(|post| self.tag_ids(post)).collect();
        let ids = bulk::insert_posts(tx, &rows, &tag_ids).await?;
        // By slug (unique among the pending posts), whatever order the rows come back in.
        let tags_of: HashMap<&str, &Vec<i64>> = rows.iter().map(|r| r.slug).zip(&tag_ids).collect();
        let mut links = Vec::new();
        for (id, slug) in ids {
            let tags = tags_of.get(slug.as_str()).copied().into_iter().flatten();
            links.extend(tags.map(|&tag_id| PostTagRow {
                post_id: id,
                tag_id,
            }));
            stored.insert(slug, id);
        }
        bulk::insert_links(tx, &links).await?;
        pending.clear();
        Ok(())
    }

    /// The row of a new post.
    fn new_row<'a>(&'a self, post: &'a IncomingPost) -> NewPostRow<'a> {
        NewPostRow {
            title: &post.title,
            slug: &post.slug,
            excerpt: post.excerpt.as_deref(),
            content: &post.content,
            status: post.status.as_str(),
            author_id: self.options.author.id,
            author_name: post
                .author_name
                .as_deref()
                .or(self.options.author.name.as_deref()),
            seo_title: post.seo_title.as_deref(),
            seo_description: post.seo_description.as_deref(),
            hero_image_url: post.hero_image_url.as_deref(),
            created_at: post.created_at.unwrap_or(self.now),
            updated_at: post.updated_at.unwrap_or(self.now),
            published_at: post.published_at,
            content_html: &post.rendered.html,
            derived_excerpt: &post.rendered.excerpt,
        }
    }

    /// Replaces every field of stored post `id` (author and created_at only when given) and its
    /// tags.
    async fn overwrite(
        &self,
        tx: &mut DbConn<'_>,
        id: i64,
        post: &IncomingPost,
    ) -> Result<(), BlogError> {
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
            content_html: Some(&post.rendered.html),
            derived_excerpt: Some(&post.rendered.excerpt),
            // The export format has no schedule: an overwritten post is not scheduled.
            scheduled_at: Some(None),
        };
        store::update_post(tx, id, &changes).await?;
        store::set_post_tags(tx, id, &self.tag_ids(post)).await?;
        Ok(())
    }
}
