//! The composed application: a loop over the enabled modules that migrates, builds, mounts and
//! registers them, then one actix app.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_http::error::DispatchError;
use actix_http::{HttpService, KeepAlive};
use actix_service::{IntoServiceFactory, ServiceFactoryExt, fn_service, map_config};
use actix_web::dev::{AppConfig, Server};
use actix_web::http::header;
use actix_web::middleware::{Compress, Condition, from_fn};
use actix_web::{App, HttpResponse, web};
use kernel::Authenticator;
use kernel::capability::Capabilities;
use kernel::jobs::{RunningWorker, TaskRunner};
use kernel::module::{BodyLimits, Deps, Module, ModuleEntry, ModuleError, build_order, mount};
use kernel::redis::SharedRedis;
use kernel::{DbPool, MigrationSet, http};
use tokio::net::TcpStream;
use tracing_actix_web::TracingLogger;
use utoipa::OpenApi;
use utoipa_actix_web::AppExt;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::Config;
use crate::health;
use crate::listener::{self, ParseErrorBodies};
use crate::metrics::{self, Exporter, MetricsServer};
use crate::modules;
use crate::telemetry::RequestSpan;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] kernel::ConfigError),
    #[error(transparent)]
    Db(#[from] kernel::DbError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Module(#[from] ModuleError),
    #[error("the modules cannot be composed: {0}")]
    Composition(kernel::capability::CompositionError),
    #[error("cannot start metrics (METRICS_ENABLED): {0}")]
    Metrics(String),
}

/// The enabled modules' list entries, in list (mounting) order.
pub fn enabled(config: &Config) -> Vec<ModuleEntry> {
    modules::compiled()
        .into_iter()
        .filter(|e| config.is_enabled(e.name))
        .collect()
}

/// The migration sets of the enabled modules, in order.
pub fn migration_sets(config: &Config) -> Vec<MigrationSet> {
    enabled(config)
        .iter()
        .filter_map(|e| e.migrations)
        .collect()
}

/// Applies the enabled modules' migrations, then opens the pool.
pub async fn open_database(config: &Config) -> Result<DbPool, StartError> {
    kernel::db::migrate(&config.database_url, &migration_sets(config)).await?;
    let timeout = std::time::Duration::from_secs(config.db_timeout_seconds);
    Ok(DbPool::connect_with_timeout(&config.database_url, config.db_pool_size, timeout).await?)
}

/// The enabled modules, built and wired: what the server, the worker and the CLI run.
pub struct Composed {
    pub pool: DbPool,
    /// In list (mounting) order.
    pub modules: Vec<Arc<dyn Module>>,
    /// What the modules lend each other.
    pub capabilities: Capabilities,
    /// The module that runs background tasks, when one is enabled.
    pub runner: Option<Arc<dyn TaskRunner>>,
}

impl Composed {
    /// Whether an identity provider is mounted (routes then declare and enforce bearer tokens).
    pub fn has_identity(&self) -> bool {
        self.capabilities.has::<dyn Authenticator>()
    }

    /// The built module named `name`.
    pub fn module(&self, name: &str) -> Option<&Arc<dyn Module>> {
        self.modules.iter().find(|m| m.name() == name)
    }
}

/// Builds `entries` over a migrated pool, each after the providers of the capabilities it uses
/// ([`build_order`]), each handed what the modules before it provide; then every module's tasks
/// are registered with the task runner, when a module provides one.
pub async fn compose(
    config: &Config,
    pool: DbPool,
    entries: &[ModuleEntry],
) -> Result<Composed, StartError> {
    let mut deps = Deps {
        pool: pool.clone(),
        capabilities: Capabilities::default(),
        http: kernel::http_client::HttpClientSettings::default().build()?,
        limits: BodyLimits {
            json: config.max_json_bytes,
        },
        redis: SharedRedis::new(&config.redis_url, config.redis_db),
        read_cache: config.read_cache,
        mounts: None,
    };
    let mut built: Vec<(usize, Arc<dyn Module>)> = Vec::new();
    for entry in build_order(entries).map_err(StartError::Composition)? {
        let module = entry.build(&config.settings, &deps).await?;
        module.provide(&mut deps.capabilities);
        let position = entries.iter().position(|e| e.name == entry.name);
        built.push((position.unwrap_or(usize::MAX), module));
    }
    deps.capabilities.seal();
    let runner = deps.get::<dyn TaskRunner>();
    built.sort_by_key(|(position, _)| *position);
    let modules: Vec<Arc<dyn Module>> = built.into_iter().map(|(_, m)| m).collect();
    for module in &modules {
        let tasks = module.tasks();
        let Some(runner) = &runner else {
            if !tasks.is_empty() {
                tracing::warn!(
                    module = module.name(),
                    tasks = tasks.len(),
                    "no task runner is mounted (the tasks module): this module's background tasks will not run"
                );
            }
            continue;
        };
        for task in tasks {
            runner
                .register(task)
                .map_err(|e| ModuleError::new(module.name(), e))?;
        }
    }
    if let Some(runner) = &runner {
        runner
            .check_registered()
            .map_err(|e| ModuleError::new("tasks", e))?;
    }
    Ok(Composed {
        pool,
        modules,
        capabilities: deps.capabilities,
        runner,
    })
}

