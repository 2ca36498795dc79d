//! Posts: lists, reads and the lifecycle (create, update, publish, archive, delete).

use super::*;

/// Room for the JSON of `rows`: their stored text, and their ids and tags.
fn json_capacity(rows: &[PostJsonRow]) -> usize {
    const PER_POST: usize = 512;
    let stored: usize = rows
        .iter()
        .map(|r| r.api_json.as_ref().map_or(0, String::len))
        .sum();
    stored + rows.len() * PER_POST + 128
}

impl BlogServiceImpl {
    pub(super) async fn list_published(
        &self,
        page: Page,
        tag: Option<&str>,
    ) -> Result<PostPage, BlogError> {
        let filter = ListFilter {
            status: Some(PostStatus::Published),
            tag,
            order: PostOrder::NewestPublished,
        };
        self.list(page, filter).await
    }

    pub(super) async fn list_all(
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

    pub(super) async fn get_published(&self, slug: &str) -> Result<Post, BlogError> {
        kernel::read_snapshot!(&self.pool, BlogError, |conn| {
            let row = store::find_post_by_slug(conn, &slugify(slug, POST_SLUG_MAX))
                .await?
                .filter(|r| r.status == PostStatus::Published.as_str())
                .ok_or(BlogError::PostNotFound)?;
            Self::load_post(conn, row).await
        })
    }

    /// The public list's answer (`BlogPostListResponse` as JSON), written from the posts' stored
    /// JSON, from one snapshot.
    pub(super) async fn list_published_json(
        &self,
        page: Page,
        tag: Option<&str>,
    ) -> Result<Bytes, BlogError> {
        kernel::read_snapshot!(&self.pool, BlogError, |conn| {
            let (rows, total) = match tag_filter(conn, tag).await? {
                Some(tag_id) => {
                    store::public_page(
                        conn,
                        PostStatus::Published.as_str(),
                        tag_id,
                        page.offset(),
                        page.limit(),
                    )
                    .await?
                }
                None => (Vec::new(), 0),
            };
            let mut out = Vec::with_capacity(json_capacity(&rows));
            view::start_list(&mut out);
            Self::write_posts_json(conn, rows, &mut out).await?;
            view::end_list(&mut out, total, page.page, page.page_size);
            Ok(Bytes::from(out))
        })
    }

    /// A published post's answer (`BlogPostResponse` as JSON), written from its stored JSON, and
    /// its `updated_at`.
    pub(super) async fn get_published_json(
        &self,
        slug: &str,
    ) -> Result<(Bytes, NaiveDateTime), BlogError> {
        kernel::read_snapshot!(&self.pool, BlogError, |conn| {
            let row = store::find_post_json_by_slug(conn, &slugify(slug, POST_SLUG_MAX))
                .await?
                .filter(|r| r.status == PostStatus::Published.as_str())
                .ok_or(BlogError::PostNotFound)?;
            let updated_at = row.updated_at;
            let mut out = Vec::with_capacity(json_capacity(std::slice::from_ref(&row)));
            Self::write_posts_json(conn, vec![row], &mut out).await?;
            if out.is_empty() {
                // Its stored JSON was unusable and the row went before it could be read again.
                return Err(BlogError::PostNotFound);
            }
            Ok((Bytes::from(out), updated_at))
        })
    }

    pub(super) async fn get_post(&self, id: i64) -> Result<Post, BlogError> {
        let mut pooled = self.pool.read().await?;
        let mut conn = pooled.conn();
        let row = store::find_post(&mut conn, id)
            .await?
            .ok_or(BlogError::PostNotFound)?;
        Self::load_post(&mut conn, row).await
    }

    pub(super) async fn create_post(
        &self,
        author: &Author,
        input: NewPost,
    ) -> Result<Post, BlogError> {
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
        let (content, rendered) = render(content).await?;
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
                content_html: &rendered.html,
                derived_excerpt: &rendered.excerpt,
            };
            let mut row = store::insert_post(tx, &new).await?;
            row.tag_ids = store::set_post_tags(tx, row.id, &tag_ids).await?;
            Self::load_post(tx, row).await
        });
        match result {
            Err(BlogError::Db(e)) if e.is_unique_violation() => Err(BlogError::PostSlugTaken(slug)),
            other => other,
        }
    }

    pub(super) async fn update_post(&self, id: i64, patch: PostPatch) -> Result<Post, BlogError> {
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
        let (content, rendered) = match patch.content {
            Some(content) => {
                let (content, rendered) = render(content).await?;
                (Some(content), Some(rendered))
            }
            None => (None, None),
        };
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
                content: content.as_deref(),
                content_html: rendered.as_ref().map(|r| r.html.as_str()),
                derived_excerpt: rendered.as_ref().map(|r| r.excerpt.as_str()),
                seo_title: nullable(&patch.seo_title),
                seo_description: nullable(&patch.seo_description),
                hero_image_url: nullable(&patch.hero_image_url),
                scheduled_at: patch.unschedule.then_some(None),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let mut row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            if let Some(tag_ids) = &tag_ids {
                row.tag_ids = store::set_post_tags(tx, id, tag_ids).await?;
            }
            Self::load_post(tx, row).await
        });
        match result {
            Err(BlogError::Db(e)) if e.is_unique_violation() => {
                Err(BlogError::PostSlugTaken(slug.unwrap_or_default()))
            }
            other => other,
        }
    }

    pub(super) async fn publish_post(&self, id: i64) -> Result<Post, BlogError> {
        let now = kernel::time::now();
        write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_post(tx, id)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            let (status, published_at) = post::publish(current.published_at, now);
            let changes = PostChanges {
                status: Some(status.as_str()),
                published_at: Some(published_at),
                scheduled_at: current.scheduled_at.map(|_| None),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            Self::load_post(tx, row).await
        })
    }

    pub(super) async fn archive_post(&self, id: i64) -> Result<Post, BlogError> {
        let now = kernel::time::now();
        write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_post(tx, id)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            let (status, published_at) = post::archive(current.published_at);
            let changes = PostChanges {
                status: Some(status.as_str()),
                published_at: Some(published_at),
                scheduled_at: current.scheduled_at.map(|_| None),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            Self::load_post(tx, row).await
        })
    }

    pub(super) async fn delete_post(&self, id: i64) -> Result<(), BlogError> {
        let deleted = write_tx!(&self.pool, BlogError, |tx| Ok(
            store::delete_post(tx, id).await?
        ))?;
        if deleted == 0 {
            Err(BlogError::PostNotFound)
        } else {
            Ok(())
        }
    }

    /// Renders what stored posts lack, in batches: the JSON of posts stored before it existed or
    /// changed by a writer that does not write it, and the HTML of posts stored before rendering
    /// existed (empty); returns how many posts it rendered. Runs when the module starts.
    pub(crate) async fn render_missing(&self) -> Result<usize, BlogError> {
        const BATCH: i64 = 100;
        let mut after_id = 0;
        let mut rendered = 0;
        loop {
            let batch = {
                let mut pooled = self.pool.get().await?;
                store::unrendered_posts(&mut pooled.conn(), after_id, BATCH).await?
            };
            let Some(last) = batch.last() else {
                return Ok(rendered);
            };
            after_id = last.id;
            let count = batch.len();
            // The Markdown off the executor, before the write transaction.
            let html = tokio::task::spawn_blocking(move || {
                batch
                    .into_iter()
                    .map(|row| {
                        let html = (row.content_html.is_empty() && !row.content.is_empty())
                            .then(|| markdown::render(&row.content));
                        (row.id, row.content, html)
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(join_error)?;
            rendered += write_tx!(&self.pool, BlogError, |tx| {
                let mut done = 0;
                for (id, content, html) in &html {
                    // As it is now: another instance may have written it since it was read.
                    let Some(row) = store::claim_unrendered(tx, *id).await? else {
                        continue;
                    };
                    match html {
                        Some(r) if row.content_html.is_empty() && row.content == *content => {
                            let changes = PostChanges {
                                content_html: Some(&r.html),
                                derived_excerpt: Some(&r.excerpt),
                                ..PostChanges::default()
                            };
                            store::update_post(tx, *id, &changes).await?;
                        }
                        _ => store::store_json(tx, &row).await?,
                    }
                    done += 1;
                }
                Ok(done)
            })?;
            if (count as i64) < BATCH {
                return Ok(rendered);
            }
        }
    }
}
