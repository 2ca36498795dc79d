//! Keel's authentication module: registration, OAuth 2.0 password-flow login issuing HS256 JWT
//! bearer tokens and rotating refresh tokens, the current user, roles and user administration,
//! and the account lifecycle (address verification, password reset) by mail. It is the identity
//! provider: its [`Authenticator`] is what every other module receives at build. It uses a
//! [`Mailer`] late (the comms module's, which itself uses the authenticator): without one, the
//! mails' links are written to the log.
//!
//! Embedding it alone in an actix-web app (lend it a mailer with
//! `Deps::with::<dyn Mailer>(...)`, then `deps.capabilities.seal()` once every module is built):
//!
//! ```no_run
//! use std::sync::Arc;
//! use auth_core::{AuthConfig, AuthModule};
//! use kernel::module::{BodyLimits, BuildModule, Deps, Module, mount};
//! use utoipa_actix_web::AppExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "sqlite://data/app.db";
//! kernel::db::migrate(url, &[auth_core::MIGRATIONS]).await?;
//! let deps = Deps::new(kernel::DbPool::connect(url, 4).await?)?;
//! let auth: Arc<dyn Module> = Arc::new(AuthModule::build(AuthConfig::from_env()?, &deps).await?);
//! actix_web::HttpServer::new(move || {
//!     mount(kernel::http::app(BodyLimits::default()).into_utoipa_app(), &auth).into_app()
//! })
//! .bind(("127.0.0.1", 8000))?
//! .run()
//! .await?;
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
mod domain;
mod error;
mod http;
mod mail;
mod oauth;
mod passwords;
pub mod rate_limit;
mod schema;
mod service;
mod store;
mod tokens;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::capability::{Capabilities, CapabilityId, Use};
use kernel::health::ModuleHealth;
use kernel::http::{describe_form_error, describe_json_error};
use kernel::identity::Identity;
use kernel::mail::Mailer;
use kernel::module::{BuildModule, Deps, Module, ModuleError, Mounts};
use kernel::plans::Entitlements;
use kernel::unit::Detached;
use kernel::{Authenticator, DbPool, MigrationSet};
use utoipa_actix_web::service_config::ServiceConfig;

pub use config::AuthConfig;
pub use error::AuthError;
pub use http::{TokenError, TokenResponse, UserListResponse, UserResponse};
pub use mail::Issued;
pub use mail::templates::PLACEHOLDERS as MAIL_PLACEHOLDERS;
pub use service::{AccessToken, AuthService, Logout, Registration, User, UserPatch};

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/auth");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/auth");

/// The auth module's migrations (tables `users`, `auth_refresh_tokens`, `auth_mail_tokens`).
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "auth",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

/// The assembled module: its service and its HTTP state.
pub struct AuthModule {
    /// Where the routes are mounted (the host's choice, else [`Self::MOUNTS`]).
    mounts: Mounts,
    pool: DbPool,
    /// The service that does the work (for its counters).
    inner: Arc<service::AuthServiceImpl>,
    /// The same, wrapped once: every call through it is a unit of work.
    service: Arc<dyn AuthService>,
    state: web::Data<http::AuthState>,
    identity: web::Data<Identity>,
    json_limit: usize,
}

impl AuthModule {
    /// Where the module mounts its routes unless the host chooses (`Deps::mounted_at`).
    pub const MOUNTS: &'static [&'static str] = &["/api/v1/auth", "/auth"];
}

impl BuildModule for AuthModule {
    const NAME: &'static str = "auth";
    type Settings = AuthConfig;

    fn provides() -> Vec<CapabilityId> {
        vec![CapabilityId::of::<dyn Authenticator>()]
    }

    /// Both used late: their providers (comms, payment) use this module's authenticator at
    /// build. The mailer sends the account mails; the entitlements name the plan in `/me`.
    fn uses() -> Vec<Use> {
        vec![Use::late::<dyn Mailer>(), Use::late::<dyn Entitlements>()]
    }

