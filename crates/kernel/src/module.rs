//! The module seam: what a module is ([`Module`]), how it is built ([`BuildModule`]) and what it
//! is handed when it is built ([`Deps`]).
//!
//! A server composes modules by looping over a list of [`ModuleEntry`] values (one per compiled
//! module, made with [`entry`]): it loads each module's settings, runs its migrations, builds it
//! with the shared dependencies, mounts its routes, asks it for health and readiness, and
//! registers the background tasks it declares with the module that runs tasks. What modules lend
//! each other crosses as capabilities ([`crate::capability`]): each module declares what it
//! provides and uses, the build order follows from that ([`build_order`]: providers first), and
//! each module finds what the modules before it provided in its [`Deps`].

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix_web::dev::{ServiceFactory, ServiceRequest};
use actix_web::web;
use utoipa_actix_web::UtoipaApp;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::capability::{Capabilities, Capability, CapabilityId, CompositionError, Declared, Use};
use crate::health::ModuleHealth;
use crate::identity::{Authenticator, Identity};
use crate::jobs::TaskDef;
#[cfg(feature = "redis")]
use crate::redis::SharedRedis;
use crate::{ConfigError, DbPool, MigrationSet};

/// Body limits every module applies to the bodies it parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// JSON and form bodies (`MAX_JSON_BYTES`, default 1 MiB).
    pub json: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits {
            json: crate::http::DEFAULT_MAX_JSON_BYTES,
        }
    }
}

/// What every module is handed when it is built.
#[derive(Clone)]
pub struct Deps {
    /// The database, migrated for the module.
    pub pool: DbPool,
    /// What the modules built before this one provide (see [`crate::capability`]): read with
    /// [`Deps::get`].
    pub capabilities: Capabilities,
    /// The outbound HTTP client for provider calls (see [`crate::http_client`]): providers keep
    /// it and take the calling thread's client ([`HttpClient::get`](crate::http_client::HttpClient::get))
    /// on each call. A host with a `reqwest::Client` of its own hands it over with `.into()`.
    #[cfg(feature = "http-client")]
    pub http: crate::http_client::HttpClient,
    /// Body limits.
    pub limits: BodyLimits,
    /// The deployment's Redis, for state that several instances must share.
    #[cfg(feature = "redis")]
    pub redis: SharedRedis,
    /// Whether hot public reads may be served from an in-process cache (`READ_CACHE`, see
    /// [`crate::cache`]).
    pub read_cache: bool,
    /// Where the host mounts the module being built ([`Deps::mounted_at`]); `None`: where the
    /// module mounts itself by default.
    pub mounts: Option<Mounts>,
}

/// Where a module's routes are mounted. The first prefix is the one in the OpenAPI document and
/// in the URLs the module writes itself (the status callback comms gives Twilio); the others
/// answer the same routes, undocumented (aliases). A host chooses them with [`Deps::mounted_at`];
/// otherwise each module has its own (`/api/v1/blog`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounts(Arc<[String]>);

impl Mounts {
    /// `prefixes`, each written `/a/b`: a missing leading `/` is added and a trailing one
    /// dropped (`""` or `"/"` is the root).
    pub fn new(prefixes: &[&str]) -> Mounts {
        Mounts(
            prefixes
                .iter()
                .map(|p| {
                    let p = p.trim().trim_end_matches('/');
                    match p {
                        "" => String::new(),
                        p if p.starts_with('/') => p.to_owned(),
                        p => format!("/{p}"),
                    }
                })
                .collect(),
        )
    }

    /// The documented prefix (the first): `/api/v1/comms`.
    pub fn documented(&self) -> &str {
        self.0.first().map_or("", String::as_str)
    }

    /// Every prefix, the documented one first.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// The path of one of the module's routes under the documented prefix:
    /// `mounts.path("/webhooks/twilio/status")`.
    pub fn path(&self, route: &str) -> String {
        format!("{}{route}", self.documented())
    }
}

impl Deps {
    /// Dependencies with no capability, no Redis and default limits: a module used alone.
    pub fn new(pool: DbPool) -> Result<Deps, ConfigError> {
        Ok(Deps {
            pool,
            capabilities: Capabilities::default(),
            #[cfg(feature = "http-client")]
            http: crate::http_client::HttpClientSettings::default().build()?,
            limits: BodyLimits::default(),
            #[cfg(feature = "redis")]
            redis: SharedRedis::none(),
            read_cache: true,
            mounts: None,
        })
    }