/// Migrates and builds the enabled modules.
pub async fn build_modules(config: &Config) -> Result<Composed, StartError> {
    let pool = open_database(config).await?;
    compose(config, pool, &enabled(config)).await
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Keel", description = "Keel: a modular HTTP JSON service."),
    paths(health::health, health::live, health::ready)
)]
struct ApiDoc;

/// A running server: its port and the future that runs it until SIGTERM/SIGINT.
pub struct Application {
    port: u16,
    server: Server,
    /// The embedded task worker of `keel serve` (`WORKER_EMBEDDED`).
    worker: Option<Box<dyn RunningWorker>>,
    /// The server of `/metrics` on `METRICS_ADDR`.
    metrics: Option<MetricsServer>,
}

impl Application {
    /// Migrates, builds the modules and binds `HOST:PORT` (port 0 picks a free one).
    pub async fn build(config: Config) -> Result<Application, StartError> {
        kernel::init_crypto();
        let composed = Arc::new(build_modules(&config).await?);
        let addr = format!("{}:{}", config.host, config.port);
        let listener = crate::listener::bind(&addr).map_err(|source| StartError::Bind {
            addr: addr.clone(),
            source,
        })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?;
        let port = local_addr.port();
        // Every module's tasks are registered by now: the worker sees them all.
        let worker = composed
            .runner
            .as_ref()
            .and_then(|r| r.start_embedded_worker());
        let workers = config.http_workers;
        let shutdown_timeout = config.shutdown_timeout_seconds;
        // A duplicate descriptor per connection, kept only for modules that use it.
        let watch_clients = composed.modules.iter().any(|m| m.watches_clients());
        let state = web::Data::from(composed);
        let exporter = config.metrics_enabled.then(metrics::install).transpose()?;
        // `/metrics` on its own server when METRICS_ADDR is set, else on the main port.
        let (metrics_server, metrics_route) = match (exporter, &config.metrics_addr) {
            (Some(exporter), Some(addr)) => (
                Some(MetricsServer::start(addr, state.clone(), exporter)?),
                None,
            ),
            (exporter, _) => (None, exporter.map(web::Data::new)),
        };
        let config = Arc::new(config);
        // The server that `actix_web::HttpServer::listen` would build, with each accepted
        // connection wrapped in `ParseErrorBodies` (which `HttpServer` has no hook for). The
        // settings are `HttpServer`'s defaults: keep-alive 5 s, client request timeout 5 s, client
        // disconnect timeout 1 s, TCP_NODELAY not set (as `HttpServer` leaves it), actix-server's
        // connection limit, and graceful shutdown on SIGTERM/SIGINT within `shutdown_timeout`
        // that also closes idle keep-alive connections.
        let builder = Server::build();
        let shutdown = builder.graceful_shutdown_signal();
        // The factory runs once on each worker thread as it starts: each takes its own part of
        // the PostgreSQL pool (`kernel::db::pin_thread`).
        let started = Arc::new(AtomicUsize::new(0));
        let server = builder
            .workers(workers)
            .shutdown_timeout(shutdown_timeout)
            .listen("keel", listener, move || {
                kernel::db::pin_thread(started.fetch_add(1, Ordering::Relaxed));
                // The head and URL limits are the innermost middleware: they still run before
                // routing, and their 431 and 414 get the request id, the log line, CORS headers
                // and metrics.
                let app = app(&config, &state, metrics_route.as_ref())
                    .wrap(from_fn(listener::limit_head))
                    .wrap(Compress::default())
                    .wrap(Condition::new(
                        !config.cors_origins.is_empty(),
                        cors(&config.cors_origins),
                    ))
                    .wrap(from_fn(http::json_errors))
                    .wrap(TracingLogger::<RequestSpan>::new())
                    .wrap(from_fn(http::request_id))
                    .wrap(from_fn(kernel::client_addr::middleware))
                    .wrap(Condition::new(
                        config.metrics_enabled,
                        from_fn(metrics::record),
                    ));
                let shutdown = shutdown.clone();
                let http = HttpService::build()
                    .graceful_shutdown_signal(move || {
                        let shutdown = shutdown.clone();
                        async move { shutdown.notified().await }
                    })
                    .keep_alive(KeepAlive::Timeout(Duration::from_secs(5)))
                    .client_request_timeout(crate::listener::REQUEST_HEAD_TIMEOUT)
                    .client_disconnect_timeout(Duration::from_secs(1))
                    .local_addr(local_addr)
                    // For handlers that hold a request open until the client leaves.
                    .on_connect_ext(move |io: &ParseErrorBodies<TcpStream>, data| {
                        if watch_clients {
                            kernel::peer::record(io.get_ref(), data)
                        }
                    })
                    // `AppConfig::new` is private to actix-web. The default differs from what
                    // `HttpServer` passes only in its host and local address, which the app sees
                    // only as the host of an HTTP/1.0 request without a `Host` header.
                    .h1(map_config(
                        app.into_factory().map_err(|e| e.error_response()),
                        |_| AppConfig::default(),
                    ));
                fn_service(|io: TcpStream| async move {
                    let peer = io.peer_addr().ok();
                    Ok::<_, DispatchError>((ParseErrorBodies::new(io), peer))
                })
                .and_then(http)
            })
            .map_err(|source| StartError::Bind {
                addr: format!("port {port}"),
                source,
            })?
            .run();
        Ok(Application {
            port,
            server,
            worker,
            metrics: metrics_server,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of `/metrics` when it has a server of its own (`METRICS_ADDR`).
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics.as_ref().map(MetricsServer::port)
    }

    /// Runs until SIGTERM or SIGINT, then drains in-flight requests and stops the embedded
    /// worker (running jobs finish within `WORKER_SHUTDOWN_TIMEOUT_SECONDS` or go back to the
    /// queue).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        drop(self.metrics);
        if let Some(worker) = self.worker {
            worker.shutdown().await;
        }
        served
    }

    /// The server future, for tests that run it in the background.
    pub fn into_server(self) -> Server {
        self.into_parts().0
    }

    /// The server future and what runs beside it (the embedded worker, the metrics server), for
    /// tests that run the application in the background: they stop when the second part is
    /// dropped.
    pub fn into_parts(self) -> (Server, Background) {
        (self.server, Background(self.worker, self.metrics))
    }
}

/// Work the application runs beside its HTTP server; stops when dropped.
pub struct Background(
    #[allow(dead_code)] Option<Box<dyn RunningWorker>>,
    #[allow(dead_code)] Option<MetricsServer>,
);

/// The routes of the server and of every enabled module, with the OpenAPI document they make.
fn app(
    config: &Config,
    state: &web::Data<Composed>,
    metrics_route: Option<&web::Data<Exporter>>,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse,
        Error = actix_web::Error,
        InitError = (),
    > + use<>,
> {
    let max_json_bytes = config.max_json_bytes;
    let mut base = ApiDoc::openapi();
    base.info.version = env!("CARGO_PKG_VERSION").to_owned();
    let app = App::new()
        .into_utoipa_app()
        .openapi(base)
        .app_data(state.clone())
        .app_data(web::Data::new(config.trusted_proxies.clone()))
        .map(|app| app.configure(|c| http::configure_extractors(c, max_json_bytes)))
        .service(health::health)
        .service(health::live)
        .service(health::ready);
    let (app, mut doc) = state.modules.iter().fold(app, mount).split_for_parts();
    kernel::openapi::finish(&mut doc, state.has_identity());
    let mounts: Vec<_> = state.modules.iter().map(|m| m.mounts()).collect();
    let aliases: Vec<(&str, &str)> = mounts
        .iter()
        .flat_map(|m| m.iter().skip(1).map(|alias| (m.documented(), alias)))
        .collect();
    let allowed = web::Data::new(http::AllowedMethods::from_openapi(&doc, &aliases));
    let app = match metrics_route {
        Some(exporter) => app
            .app_data(exporter.clone())
            .route("/metrics", web::get().to(metrics::scrape)),
        None => app,
    };
    app.app_data(allowed)
        .service(SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", doc))
        .route(
            "/docs",
            web::get().to(|| async {
                HttpResponse::PermanentRedirect()
                    .insert_header((header::LOCATION, "/docs/"))
                    .finish()
            }),
        )
        .default_service(web::to(http::not_found))
}

/// CORS for the configured origins (`*` allows any); with none configured it is not mounted.
fn cors(origins: &[String]) -> actix_cors::Cors {
    let cors = actix_cors::Cors::default()
        .allow_any_method()
        .allow_any_header()
        .expose_headers(["x-request-id"])
        .max_age(3600);
    if origins.iter().any(|o| o == "*") {
        cors.allow_any_origin()
    } else {
        origins
            .iter()
            .fold(cors, |cors, origin| cors.allowed_origin(origin))
    }
}
