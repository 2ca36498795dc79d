//! Posts: lists, reads and the lifecycle (create, update, publish, archive, delete).

use super::*;

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

    pub(super) async fn get_post(&self, id: i64) -> Result<Post, BlogError> {
        let mut pooled = self.pool.get().await?;
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

    /// Renders the posts stored before rendering existed (their HTML is empty), in batches;
    /// returns how many it rendered. Runs when the module starts.
    pub(crate) async fn render_missing(&self) -> Result<usize, BlogError> {
        const BATCH: i64 = 100;
        let mut after_id = 0;
        let mut rendered = 0;
        loop {
            let batch = {
                let mut pooled = self.pool.get().await?;
                store::unrendered_posts(&mut pooled.conn(), after_id, BATCH).await?
            };
            let Some((last_id, _)) = batch.last() else {
                return Ok(rendered);
            };
            after_id = *last_id;
            let count = batch.len();
            let done = tokio::task::spawn_blocking(move || {
                batch
                    .into_iter()
                    .map(|(id, content)| (id, markdown::render(&content)))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(join_error)?;
            write_tx!(&self.pool, BlogError, |tx| {
                for (id, r) in &done {
                    store::set_rendered(tx, *id, &r.html, &r.excerpt).await?;
                }
                Ok(())
            })?;
            rendered += count;
            if (count as i64) < BATCH {
                return Ok(rendered);
            }
        }
    }
}
