//! Keel's AI chat module: seven LLM providers over their native APIs (OpenAI-compatible, Anthropic,
//! Gemini, Cohere v2), conversations in memory or in the database, and replies streamed as
//! server-sent events. Mounted at `/ai` and `/api/v1/ai`.
//!
//! Embedding it alone in an actix-web app:
//!
//! ```no_run
//! use std::sync::Arc;
//! use ai_core::{AiConfig, AiModule};
//! use kernel::module::{BodyLimits, BuildModule, Deps, Module, mount};
//! use utoipa_actix_web::AppExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "sqlite://data/ai.db";
//! kernel::db::migrate(url, &[ai_core::MIGRATIONS]).await?;
//! let deps = Deps::new(kernel::DbPool::connect(url, 4).await?)?;
//! let ai: Arc<dyn Module> = Arc::new(AiModule::build(AiConfig::default(), &deps).await?);
//! actix_web::HttpServer::new(move || {
//!     mount(kernel::http::app(BodyLimits::default()).into_utoipa_app(), &ai).into_app()
//! })
//! .bind(("127.0.0.1", 8000))?
//! .run()
//! .await?;
//! # Ok(())
//! # }
//! ```

pub mod budget;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
mod error;
mod http;
pub mod providers;
pub mod routing;
mod schema;
mod service;
pub mod store;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::capability::Use;
use kernel::health::ModuleHealth;
use kernel::identity::Identity;
use kernel::jobs::TaskDef;
use kernel::module::{BuildModule, Deps, Module, ModuleError, Mounts};
use kernel::plans::Entitlements;
use kernel::{Authenticator, MigrationSet};
use utoipa_actix_web::service_config::ServiceConfig;

pub use budget::{Caller, Quota};
pub use config::{AiConfig, Fallback, PROVIDERS, ProviderSpec, StoreChoice};
pub use error::AiError;
pub use service::{AiService, Opened, Reply, Turn};

use budget::Meter;
use service::AiServiceImpl;
use store::{ConversationStore, DatabaseStore, MemoryStore};

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/ai");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/ai");

/// The AI module's migrations (tables `ai_conversations`, `ai_messages`, used with
/// `AI_CONVERSATION_STORE=database`, and `ai_usage`, the daily token counts).
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "ai",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

/// The assembled module.
pub struct AiModule {
    /// Where the routes are mounted (the host's choice, else [`Self::MOUNTS`]).
    mounts: Mounts,
    // The command line builds services of its own from these (`run_command`).
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    config: AiConfig,
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    http: kernel::http_client::HttpClient,
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    store: Arc<dyn ConversationStore>,
    meter: Arc<Meter>,
    service: Arc<dyn AiService>,
    state: web::Data<http::AiState>,
    identity: web::Data<Identity>,
}

/// The service over `config`'s chain of providers, wrapped: every call through it is a unit of
/// work.
fn service(
    config: AiConfig,
    http: &kernel::http_client::HttpClient,
    store: Arc<dyn ConversationStore>,
    meter: Arc<Meter>,
) -> Arc<dyn AiService> {
    let router = Arc::new(routing::Router::new(&config, http));
    let inner: Arc<dyn AiService> = Arc::new(AiServiceImpl::new(config, router, store, meter));
    Arc::new(kernel::unit::Detached::new(inner))
}

impl AiModule {
    /// Where the module mounts its routes unless the host chooses (`Deps::mounted_at`).
    pub const MOUNTS: &'static [&'static str] = &["/ai", "/api/v1/ai"];
}

impl BuildModule for AiModule {
    const NAME: &'static str = "ai";
    type Settings = AiConfig;

    /// Entitlements tell an account's plan for the daily budgets; without them every caller has
    /// the free plan.
    fn uses() -> Vec<Use> {
        vec![
            Use::optional::<dyn Authenticator>(),
            Use::optional::<dyn Entitlements>(),
        ]
    }