    /// The same dependencies, for building a module whose routes the host mounts at `prefixes`
    /// (the first one documented) instead of the module's own: set it before each module's
    /// build, since every module reads it.
    pub fn mounted_at(mut self, prefixes: &[&str]) -> Deps {
        self.mounts = Some(Mounts::new(prefixes));
        self
    }

    /// Where the module being built is mounted: the host's choice, else `defaults`.
    pub fn mounts_or(&self, defaults: &[&str]) -> Mounts {
        self.mounts.clone().unwrap_or_else(|| Mounts::new(defaults))
    }

    /// Capability `C`, when a module built before provides it.
    pub fn get<C: Capability + ?Sized>(&self) -> Option<Arc<C>> {
        self.capabilities.get::<C>()
    }

    /// A handle on capability `C` for a late use ([`Use::late`]): it answers once every module
    /// is built. An embedder that builds modules by hand calls `deps.capabilities.seal()` when
    /// it has built them all.
    pub fn late<C: Capability + ?Sized>(&self) -> crate::capability::Late<C> {
        self.capabilities.late::<C>()
    }

    /// The same dependencies with capability `C` (an embedder lending a module what another
    /// module would: `deps.with::<dyn Authenticator>(auth.authenticator())`).
    pub fn with<C: Capability + ?Sized>(mut self, value: Arc<C>) -> Deps {
        self.capabilities.provide::<C>(value);
        self
    }

    /// The same dependencies with an identity provider.
    pub fn with_authenticator(self, authenticator: Arc<dyn Authenticator>) -> Deps {
        self.with::<dyn Authenticator>(authenticator)
    }

    /// The authenticator, when an identity provider is mounted; `None` makes the module open
    /// by design.
    pub fn authenticator(&self) -> Option<Arc<dyn Authenticator>> {
        self.get::<dyn Authenticator>()
    }

    /// The identity of the module's routes, to register as app data of its scope (the
    /// [`crate::identity`] extractors read it).
    pub fn identity(&self) -> web::Data<Identity> {
        Identity::new(self.authenticator())
    }
}

/// A module failed to build.
#[derive(Debug, thiserror::Error)]
#[error("module {module} failed to start: {message}")]
pub struct ModuleError {
    pub module: &'static str,
    pub message: String,
}

impl ModuleError {
    pub fn new(module: &'static str, message: impl std::fmt::Display) -> Self {
        ModuleError {
            module,
            message: message.to_string(),
        }
    }
}

/// A built module, as the server sees it.
#[async_trait::async_trait]
pub trait Module: Send + Sync + 'static {
    /// The module's name in `KEEL_MODULES`, `/health` and logs.
    fn name(&self) -> &'static str;

    /// Where the routes are mounted (see [`Mounts`]): what [`Deps::mounts_or`] answered when
    /// the module was built.
    fn mounts(&self) -> Mounts;

    /// Registers the routes (with their OpenAPI) and the app data they need, including the
    /// identity from [`Deps::identity`].
    fn routes(&self, cfg: &mut ServiceConfig);

    /// A second prefix with routes of its own, outside the API (payment's `/payment/success` and
    /// `/payment/cancel` pages): the prefix, registered with [`side_routes`](Self::side_routes).
    fn side_mount(&self) -> Option<&'static str> {
        None
    }

    /// The routes under [`side_mount`](Self::side_mount).
    fn side_routes(&self, _cfg: &mut ServiceConfig) {}

    /// Whether a handler of this module holds a request open on purpose and stops when its
    /// client leaves ([`crate::peer::PeerConnection::closed`]). The server records each accepted
    /// connection for them, at the cost of a second file descriptor per connection, only when a
    /// mounted module says so.
    fn watches_clients(&self) -> bool {
        false
    }

    /// The module's entry in `GET /health`.
    async fn health(&self) -> ModuleHealth;

    /// `Err(why)` when a dependency the module cannot serve without does not answer
    /// (`GET /health/ready`). The database is checked by the server.
    async fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// Sets the module's gauges that are read rather than counted (the task queues' depths),
    /// through [`crate::metrics`]. Called before each scrape of `GET /metrics`, only when metrics
    /// are on; keep it short (a scrape waits for it).
    async fn sample_metrics(&self) {}

    /// The background tasks the module runs (registered with the task runner before any worker
    /// starts, in `keel serve` and in `keel worker`).
    fn tasks(&self) -> Vec<TaskDef> {
        Vec::new()
    }

    /// Puts the capabilities this module provides (those of [`BuildModule::provides`]) into
    /// `capabilities`, for the modules built after it.
    fn provide(&self, capabilities: &mut Capabilities) {
        let _ = capabilities;
    }

    /// Runs one of the module's command-line commands (declared by
    /// [`BuildModule::commands`]); `matches` are the matches of that command.
    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        let _ = matches;
        Err(format!("module {} has no command {name}", self.name()))
    }
}

