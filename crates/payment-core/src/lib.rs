//! Keel's payment module: Stripe checkout, the transactions, subscriptions, disputes and invoices
//! its signed webhook events write, refunds and cancels, Stripe's billing portal, each user seeing
//! only their own rows. Mounted at `/api/v1/payment`, with the built-in return pages at
//! `/payment/success`, `/payment/cancel` and `/payment/return`.

#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
mod error;
mod http;
mod plans;
mod schema;
mod service;
mod store;
pub mod stripe;
mod view;
mod webhook;

use std::sync::Arc;

use actix_web::web;
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use kernel::Authenticator;
use kernel::MigrationSet;
use kernel::capability::{Capabilities, CapabilityId, Use};
use kernel::health::ModuleHealth;
use kernel::identity::Identity;
use kernel::jobs::TaskDef;
use kernel::module::{BuildModule, Deps, Module, ModuleError, Mounts};
use kernel::plans::Entitlements;
use kernel::unit::Detached;
use utoipa_actix_web::service_config::ServiceConfig;

pub use config::PaymentConfig;
pub use error::PaymentError;
pub use service::{
    Caller, Checkout, CheckoutRequest, PaymentService, Portal, Summary, TransactionPage,
    WebhookReceipt,
};
pub use store::{DisputeRow, InvoiceRow, ListedTransaction, SubscriptionRow, TransactionRow};

use service::PaymentServiceImpl;

const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres/payment");
const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite/payment");

/// The payment module's migrations.
pub const MIGRATIONS: MigrationSet = MigrationSet {
    module: "payment",
    postgres: &POSTGRES,
    sqlite: &SQLITE,
};

pub struct PaymentModule {
    /// Where the routes are mounted (the host's choice, else [`Self::MOUNTS`]).
    mounts: Mounts,
    service: Arc<dyn PaymentService>,
    entitlements: Arc<dyn Entitlements>,
    state: web::Data<http::PaymentState>,
    identity: web::Data<Identity>,
}

impl PaymentModule {
    /// Where the module mounts its routes unless the host chooses (`Deps::mounted_at`).
    pub const MOUNTS: &'static [&'static str] = &["/api/v1/payment"];
}

impl BuildModule for PaymentModule {
    const NAME: &'static str = "payment";
    type Settings = PaymentConfig;

    fn uses() -> Vec<Use> {
        vec![Use::optional::<dyn Authenticator>()]
    }

    /// A user's plan, from their active or trialing subscription (see [`Self::entitlements`]).
    fn provides() -> Vec<CapabilityId> {
        vec![CapabilityId::of::<dyn Entitlements>()]
    }

    fn migrations() -> Option<MigrationSet> {
        Some(MIGRATIONS)
    }

    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        vec![cli::command()]
    }

    async fn build(config: PaymentConfig, deps: &Deps) -> Result<Self, ModuleError> {
        if config.secret_key.is_none() {
            tracing::warn!("payment checkout answers 503 until STRIPE_SECRET_KEY is set");
        }
        if config.webhook_secret.is_none() {
            tracing::warn!("every Stripe webhook is refused until STRIPE_WEBHOOK_SECRET is set");
        }
        let entitlements: Arc<dyn Entitlements> = Arc::new(plans::SubscriptionPlans::new(
            deps.pool.clone(),
            config.plans.clone(),
        ));
        let inner = PaymentServiceImpl::new(
            deps.pool.clone(),
            config,
            deps.http.clone(),
            deps.read_cache,
        );
        match inner.render_missing().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(transactions = n, "wrote the JSON of stored transactions"),
            Err(e) => {
                return Err(ModuleError::new(
                    Self::NAME,
                    format!("writing the JSON of stored transactions: {e}"),
                ));
            }
        }
        let inner: Arc<dyn PaymentService> = Arc::new(inner);
        // Every call of the handlers, the CLI and the cleanup task is a unit of work from here on.
        let service: Arc<dyn PaymentService> = Arc::new(Detached::new(inner));
        Ok(PaymentModule {
            mounts: deps.mounts_or(Self::MOUNTS),
            state: web::Data::new(http::PaymentState {
                service: service.clone(),
            }),
            service,
            entitlements,
            identity: deps.identity(),
        })
    }
}

impl PaymentModule {
    /// The service: every operation of the module without HTTP, each call a unit of work.
    pub fn service(&self) -> Arc<dyn PaymentService> {
        self.service.clone()
    }

    /// The plans this module lends the others (its [`Capabilities`] entry): a user's active or
    /// trialing subscription, newest first, gives the plan `PAYMENT_PLANS` names for its price
    /// (else its `plan_name`); without one, the free plan. An embedder hands it to another module
    /// with `Deps::with::<dyn Entitlements>(..)`.
    pub fn entitlements(&self) -> Arc<dyn Entitlements> {
        self.entitlements.clone()
    }
}

#[async_trait::async_trait]
impl Module for PaymentModule {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    fn routes(&self, cfg: &mut ServiceConfig) {
        cfg.app_data(self.state.clone())
            .app_data(self.identity.clone())
            .service(http::checkout::checkout)
            .service(http::transactions::transactions)
            .service(http::transactions::transaction)
            .service(http::transactions::refund)
            .service(http::subscriptions::subscriptions)
            .service(http::subscriptions::cancel)
            .service(http::disputes::disputes)
            .service(http::disputes::dispute)
            .service(http::invoices::invoices)
            .service(http::portal::portal)
            .service(http::status::summary)
            .service(http::webhook::webhook);
    }

    fn side_mount(&self) -> Option<&'static str> {
        Some("/payment")
    }

    fn side_routes(&self, cfg: &mut ServiceConfig) {
        cfg.service(http::pages::success_page)
            .service(http::pages::cancel_page)
            .service(http::pages::return_page);
    }

    /// Healthy when the payment rows can be read (like comms, a provider not configured yet is
    /// said in the detail, not counted against the service). `/health` is public: the detail
    /// names no figure of the deployment's business.
    async fn health(&self) -> ModuleHealth {
        match self.service.summary(Caller::Anyone).await {
            Ok(s) if s.enabled => ModuleHealth::healthy(format!(
                "stripe ({})",
                if s.is_test_mode { "test mode" } else { "live" },
            )),
            Ok(_) => ModuleHealth::healthy(
                "payment store reachable; STRIPE_SECRET_KEY is not set".to_owned(),
            ),
            Err(e) => ModuleHealth::unhealthy(format!("payment store unreachable: {e}")),
        }
    }

    fn provide(&self, capabilities: &mut Capabilities) {
        capabilities.provide::<dyn Entitlements>(self.entitlements());
    }

    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        match name {
            cli::COMMAND => cli::run(&*self.service, matches).await,
            other => Err(format!("the payment module has no command {other}")),
        }
    }

    /// Forgets processed event ids older than Stripe's retry window (`cleanup_expired_data`).
    fn tasks(&self) -> Vec<TaskDef> {
        let service = self.service.clone();
        vec![TaskDef::cleanup(
            "payment_events",
            Arc::new(move |_| {
                let service = service.clone();
                Box::pin(async move {
                    let forgotten = service
                        .forget_old_events()
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(serde_json::json!({"payment_events_forgotten": forgotten}))
                })
            }),
        )]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_trees_are_mirrored() {
        kernel::testing::assert_migration_trees_mirrored(env!("CARGO_MANIFEST_DIR"), "payment");
    }
}
