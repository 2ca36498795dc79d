//! The service as the module hands it out: every call a unit of work ([`Detached`]), so that a
//! request dropped mid-call (the client went away) cannot cut a write in half. Each method
//! copies its borrowed arguments and forwards to the wrapped service; a method added to
//! [`BlogService`] without a line here does not compile.

use std::path::Path;

use actix_web::web::Bytes;
use async_trait::async_trait;
use chrono::NaiveDateTime;
use kernel::pagination::Page;
use kernel::unit::Detached;

use super::{
    Author, BlogService, ExportFile, ExportOptions, ImportOptions, ImportResult, NewPost, NewTag,
    Post, PostPage, PostPatch, Scheduled, Tag, TagPatch,
};
use crate::domain::feed::SitemapEntry;
use crate::domain::post::PostStatus;
use crate::error::BlogError;

#[async_trait]
impl BlogService for Detached<dyn BlogService> {
    async fn list_published(&self, page: Page, tag: Option<&str>) -> Result<PostPage, BlogError> {
        let tag = tag.map(str::to_owned);
        self.run(move |s| async move { s.list_published(page, tag.as_deref()).await })
            .await
    }

    async fn list_all(
        &self,
        page: Page,
        status: Option<PostStatus>,
        tag: Option<&str>,
    ) -> Result<PostPage, BlogError> {
        let tag = tag.map(str::to_owned);
        self.run(move |s| async move { s.list_all(page, status, tag.as_deref()).await })
            .await
    }

    async fn get_published(&self, slug: &str) -> Result<Post, BlogError> {
        let slug = slug.to_owned();
        self.run(move |s| async move { s.get_published(&slug).await })
            .await
    }

    async fn list_published_json(&self, page: Page, tag: Option<&str>) -> Result<Bytes, BlogError> {
        let tag = tag.map(str::to_owned);
        self.run(move |s| async move { s.list_published_json(page, tag.as_deref()).await })
            .await
    }

    async fn get_published_json(&self, slug: &str) -> Result<(Bytes, NaiveDateTime), BlogError> {
        let slug = slug.to_owned();
        self.run(move |s| async move { s.get_published_json(&slug).await })
            .await
    }

    async fn sitemap_entries(&self, limit: i64) -> Result<Vec<SitemapEntry>, BlogError> {
        self.run(move |s| async move { s.sitemap_entries(limit).await })
            .await
    }

    async fn get_post(&self, id: i64) -> Result<Post, BlogError> {
        self.run(move |s| async move { s.get_post(id).await }).await
    }

    async fn create_post(&self, author: &Author, input: NewPost) -> Result<Post, BlogError> {
        let author = author.clone();
        self.run(move |s| async move { s.create_post(&author, input).await })
            .await
    }

    async fn update_post(&self, id: i64, patch: PostPatch) -> Result<Post, BlogError> {
        self.run(move |s| async move { s.update_post(id, patch).await })
            .await
    }

    async fn publish_post(&self, id: i64) -> Result<Post, BlogError> {
        self.run(move |s| async move { s.publish_post(id).await })
            .await
    }

    async fn schedule_post(&self, id: i64, at: NaiveDateTime) -> Result<Post, BlogError> {
        self.run(move |s| async move { s.schedule_post(id, at).await })
            .await
    }

    async fn publish_scheduled(&self, id: i64, at: NaiveDateTime) -> Result<Scheduled, BlogError> {
        self.run(move |s| async move { s.publish_scheduled(id, at).await })
            .await
    }

    async fn publish_overdue(&self) -> Result<usize, BlogError> {
        self.run(move |s| async move { s.publish_overdue().await })
            .await
    }

    async fn archive_post(&self, id: i64) -> Result<Post, BlogError> {
        self.run(move |s| async move { s.archive_post(id).await })
            .await
    }

    async fn delete_post(&self, id: i64) -> Result<(), BlogError> {
        self.run(move |s| async move { s.delete_post(id).await })
            .await
    }

    async fn list_tags(&self) -> Result<Vec<Tag>, BlogError> {
        self.run(move |s| async move { s.list_tags().await }).await
    }

    async fn create_tag(&self, input: NewTag) -> Result<Tag, BlogError> {
        self.run(move |s| async move { s.create_tag(input).await })
            .await
    }

    async fn update_tag(&self, id: i64, patch: TagPatch) -> Result<Tag, BlogError> {
        self.run(move |s| async move { s.update_tag(id, patch).await })
            .await
    }

    async fn delete_tag(&self, id: i64) -> Result<(), BlogError> {
        self.run(move |s| async move { s.delete_tag(id).await })
            .await
    }

    async fn export(&self, options: ExportOptions) -> Result<ExportFile, BlogError> {
        self.run(move |s| async move { s.export(options).await })
            .await
    }

    async fn export_to_path(
        &self,
        options: ExportOptions,
        path: &Path,
    ) -> Result<usize, BlogError> {
        let path = path.to_path_buf();
        self.run(move |s| async move { s.export_to_path(options, &path).await })
            .await
    }

    async fn export_bytes(&self, options: ExportOptions) -> Result<Vec<u8>, BlogError> {
        self.run(move |s| async move { s.export_bytes(options).await })
            .await
    }

    async fn import_bytes(
        &self,
        file_name: &str,
        bytes: Vec<u8>,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let file_name = file_name.to_owned();
        self.run(move |s| async move { s.import_bytes(&file_name, bytes, options).await })
            .await
    }

    async fn import_path(
        &self,
        path: &Path,
        options: ImportOptions,
    ) -> Result<ImportResult, BlogError> {
        let path = path.to_path_buf();
        self.run(move |s| async move { s.import_path(&path, options).await })
            .await
    }
}
