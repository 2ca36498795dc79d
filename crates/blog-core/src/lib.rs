//! Keel's blog module: posts with a draft → published → archived lifecycle, tags, public and
//! editor lists, and import/export of Markdown (YAML/TOML/JSON front matter, zips) and JSON.
//!
//! Embedding it: open a [`kernel::DbPool`], run [`MIGRATIONS`], build a [`BlogModule`] with a
//! [`BlogConfig`], register a [`kernel::identity::Identity`] as app data, and mount
//! [`BlogModule::configure`] under a scope (Keel uses `/api/v1/blog`). The CLI and other Rust
//! callers use [`BlogModule::service`] (export and import without HTTP).

pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod schema;
pub mod service;
pub mod store;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::health::ModuleHealth;
use kernel::{DbPool, MigrationSet};
use utoipa_actix_web::service_config::ServiceConfig;

pub use config::{BlogConfig, Protection};
pub use domain::export::{ExportFormat, ExportedPost, ExportedTag};
pub use domain::post::PostStatus;
pub use error::BlogError;
pub use service::{
    Author, BlogService, BlogServiceImpl, ExportFile, ExportOptions, ImportErrorItem,
    ImportOptions, ImportProgress, ImportResult, NewPost, NewTag, OnConflict, Post, PostPage,
    PostPatch, ProgressFn, Tag, TagPatch,
};

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/blog");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/blog");

/// The blog module's migrations (tables `blog_posts`, `blog_tags`, `blog_post_tags`).
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "blog",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

/// The assembled module: its service and its HTTP state.
pub struct BlogModule {
    pool: DbPool,
    service: Arc<BlogServiceImpl>,
    state: web::Data<http::BlogState>,
}

impl BlogModule {
    /// Builds the module over a migrated pool. `auth_mounted` says whether the auth module
    /// answers: without it only `BLOG_PROTECTION=none` is possible, and writes are open (logged).
    pub fn build(pool: DbPool, config: BlogConfig, auth_mounted: bool) -> BlogModule {
        if let Err(e) = config.check(auth_mounted) {
            tracing::warn!(error = %e, "falling back to BLOG_PROTECTION=none");
        }
        let protection = config.effective_protection(auth_mounted);
        if protection == Protection::None {
            tracing::warn!(
                auth_mounted,
                "blog writes are open to anyone (BLOG_PROTECTION=none): editor, import and export endpoints need no token"
            );
        }
        let limits = domain::upload::ZipLimits {
            max_entries: config.import_max_entries,
            max_unpacked_bytes: config.import_max_unpacked_bytes,
            max_ratio: config.import_max_ratio,
        };
        let service = Arc::new(BlogServiceImpl::new(pool.clone(), limits));
        let state = web::Data::new(http::BlogState {
            service: service.clone(),
            protection,
            import_max_bytes: config.import_max_bytes,
        });
        BlogModule {
            pool,
            service,
            state,
        }
    }

    /// The service: every operation of the module without HTTP (the CLI's export and import).
    pub fn service(&self) -> Arc<dyn BlogService> {
        self.service.clone()
    }

    /// The protection level in force.
    pub fn protection(&self) -> Protection {
        self.state.protection
    }

    /// Registers the module's routes and app data. The caller registers
    /// `web::Data<kernel::identity::Identity>` (the authenticator, or none).
    pub fn configure(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .service(http::posts::list_posts)
            .service(http::posts::admin_list_posts)
            .service(http::posts::get_post)
            .service(http::posts::create_post)
            .service(http::posts::update_post)
            .service(http::posts::publish_post)
            .service(http::posts::archive_post)
            .service(http::posts::delete_post)
            .service(http::tags::list_tags)
            .service(http::tags::create_tag)
            .service(http::tags::update_tag)
            .service(http::tags::delete_tag)
            .service(http::transfer::export)
            .service(http::transfer::import);
    }

    /// Healthy when the post table can be read.
    pub async fn health(&self) -> ModuleHealth {
        let result = async {
            let mut pooled = self.pool.get().await?;
            let posts = store::count_posts(&mut pooled.conn()).await?;
            Ok::<_, BlogError>(posts)
        }
        .await;
        match result {
            Ok(posts) => ModuleHealth::healthy(format!("post store reachable ({posts} posts)")),
            Err(e) => ModuleHealth::unhealthy(format!("post store unreachable: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_trees_are_mirrored() {
        let names = |backend: &str| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../../migrations/{backend}/blog"));
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names
        };
        let postgres = names("postgres");
        assert!(!postgres.is_empty());
        assert_eq!(postgres, names("sqlite"));
    }
}
