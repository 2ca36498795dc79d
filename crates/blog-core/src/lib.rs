//! Keel's blog module: posts with a draft → published → archived lifecycle, tags, public and
//! editor lists, and import/export of Markdown (YAML/TOML/JSON front matter, zips) and JSON.
//!
//! Embedding it alone in an actix-web app (writes are open without an authenticator; hand one in
//! with [`Deps::with_authenticator`] to require a token):
//!
//! ```no_run
//! use std::sync::Arc;
//! use blog_core::{BlogConfig, BlogModule};
//! use kernel::module::{BodyLimits, BuildModule, Deps, Module, mount};
//! use utoipa_actix_web::AppExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "sqlite://data/blog.db";
//! kernel::db::migrate(url, &[blog_core::MIGRATIONS]).await?;
//! let deps = Deps::new(kernel::DbPool::connect(url, 4).await?)?;
//! let blog: Arc<dyn Module> = Arc::new(BlogModule::build(BlogConfig::default(), &deps).await?);
//! actix_web::HttpServer::new(move || {
//!     mount(kernel::http::app(BodyLimits::default()).into_utoipa_app(), &blog).into_app()
//! })
//! .bind(("127.0.0.1", 8000))?
//! .run()
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The CLI and other Rust callers use [`BlogModule::service`] (export and import without HTTP).

#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
pub mod domain;
mod error;
mod http;
mod schema;
mod service;
mod store;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::capability::Use;
use kernel::health::ModuleHealth;
use kernel::identity::Identity;
use kernel::jobs::{JobQueue, QUEUE_SYSTEM, TaskDef};
use kernel::module::{BuildModule, Deps, Module, ModuleError, Mounts};
use kernel::unit::Detached;
use kernel::{Authenticator, DbPool, MigrationSet};
use utoipa_actix_web::service_config::ServiceConfig;

pub use config::{BlogConfig, Protection};
pub use domain::export::{ExportFormat, ExportedPost, ExportedTag};
pub use domain::post::PostStatus;
pub use error::BlogError;
use service::BlogServiceImpl;
pub use service::{
    Author, BlogService, ExportFile, ExportOptions, ImportErrorItem, ImportOptions, ImportProgress,
    ImportResult, NewPost, NewTag, OnConflict, PUBLISH_TASK, Post, PostPage, PostPatch, ProgressFn,
    Scheduled, Tag, TagPatch,
};

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/blog");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/blog");

/// The blog module's migrations (tables `blog_posts`, `blog_tags`, `blog_post_tags`).
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "blog",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

/// Cached public answers at most (list pages, posts, the tag list, the feeds, the sitemap).
const PUBLIC_CACHE_ENTRIES: usize = 1024;

/// The assembled module: its service and its HTTP state.
pub struct BlogModule {
    /// Where the routes are mounted (the host's choice, else [`Self::MOUNTS`]).
    mounts: Mounts,
    pool: DbPool,
    /// The service wrapped once: every call through it is a unit of work.
    service: Arc<dyn BlogService>,
    state: web::Data<http::BlogState>,
    identity: web::Data<Identity>,
    /// The job queue of scheduled publications, when the tasks module is mounted.
    jobs: Option<Arc<dyn JobQueue>>,
}

impl BlogModule {
    /// Where the module mounts its routes unless the host chooses (`Deps::mounted_at`).
    pub const MOUNTS: &'static [&'static str] = &["/api/v1/blog"];
}

impl BuildModule for BlogModule {
    const NAME: &'static str = "blog";
    type Settings = BlogConfig;

    fn uses() -> Vec<Use> {
        vec![
            Use::optional::<dyn Authenticator>(),
            Use::optional::<dyn JobQueue>(),
        ]
    }

