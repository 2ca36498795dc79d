//! Keel's authentication module: registration, OAuth 2.0 password-flow login issuing HS256 JWT
//! bearer tokens, the current user, roles and user administration.
//!
//! Embedding it: open a [`kernel::DbPool`], run [`MIGRATIONS`], build an [`AuthModule`], mount its
//! routes with [`AuthModule::configure`] under a scope of your choice, and hand
//! [`AuthModule::authenticator`] to the other modules.

pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod passwords;
pub mod rate_limit;
pub mod schema;
pub mod service;
pub mod store;
pub mod tokens;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::health::ModuleHealth;
use kernel::http::{describe_form_error, describe_json_error};
use kernel::{Authenticator, DbPool, MigrationSet};
use utoipa_actix_web::service_config::ServiceConfig;

pub use config::AuthConfig;
pub use error::AuthError;
pub use service::{
    AuthService, AuthServiceImpl, Registration, TokenAuthenticator, User, UserPatch,
};

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/auth");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/auth");

/// The auth module's migrations (table `users`).
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "auth",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

/// The assembled module: its service and its HTTP state.
pub struct AuthModule {
    pool: DbPool,
    service: Arc<AuthServiceImpl>,
    state: web::Data<http::AuthState>,
    json_limit: usize,
}

impl AuthModule {
    /// Builds the module over a migrated pool. `redis` holds rate-limit counters when rate limits
    /// are on (shared by every instance); without it they are counted in this process.
    pub async fn build(
        pool: DbPool,
        config: &AuthConfig,
        redis: Option<deadpool_redis::Pool>,
        json_limit: usize,
    ) -> Result<Self, AuthError> {
        if config.secret_generated {
            tracing::warn!(
                "SECRET_KEY is not set: using a random key, tokens end with this process"
            );
        }
        let limiter = match (config.rate_limit, redis) {
            (false, _) => rate_limit::RateLimiter::Off,
            (true, Some(redis)) => rate_limit::RateLimiter::Redis(redis),
            (true, None) => rate_limit::RateLimiter::memory(),
        };
        let keys = tokens::TokenKeys::new(&config.secret_key, config.token_minutes);
        let hasher = passwords::Hasher::new(config.bcrypt_cost, config.bcrypt_concurrency).await?;
        let service = Arc::new(AuthServiceImpl::new(pool.clone(), keys, hasher, limiter));
        let state = web::Data::new(http::AuthState {
            service: service.clone(),
            rate_limit: config.rate_limit,
        });
        Ok(Self {
            pool,
            service,
            state,
            json_limit,
        })
    }

    pub fn service(&self) -> Arc<dyn AuthService> {
        self.service.clone()
    }

    /// How many bcrypt verifications logins have run (unknown users included).
    pub fn password_checks(&self) -> u64 {
        self.service.password_checks()
    }

    /// The identity provider for the other modules.
    pub fn authenticator(&self) -> Arc<dyn Authenticator> {
        Arc::new(TokenAuthenticator(self.service.clone()))
    }

    /// Registers the module's routes and app data. Body errors in this module list their fields:
    /// `{"detail": [{"field", "message"}]}`.
    pub fn configure(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .app_data(
                web::JsonConfig::default()
                    .limit(self.json_limit)
                    .error_handler(|e, _| describe_json_error(&e).into_field_list_error().into()),
            )
            .app_data(
                web::FormConfig::default()
                    .limit(self.json_limit)
                    .error_handler(|e, _| describe_form_error(&e).into_field_list_error().into()),
            )
            .service(http::register)
            .service(http::token)
            .service(http::me)
            .service(http::list_users)
            .service(http::update_user);
    }

    /// Healthy when the user table can be read.
    pub async fn health(&self) -> ModuleHealth {
        let result = async {
            let mut pooled = self.pool.get().await?;
            store::list(&mut pooled.conn(), 0, 1).await?;
            Ok::<_, AuthError>(())
        }
        .await;
        match result {
            Ok(()) => ModuleHealth::healthy("user store reachable"),
            Err(e) => ModuleHealth::unhealthy(format!("user store unreachable: {e}")),
        }
    }
}