    fn migrations() -> Option<MigrationSet> {
        Some(MIGRATIONS)
    }

    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        vec![cli::command()]
    }

    /// Builds the module over a migrated pool. With rate limits on, the counters live in the
    /// deployment's Redis when it answers (shared by every instance), else in this process; the
    /// mail limits too (Redis looked for at the first mail asked for). The mail templates of
    /// `AUTH_MAIL_TEMPLATES` are read now: an invalid one stops the start, naming its file.
    async fn build(config: AuthConfig, deps: &Deps) -> Result<Self, ModuleError> {
        if config.secret_generated {
            tracing::warn!(
                "SECRET_KEY is not set: using a random key, tokens end with this process"
            );
        }
        let limiter = match config.rate_limit {
            false => rate_limit::RateLimiter::Off,
            true => rate_limit::RateLimiter::of_deployment(deps).await,
        };
        let keys = tokens::TokenKeys::new(&config.secret_key, config.token_minutes);
        let hasher = passwords::Hasher::new(config.bcrypt_cost, config.bcrypt_concurrency)
            .await
            .map_err(|e| ModuleError::new(Self::NAME, e))?;
        let templates = mail::templates::Templates::load(config.mail_templates.as_deref())
            .map_err(|e| ModuleError::new(Self::NAME, format!("AUTH_MAIL_TEMPLATES: {e}")))?;
        let links = mail::LinkSettings {
            verify_email_url: config.verify_email_url.clone(),
            reset_password_url: config.reset_password_url.clone(),
            verify_lifetime: config.verify_lifetime,
            reset_lifetime: config.reset_lifetime,
        };
        let mails = mail::AccountMails::new(
            deps.pool.clone(),
            templates,
            links,
            deps.late::<dyn Mailer>(),
        );
        let inner = Arc::new(service::AuthServiceImpl::new(service::Parts {
            pool: deps.pool.clone(),
            keys,
            hasher,
            limiter,
            mail_limiter: rate_limit::RateLimiter::of_deployment_later(deps),
            mails,
            lifecycle: service::Lifecycle {
                require_verified_email: config.require_verified_email,
                refresh_lifetime: config.refresh_lifetime,
                mail_limit_per_hour: config.mail_limit_per_hour,
            },
            read_cache: deps.read_cache,
            entitlements: deps.late::<dyn Entitlements>(),
        }));
        // Every call of the handlers, the CLI and the authenticator is a unit of work from here
        // on (the identity extractor's look-up already is one: its call runs inline).
        let service: Arc<dyn AuthService> =
            Arc::new(Detached::new(inner.clone() as Arc<dyn AuthService>));
        let state = web::Data::new(http::AuthState {
            service: service.clone(),
            rate_limit: config.rate_limit,
        });
        let authenticator: Arc<dyn Authenticator> =
            Arc::new(service::TokenAuthenticator(service.clone()));
        Ok(Self {
            mounts: deps.mounts_or(Self::MOUNTS),
            pool: deps.pool.clone(),
            inner,
            service,
            state,
            identity: Identity::new(Some(authenticator)),
            json_limit: deps.limits.json,
        })
    }
}

impl AuthModule {
    /// The service: every operation of the module without HTTP (the CLI's user management),
    /// each call a unit of work.
    pub fn service(&self) -> Arc<dyn AuthService> {
        self.service.clone()
    }

    /// How many bcrypt verifications logins have run (unknown users included).
    pub fn password_checks(&self) -> u64 {
        self.inner.password_checks()
    }

    /// The identity this module lends the others (its [`Capabilities`] entry): an embedder
    /// hands it to another module with `Deps::with_authenticator`.
    pub fn authenticator(&self) -> Arc<dyn Authenticator> {
        Arc::new(service::TokenAuthenticator(self.service.clone()))
    }
}

#[async_trait::async_trait]
impl Module for AuthModule {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// Documented under `/api/v1/auth`; `/auth` answers the same.
    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    /// Body errors in this module list their fields: `{"detail": [{"field", "message"}]}`.
    fn routes(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .app_data(self.identity.clone())
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
            .service(http::update_user)
            .service(http::sessions::refresh)
            .service(http::sessions::logout)
            .service(http::account::request_verification)
            .service(http::account::verify_email)
            .service(http::account::forgot_password)
            .service(http::account::reset_password);
    }

    /// Healthy when the user table can be read.
    async fn health(&self) -> ModuleHealth {
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

    fn provide(&self, capabilities: &mut Capabilities) {
        capabilities.provide::<dyn Authenticator>(self.authenticator());
    }

    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        match name {
            cli::COMMAND => cli::run(&*self.service, matches).await,
            other => Err(format!("the auth module has no command {other}")),
        }
    }
}

/// Hooks for tests of this crate and of the server (`testing` feature).
#[cfg(feature = "testing")]
pub mod testing {
    /// Deletes a user row directly, as another process would; returns the rows deleted.
    pub async fn delete_user(pool: &kernel::DbPool, id: i64) -> Result<usize, crate::AuthError> {
        let mut pooled = pool.get().await?;
        Ok(crate::store::delete(&mut pooled.conn(), id).await?)
    }

    /// Makes every refresh and mail token of a user expired a minute ago; returns the rows
    /// changed.
    pub async fn expire_tokens(
        pool: &kernel::DbPool,
        user_id: i64,
    ) -> Result<usize, crate::AuthError> {
        let mut pooled = pool.get().await?;
        let past = kernel::time::now() - chrono::TimeDelta::minutes(1);
        Ok(crate::store::tokens::expire_all(&mut pooled.conn(), user_id, past).await?)
    }

    /// The stored hashes of a user's refresh and mail tokens (the tests check that no token is
    /// stored as it was handed out).
    pub async fn stored_token_hashes(
        pool: &kernel::DbPool,
        user_id: i64,
    ) -> Result<Vec<String>, crate::AuthError> {
        let mut pooled = pool.get().await?;
        Ok(crate::store::tokens::hashes_of(&mut pooled.conn(), user_id).await?)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_trees_are_mirrored() {
        kernel::testing::assert_migration_trees_mirrored(env!("CARGO_MANIFEST_DIR"), "auth");
    }
}