    fn migrations() -> Option<MigrationSet> {
        Some(MIGRATIONS)
    }

    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        vec![cli::command()]
    }

    /// Builds the module over a migrated pool. Without an authenticator only
    /// `BLOG_PROTECTION=none` is possible, and writes are open (logged).
    async fn build(config: BlogConfig, deps: &Deps) -> Result<Self, ModuleError> {
        let auth_mounted = deps.authenticator().is_some();
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
        let public = Arc::new(service::PublicCache::new(
            deps.read_cache,
            PUBLIC_CACHE_ENTRIES,
        ));
        let jobs = deps.get::<dyn JobQueue>();
        let inner = Arc::new(BlogServiceImpl::new(
            deps.pool.clone(),
            limits,
            public.clone(),
            jobs.clone(),
        ));
        match inner.render_missing().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                posts = n,
                "rendered stored posts that lacked their JSON or HTML"
            ),
            Err(e) => {
                return Err(ModuleError::new(
                    Self::NAME,
                    format!("rendering stored posts: {e}"),
                ));
            }
        }
        // Every call of the handlers, the CLI and embedders is a unit of work from here on.
        let service: Arc<dyn BlogService> = Arc::new(Detached::new(inner as Arc<dyn BlogService>));
        // Scheduled posts whose time passed while no instance ran (or whose task was lost).
        match service.publish_overdue().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(posts = n, "published scheduled posts whose time had passed"),
            Err(e) => tracing::warn!(error = %e, "publishing overdue scheduled posts"),
        }
        if config.schedule_sweep_seconds > 0 {
            spawn_sweep(
                Arc::downgrade(&service),
                std::time::Duration::from_secs(config.schedule_sweep_seconds),
            );
        }
        let mounts = deps.mounts_or(Self::MOUNTS);
        let post_url_template = if config.post_url_template == config::DEFAULT_POST_URL_TEMPLATE {
            mounts.path("/posts/{slug}")
        } else {
            config.post_url_template.clone()
        };
        let site = domain::feed::FeedSite {
            title: config.feed_title.clone(),
            base_url: config.public_base_url.trim_end_matches('/').to_owned(),
            post_url_template,
            mount: mounts.documented().to_owned(),
        };
        let cache_control =
            actix_web::http::header::HeaderValue::from_str(&config.cache_control)
                .map_err(|e| ModuleError::new(Self::NAME, format!("BLOG_CACHE_CONTROL: {e}")))?;
        let state = web::Data::new(http::BlogState {
            service: service.clone(),
            protection,
            import_max_bytes: config.import_max_bytes,
            imports: Arc::new(tokio::sync::Semaphore::new(config.import_concurrency)),
            public,
            cache_control,
            site: Arc::new(site),
            feed_entries: config.feed_entries.clamp(1, 100),
            can_schedule: jobs.is_some(),
        });
        Ok(BlogModule {
            mounts,
            pool: deps.pool.clone(),
            service,
            state,
            identity: deps.identity(),
            jobs,
        })
    }
}

/// Publishes overdue scheduled posts every `every`, until the module is dropped.
fn spawn_sweep(service: std::sync::Weak<dyn BlogService>, every: std::time::Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is now: the build has just swept
        loop {
            ticks.tick().await;
            let Some(service) = service.upgrade() else {
                return;
            };
            match service.publish_overdue().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(posts = n, "published overdue scheduled posts"),
                Err(e) => tracing::warn!(error = %e, "publishing overdue scheduled posts"),
            }
        }
    });
}

impl BlogModule {
    /// The service: every operation of the module without HTTP (the CLI's export and import),
    /// each call a unit of work.
    pub fn service(&self) -> Arc<dyn BlogService> {
        self.service.clone()
    }

    /// The protection level in force.
    pub fn protection(&self) -> Protection {
        self.state.protection
    }
}

#[async_trait::async_trait]
impl Module for BlogModule {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    fn routes(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .app_data(self.identity.clone())
            .service(http::feeds::atom_feed)
            .service(http::feeds::rss_feed)
            .service(http::feeds::sitemap)
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
    async fn health(&self) -> ModuleHealth {
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

    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        match name {
            cli::COMMAND => cli::run(&*self.service, matches).await,
            other => Err(format!("the blog module has no command {other}")),
        }
    }

    /// The publication of scheduled posts (only with a job queue: without one nothing is
    /// scheduled, and the sweep publishes what was).
    fn tasks(&self) -> Vec<TaskDef> {
        let Some(jobs) = self.jobs.clone() else {
            return Vec::new();
        };
        let service = self.service.clone();
        let task = TaskDef::new(
            PUBLISH_TASK,
            QUEUE_SYSTEM,
            Arc::new(move |input| {
                let (service, jobs) = (service.clone(), jobs.clone());
                Box::pin(service::schedule::run_task(service, jobs, input))
            }),
        )
        .with_args_check(Arc::new(|input| {
            service::schedule::task_args(input).map(drop)
        }));
        vec![task]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_trees_are_mirrored() {
        kernel::testing::assert_migration_trees_mirrored(env!("CARGO_MANIFEST_DIR"), "blog");
    }
}