/// How a module is configured and built: implemented by each module's type.
pub trait BuildModule: Module + Sized {
    /// The module's name in `KEEL_MODULES`.
    const NAME: &'static str;

    /// The module's settings.
    type Settings: ModuleConfig;

    /// Its database migrations, when it has tables.
    fn migrations() -> Option<MigrationSet> {
        None
    }

    /// Its command-line commands (`keel <command> ...`).
    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        Vec::new()
    }

    /// The capabilities it lends the others ([`Module::provide`] puts them in the registry):
    /// `vec![CapabilityId::of::<dyn Authenticator>()]`.
    fn provides() -> Vec<CapabilityId> {
        Vec::new()
    }

    /// The capabilities it uses, required or optional: built after their providers.
    fn uses() -> Vec<Use> {
        Vec::new()
    }

    /// Builds the module over a migrated pool and the shared dependencies.
    fn build(
        settings: Self::Settings,
        deps: &Deps,
    ) -> impl Future<Output = Result<Self, ModuleError>> + Send;
}

/// A module's settings: read from the environment by the server, built in code by tests and
/// embedders (`Default` never reads the environment).
pub trait ModuleConfig: Clone + Default + Send + Sync + std::fmt::Debug + 'static {
    /// Reads the settings; a value that is present but invalid is an error naming its setting.
    /// Values that are valid but unsafe in production are not refused here: they are reported by
    /// [`production_problems`](Self::production_problems), so that every one is named at once.
    fn from_env() -> Result<Self, ConfigError>;

    /// What makes these settings unsafe in production, one error per problem: the setting's name
    /// and what to set instead. With `APP_ENV=production` the server refuses to start while any
    /// module reports one (it lists them all, with its own, through
    /// [`crate::config::refuse_unsafe`]). None by default.
    fn production_problems(&self, deployment: &Deployment) -> Vec<ConfigError> {
        let _ = deployment;
        Vec::new()
    }
}

/// What a module's production check may know beyond its own settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deployment {
    /// Whether an identity provider (the auth module) is mounted.
    pub identity: bool,
}

type BuildFuture<'a> = Pin<Box<dyn Future<Output = Result<Arc<dyn Module>, ModuleError>> + 'a>>;

/// One compiled module, as the server's list holds it: [`entry::<MyModule>()`](entry).
#[derive(Clone, Copy)]
pub struct ModuleEntry {
    pub name: &'static str,
    provided: fn() -> Vec<CapabilityId>,
    used: fn() -> Vec<Use>,
    pub migrations: Option<MigrationSet>,
    #[cfg(feature = "cli")]
    pub commands: fn() -> Vec<clap::Command>,
    load: fn(&mut Settings) -> Result<(), ConfigError>,
    defaults: fn(&mut Settings),
    production: fn(&Settings, &Deployment) -> Vec<ConfigError>,
    build: for<'a> fn(&'a Settings, &'a Deps) -> BuildFuture<'a>,
}