    fn migrations() -> Option<MigrationSet> {
        Some(MIGRATIONS)
    }

    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        vec![cli::command()]
    }

    async fn build(config: AiConfig, deps: &Deps) -> Result<Self, ModuleError> {
        let store: Arc<dyn ConversationStore> = match config.store {
            StoreChoice::Memory => Arc::new(MemoryStore::new(
                config.conversation_ttl,
                config.max_conversations,
            )),
            StoreChoice::Database => Arc::new(DatabaseStore::new(deps.pool.clone())),
        };
        if let Some(why) = config.missing_key(config.provider) {
            tracing::warn!("AI chat answers 503 until this is fixed: {why}");
        }
        let meter = Arc::new(Meter::new(
            deps.pool.clone(),
            config.daily_tokens.clone(),
            deps.get::<dyn Entitlements>(),
        ));
        let service = service(config.clone(), &deps.http, store.clone(), meter.clone());
        Ok(AiModule {
            mounts: deps.mounts_or(Self::MOUNTS),
            config,
            http: deps.http.clone(),
            store,
            meter,
            state: web::Data::new(http::AiState {
                service: service.clone(),
            }),
            service,
            identity: deps.identity(),
        })
    }
}

impl AiModule {
    /// The service: every operation of the module without HTTP, each call a unit of work.
    pub fn service(&self) -> Arc<dyn AiService> {
        self.service.clone()
    }
}

#[async_trait::async_trait]
impl Module for AiModule {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    fn routes(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .app_data(self.identity.clone())
            .service(http::chat)
            .service(http::stream::chat_stream)
            .service(http::stream::chat_stream_get)
            .service(http::conversations)
            .service(http::conversation)
            .service(http::delete_conversation)
            .service(http::usage::usage)
            .service(http::health)
            .service(http::version);
    }

    /// Healthy when the conversation store answers; the detail names the provider, or why it
    /// cannot be used.
    async fn health(&self) -> ModuleHealth {
        let health = match self.service.health().await {
            Ok(health) => health,
            Err(e) => return ModuleHealth::unhealthy(format!("health check failed: {e}")),
        };
        match (health.total_conversations, health.validation_errors.first()) {
            (None, _) => ModuleHealth::unhealthy("conversation store unreachable"),
            (Some(_), Some(why)) => ModuleHealth::unhealthy(why.clone()),
            (Some(n), None) => ModuleHealth::healthy(format!(
                "{} ({}), {n} conversations",
                health.provider, health.model
            )),
        }
    }

    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        if name != cli::COMMAND {
            return Err(format!("the ai module has no command {name}"));
        }
        let service_for = |provider: Option<String>, model: Option<String>| {
            if provider.is_none() && model.is_none() {
                return Ok(self.service.clone());
            }
            let mut config = self.config.clone();
            if let Some(name) = provider {
                config.provider =
                    config::provider(&name).ok_or_else(|| format!("unknown provider {name:?}"))?;
                config.model = None;
                // A provider asked for by name answers alone.
                config.fallbacks.clear();
            }
            if model.is_some() {
                config.model = model;
            }
            Ok(service(
                config,
                &self.http,
                self.store.clone(),
                self.meter.clone(),
            ))
        };
        cli::run(service_for, matches).await
    }

    /// Forgets token counts older than a month (`cleanup_expired_data`).
    fn tasks(&self) -> Vec<TaskDef> {
        let meter = self.meter.clone();
        vec![TaskDef::cleanup(
            "ai_usage",
            Arc::new(move |_| {
                let meter = meter.clone();
                Box::pin(async move {
                    let forgotten = meter.forget_old().await.map_err(|e| e.to_string())?;
                    Ok(serde_json::json!({"ai_usage_days_forgotten": forgotten}))
                })
            }),
        )]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_trees_are_mirrored() {
        kernel::testing::assert_migration_trees_mirrored(env!("CARGO_MANIFEST_DIR"), "ai");
    }
}
