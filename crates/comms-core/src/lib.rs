//! Keel's communications module: email through Resend, SMS and voice calls through Twilio, and a
//! message log that the providers' signed delivery webhooks move forward. It lends the other
//! modules a [`Mailer`] (auth's account mails) over its email channel.
//!
//! Embedding it alone in an actix-web app (the sends are open without an authenticator; hand one
//! in with [`Deps::with_authenticator`] to require an active user):
//!
//! ```no_run
//! use std::sync::Arc;
//! use comms_core::{CommsConfig, CommsModule};
//! use kernel::module::{BodyLimits, BuildModule, Deps, Module, mount};
//! use utoipa_actix_web::AppExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "sqlite://data/comms.db";
//! kernel::db::migrate(url, &[comms_core::MIGRATIONS]).await?;
//! let deps = Deps::new(kernel::DbPool::connect(url, 4).await?)?;
//! let config = CommsConfig {
//!     resend_api_key: Some("re_...".into()),
//!     resend_from_email: Some("Keel <hello@example.com>".into()),
//!     ..CommsConfig::default()
//! };
//! let comms: Arc<dyn Module> = Arc::new(CommsModule::build(config, &deps).await?);
//! actix_web::HttpServer::new(move || {
//!     mount(kernel::http::app(BodyLimits::default()).into_utoipa_app(), &comms).into_app()
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
pub mod domain;
mod error;
mod http;
mod mailer;
pub mod providers;
mod schema;
mod service;
mod store;
pub mod webhooks;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::capability::{Capabilities, CapabilityId, Use};
use kernel::health::ModuleHealth;
use kernel::identity::Identity;
use kernel::mail::Mailer;
use kernel::module::{BuildModule, Deps, Module, ModuleError, Mounts};
use kernel::unit::Detached;
use kernel::{Authenticator, MigrationSet};
use utoipa_actix_web::service_config::ServiceConfig;

pub use config::CommsConfig;
pub use domain::Channel;
pub use error::CommsError;
pub use mailer::CommsMailer;
pub use service::{
    CallReceipt, CallRequest, CommsService, EmailReceipt, EmailRequest, EventOutcome, EventReport,
    InboundReport, ListFilter, Message, SmsReceipt, SmsRequest, Suppression, SuppressionFilter,
    TWILIO_INBOUND_ROUTE, TWILIO_STATUS_ROUTE, Viewer,
};

use providers::{Resend, Twilio};
use service::CommsServiceImpl;

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/comms");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/comms");

/// The communications module's migrations (tables `comms_messages`, `comms_suppressions`).
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "comms",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

/// The assembled module: its service and its HTTP state.
pub struct CommsModule {
    /// Where the routes are mounted (the host's choice, else [`Self::MOUNTS`]).
    mounts: Mounts,
    service: Arc<dyn CommsService>,
    state: web::Data<http::CommsState>,
    identity: web::Data<Identity>,
}

impl CommsModule {
    /// Where the module mounts its routes unless the host chooses (`Deps::mounted_at`).
    pub const MOUNTS: &'static [&'static str] = &["/api/v1/comms"];
}

impl BuildModule for CommsModule {
    const NAME: &'static str = "comms";
    type Settings = CommsConfig;

    fn uses() -> Vec<Use> {
        vec![Use::optional::<dyn Authenticator>()]
    }

    /// A mailer over the email channel (Resend), recorded in the message log.
    fn provides() -> Vec<CapabilityId> {
        vec![CapabilityId::of::<dyn Mailer>()]
    }

    fn migrations() -> Option<MigrationSet> {
        Some(MIGRATIONS)
    }

    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        vec![cli::command()]
    }

    /// Builds the module with Resend and Twilio clients over the outbound HTTP client. Channels
    /// whose settings are missing answer 503 naming the setting.
    async fn build(config: CommsConfig, deps: &Deps) -> Result<Self, ModuleError> {
        for channel in Channel::ALL {
            if let Some(setting) = config.missing(channel) {
                tracing::info!(
                    channel = channel.as_str(),
                    "{} is not configured: {setting} is not set",
                    channel.title()
                );
            }
        }
        if deps.authenticator().is_none() {
            tracing::warn!("comms sends are open to anyone: the auth module is not mounted");
        }
        let email = Arc::new(Resend::new(
            deps.http.clone(),
            &config.resend_api_base,
            config.resend_api_key.as_deref().unwrap_or_default(),
            config.timeout,
        ));
        let telephony = Arc::new(Twilio::new(
            deps.http.clone(),
            &config.twilio_api_base,
            config.twilio_account_sid.as_deref().unwrap_or_default(),
            config.twilio_auth_token.as_deref().unwrap_or_default(),
            config.timeout,
        ));
        let mounts = deps.mounts_or(Self::MOUNTS);
        let inner: Arc<dyn CommsService> = Arc::new(CommsServiceImpl::new(
            deps.pool.clone(),
            config,
            email,
            telephony,
            &mounts,
        ));
        // Every call of the handlers, the CLI and the mailer is a unit of work from here on.
        let service: Arc<dyn CommsService> = Arc::new(Detached::new(inner));
        Ok(CommsModule {
            mounts,
            state: web::Data::new(http::CommsState {
                service: service.clone(),
            }),
            service,
            identity: deps.identity(),
        })
    }
}

impl CommsModule {
    /// The service: every operation of the module without HTTP (the CLI uses it), each call a
    /// unit of work.
    pub fn service(&self) -> Arc<dyn CommsService> {
        self.service.clone()
    }

    /// The mailer this module lends the others (its [`Capabilities`] entry): an embedder hands
    /// it to another module with `Deps::with::<dyn Mailer>(...)`. Until the email channel is
    /// configured its sends answer `MailError::NotConfigured` naming the missing setting.
    pub fn mailer(&self) -> Arc<dyn Mailer> {
        Arc::new(CommsMailer(self.service.clone()))
    }
}

#[async_trait::async_trait]
impl Module for CommsModule {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    fn routes(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .app_data(self.identity.clone())
            .service(http::send_email)
            .service(http::send_sms)
            .service(http::make_call)
            .service(http::list_messages)
            .service(http::get_message)
            .service(http::list_suppressions)
            .service(http::remove_suppression)
            .service(http::twilio_status)
            .service(http::twilio_inbound)
            .service(http::resend_webhook)
            .service(http::health)
            .service(http::status)
            .service(http::version);
    }

    /// Healthy when the message log can be read; the detail names the configured channels.
    async fn health(&self) -> ModuleHealth {
        let config = self.service.config();
        let configured: Vec<&str> = Channel::ALL
            .into_iter()
            .filter(|c| config.missing(*c).is_none())
            .map(Channel::as_str)
            .collect();
        let channels = if configured.is_empty() {
            "no channel configured".to_owned()
        } else {
            format!("channels: {}", configured.join(", "))
        };
        match self.service.log_reachable().await {
            Ok(messages) => ModuleHealth::healthy(format!(
                "message log reachable ({messages} messages), {channels}"
            )),
            Err(e) => ModuleHealth::unhealthy(format!("message log unreachable: {e}")),
        }
    }

    fn provide(&self, capabilities: &mut Capabilities) {
        capabilities.provide::<dyn Mailer>(self.mailer());
    }

    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        match name {
            cli::COMMAND => cli::run(&*self.service, matches).await,
            other => Err(format!("the comms module has no command {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_trees_are_mirrored() {
        kernel::testing::assert_migration_trees_mirrored(env!("CARGO_MANIFEST_DIR"), "comms");
    }
}