/// The list entry of module `M`.
pub fn entry<M: BuildModule>() -> ModuleEntry {
    ModuleEntry {
        name: M::NAME,
        provided: M::provides,
        used: M::uses,
        migrations: M::migrations(),
        #[cfg(feature = "cli")]
        commands: M::commands,
        load: |settings| {
            settings.set(M::Settings::from_env()?);
            Ok(())
        },
        defaults: |settings| settings.set(M::Settings::default()),
        production: |settings, deployment| {
            settings
                .get::<M::Settings>()
                .map(|own| own.production_problems(deployment))
                .unwrap_or_default()
        },
        build: |settings, deps| {
            Box::pin(async move {
                let own = settings.get::<M::Settings>().cloned().unwrap_or_default();
                let module = M::build(own, deps).await?;
                Ok(Arc::new(module) as Arc<dyn Module>)
            })
        },
    }
}

impl ModuleEntry {
    /// Whether this module provides capability `C`.
    pub fn provides<C: Capability + ?Sized>(&self) -> bool {
        (self.provided)().contains(&CapabilityId::of::<C>())
    }

    /// Its declarations, as [`crate::capability::build_order`] reads them.
    pub fn declared(&self) -> Declared {
        Declared {
            module: self.name,
            provides: (self.provided)(),
            uses: (self.used)(),
        }
    }
    /// Reads this module's settings from the environment into `settings`.
    pub fn load_settings(&self, settings: &mut Settings) -> Result<(), ConfigError> {
        (self.load)(settings)
    }

    /// Puts this module's default settings into `settings` (no environment read).
    pub fn default_settings(&self, settings: &mut Settings) {
        (self.defaults)(settings)
    }

    /// What makes this module's settings in `settings` unsafe in production (see
    /// [`ModuleConfig::production_problems`]); nothing when they were never loaded.
    pub fn production_problems(
        &self,
        settings: &Settings,
        deployment: &Deployment,
    ) -> Vec<ConfigError> {
        (self.production)(settings, deployment)
    }

    /// Builds the module with its settings from `settings` (defaults when absent).
    pub async fn build(
        &self,
        settings: &Settings,
        deps: &Deps,
    ) -> Result<Arc<dyn Module>, ModuleError> {
        (self.build)(settings, deps).await
    }
}

impl std::fmt::Debug for ModuleEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let declared = self.declared();
        f.debug_struct("ModuleEntry")
            .field("name", &self.name)
            .field("provides", &declared.provides)
            .field("uses", &declared.uses)
            .finish_non_exhaustive()
    }
}

/// Mounts a module's routes on an app: under its first prefix with their OpenAPI, and under
/// every other prefix as undocumented aliases.
pub fn mount<T>(app: UtoipaApp<T>, module: &Arc<dyn Module>) -> UtoipaApp<T>
where
    T: ServiceFactory<ServiceRequest, Config = (), Error = actix_web::Error, InitError = ()>,
{
    let mounts = module.mounts();
    let mut prefixes = mounts.iter();
    let Some(first) = prefixes.next() else {
        return app;
    };
    let documented = module.clone();
    let mut app = app.service(
        utoipa_actix_web::scope::scope(first).configure(move |cfg| documented.routes(cfg)),
    );
    for alias in prefixes {
        let module = module.clone();
        app = app.map(|app| {
            app.service(
                web::scope(alias).configure(move |c| module.routes(&mut ServiceConfig::new(c))),
            )
        });
    }
    if let Some(side) = module.side_mount() {
        let module = module.clone();
        app = app.service(
            utoipa_actix_web::scope::scope(side).configure(move |cfg| module.side_routes(cfg)),
        );
    }
    app
}

/// The entries in build order: every module after the providers of the capabilities it uses,
/// otherwise as listed. A required capability no entry provides, two providers of one
/// capability, or a cycle is an error naming the modules.
pub fn build_order(entries: &[ModuleEntry]) -> Result<Vec<ModuleEntry>, CompositionError> {
    let declared: Vec<Declared> = entries.iter().map(ModuleEntry::declared).collect();
    Ok(crate::capability::build_order(&declared)?
        .into_iter()
        .map(|i| entries[i])
        .collect())
}

trait AnySetting: Any + Send + Sync + std::fmt::Debug {
    fn clone_box(&self) -> Box<dyn AnySetting>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync + std::fmt::Debug> AnySetting for T {
    fn clone_box(&self) -> Box<dyn AnySetting> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Every module's settings, one value per settings type.
#[derive(Default)]
pub struct Settings(HashMap<TypeId, Box<dyn AnySetting>>);

impl Settings {
    pub fn set<T: ModuleConfig>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Box::new(value));
    }

    pub fn get<T: ModuleConfig>(&self) -> Option<&T> {
        self.0
            .get(&TypeId::of::<T>())
            .and_then(|b| (**b).as_any().downcast_ref())
    }

    /// The settings of type `T`, inserted with their defaults when absent.
    pub fn get_mut<T: ModuleConfig>(&mut self) -> &mut T {
        let slot = self
            .0
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()));
        if !(**slot).as_any().is::<T>() {
            *slot = Box::new(T::default());
        }
        match (**slot).as_any_mut().downcast_mut::<T>() {
            Some(value) => value,
            None => unreachable!("the slot was just filled with a T"),
        }
    }
}

impl Clone for Settings {
    fn clone(&self) -> Self {
        Settings(
            self.0
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
        )
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.values().map(|v| &**v))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Demo {
        level: u8,
    }

    impl ModuleConfig for Demo {
        fn from_env() -> Result<Self, ConfigError> {
            Ok(Demo { level: 7 })
        }
    }

    #[test]
    fn mounts_are_written_one_way_and_the_host_choice_wins() {
        let mounts = Mounts::new(&["messaging/", " /internal/messaging", "/", ""]);
        assert_eq!(
            mounts.iter().collect::<Vec<_>>(),
            ["/messaging", "/internal/messaging", "", ""]
        );
        assert_eq!(mounts.documented(), "/messaging");
        assert_eq!(
            mounts.path("/webhooks/twilio/status"),
            "/messaging/webhooks/twilio/status"
        );
        assert_eq!(Mounts::new(&[]).path("/x"), "/x");
    }

    #[test]
    fn settings_hold_one_value_per_type() {
        let mut settings = Settings::default();
        assert!(settings.get::<Demo>().is_none());
        settings.get_mut::<Demo>().level = 3;
        let copy = settings.clone();
        settings.set(Demo { level: 9 });
        assert_eq!(copy.get::<Demo>(), Some(&Demo { level: 3 }));
        assert_eq!(settings.get::<Demo>(), Some(&Demo { level: 9 }));
    }

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Guarded {
        open: bool,
    }

    impl ModuleConfig for Guarded {
        fn from_env() -> Result<Self, ConfigError> {
            Ok(Guarded::default())
        }

        fn production_problems(&self, deployment: &Deployment) -> Vec<ConfigError> {
            if self.open && !deployment.identity {
                vec![ConfigError::new("GUARDED_OPEN", "set false")]
            } else {
                Vec::new()
            }
        }
    }

    struct GuardedModule;

    #[async_trait::async_trait]
    impl Module for GuardedModule {
        fn name(&self) -> &'static str {
            "guarded"
        }
        fn mounts(&self) -> Mounts {
            Mounts::new(&[])
        }
        fn routes(&self, _cfg: &mut ServiceConfig) {}
        async fn health(&self) -> ModuleHealth {
            ModuleHealth::healthy("ok")
        }
    }

    impl BuildModule for GuardedModule {
        const NAME: &'static str = "guarded";
        type Settings = Guarded;

        async fn build(_: Guarded, _: &Deps) -> Result<Self, ModuleError> {
            Ok(GuardedModule)
        }
    }

    #[test]
    fn production_problems_come_from_the_loaded_settings() {
        let entry = entry::<GuardedModule>();
        let problems = |settings: &Settings, identity: bool| -> Vec<String> {
            entry
                .production_problems(settings, &Deployment { identity })
                .into_iter()
                .map(|e| e.setting)
                .collect()
        };
        let mut settings = Settings::default();
        assert!(problems(&settings, false).is_empty(), "nothing loaded");
        entry.default_settings(&mut settings);
        assert!(problems(&settings, false).is_empty(), "the defaults");
        settings.set(Guarded { open: true });
        assert_eq!(problems(&settings, false), ["GUARDED_OPEN"]);
        assert!(problems(&settings, true).is_empty());
        // Settings without a check of their own report nothing.
        assert!(
            Demo { level: 1 }
                .production_problems(&Deployment::default())
                .is_empty()
        );
    }
}
