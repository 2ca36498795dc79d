//! The composed application: migrations of the enabled modules, their services, one actix app.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::http::header;
use actix_web::middleware::{Compress, Condition, from_fn};
use actix_web::{App, HttpResponse, HttpServer, web};
use kernel::identity::Identity;
use kernel::{DbPool, MigrationSet, http};
use tracing_actix_web::TracingLogger;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_actix_web::AppExt;
use utoipa_actix_web::scope::scope;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::{Config, Module};
use crate::health;
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
    #[error("module {module} failed to start: {message}")]
    Module {
        module: &'static str,
        message: String,
    },
}

/// Everything the handlers of the server itself share.
pub struct AppState {
    pub pool: DbPool,
    #[cfg(feature = "auth")]
    pub auth: Option<Arc<auth_core::AuthModule>>,
    #[cfg(feature = "blog")]
    pub blog: Option<Arc<blog_core::BlogModule>>,
    #[cfg(feature = "tasks")]
    pub tasks: Option<Arc<tasks_core::TasksModule>>,
}

/// The migration sets of the enabled modules, in order.
pub fn migration_sets(config: &Config) -> Vec<MigrationSet> {
    let mut sets = Vec::new();
    for module in &config.modules {
        match module {
            #[cfg(feature = "auth")]
            Module::Auth => sets.push(auth_core::MIGRATIONS),
            #[cfg(feature = "blog")]
            Module::Blog => sets.push(blog_core::MIGRATIONS),
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }
    sets
}

/// Applies the enabled modules' migrations, then opens the pool.
pub async fn open_database(config: &Config) -> Result<DbPool, StartError> {
    kernel::db::migrate(&config.database_url, &migration_sets(config)).await?;
    Ok(DbPool::connect(&config.database_url, config.db_pool_size).await?)
}

/// Builds the enabled modules over `pool`.
pub async fn build_state(config: &Config, pool: DbPool) -> Result<AppState, StartError> {
    #[cfg(feature = "tasks")]
    let tasks = match config.is_enabled(Module::Tasks) {
        true => Some(Arc::new(build_tasks(config).await?)),
        false => None,
    };
    // Shared counters (auth rate limits) live in Redis when the task queue runs on it.
    #[cfg(feature = "tasks")]
    let redis = tasks.as_ref().and_then(|t| t.redis_pool());
    #[cfg(not(feature = "tasks"))]
    let redis = None;
    #[cfg(feature = "auth")]
    let auth = if config.is_enabled(Module::Auth) {
        let module =
            auth_core::AuthModule::build(pool.clone(), &config.auth, redis, config.max_json_bytes)
                .await
                .map_err(|e| StartError::Module {
                    module: "auth",
                    message: e.to_string(),
                })?;
        Some(Arc::new(module))
    } else {
        None
    };
    #[cfg(feature = "blog")]
    let blog = config.is_enabled(Module::Blog).then(|| {
        let auth_mounted = config.is_enabled(Module::Auth);
        Arc::new(blog_core::BlogModule::build(
            pool.clone(),
            config.blog.clone(),
            auth_mounted,
        ))
    });
    #[cfg(not(feature = "auth"))]
    let _ = redis;
    Ok(AppState {
        pool,
        #[cfg(feature = "auth")]
        auth,
        #[cfg(feature = "blog")]
        blog,
        #[cfg(feature = "tasks")]
        tasks,
    })
}

/// The tasks module on the backend its settings choose.
#[cfg(feature = "tasks")]
pub async fn build_tasks(config: &Config) -> Result<tasks_core::TasksModule, StartError> {
    tasks_core::TasksModule::build(config.tasks.clone())
        .await
        .map_err(|e| StartError::Module {
            module: "tasks",
            message: e.to_string(),
        })
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Keel", description = "Keel: a modular HTTP JSON service."),
    paths(health::health, health::live, health::ready)
)]
struct ApiDoc;

fn base_document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .build(),
        ),
    );
    doc
}

/// A running server: its port and the future that runs it until SIGTERM/SIGINT.
pub struct Application {
    port: u16,
    server: Server,
    /// The embedded task worker of `keel serve` (`WORKER_EMBEDDED`).
    #[cfg(feature = "tasks")]
    worker: Option<tasks_core::WorkerHandle>,
    #[cfg(feature = "tasks")]
    worker_shutdown: std::time::Duration,
}

impl Application {
    /// Migrates, builds the modules and binds `HOST:PORT` (port 0 picks a free one).
    pub async fn build(config: Config) -> Result<Application, StartError> {
        kernel::init_crypto();
        let pool = open_database(&config).await?;
        let state = web::Data::new(build_state(&config, pool).await?);
        let addr = format!("{}:{}", config.host, config.port);
        let listener = TcpListener::bind(&addr).map_err(|source| StartError::Bind {
            addr: addr.clone(),
            source,
        })?;
        let port = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?
            .port();
        #[cfg(feature = "auth")]
        let identity = Identity::new(state.auth.as_ref().map(|a| a.authenticator()));
        #[cfg(not(feature = "auth"))]
        let identity = Identity::new(None);
        #[cfg(feature = "tasks")]
        let worker = state.tasks.as_ref().and_then(|t| t.start_embedded_worker());
        #[cfg(feature = "tasks")]
        let worker_shutdown = config.tasks.shutdown_timeout;
        let workers = config.http_workers;
        let shutdown_timeout = config.shutdown_timeout_seconds;
        let config = Arc::new(config);
        let server = HttpServer::new(move || {
            let (app, _) = compose(&config, &state, &identity).split_for_parts();
            app.default_service(web::to(http::not_found))
                .wrap(Compress::default())
                .wrap(Condition::new(
                    !config.cors_origins.is_empty(),
                    cors(&config.cors_origins),
                ))
                .wrap(from_fn(http::json_errors))
                .wrap(TracingLogger::<RequestSpan>::new())
                .wrap(from_fn(http::request_id))
        })
        .workers(workers)
        .shutdown_timeout(shutdown_timeout)
        .listen(listener)
        .map_err(|source| StartError::Bind {
            addr: format!("port {port}"),
            source,
        })?
        .run();
        Ok(Application {
            port,
            server,
            #[cfg(feature = "tasks")]
            worker,
            #[cfg(feature = "tasks")]
            worker_shutdown,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Runs until SIGTERM or SIGINT, then drains in-flight requests and stops the embedded
    /// worker (running jobs finish within `WORKER_SHUTDOWN_TIMEOUT_SECONDS` or go back to the
    /// queue).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        #[cfg(feature = "tasks")]
        if let Some(worker) = self.worker {
            worker.shutdown(self.worker_shutdown).await;
        }
        served
    }

    /// The server future, for tests that run it in the background.
    pub fn into_server(self) -> Server {
        self.into_parts().0
    }

    /// The server future and what runs beside it (the embedded worker), for tests that run the
    /// application in the background: the worker stops when the second part is dropped.
    pub fn into_parts(self) -> (Server, Background) {
        #[cfg(feature = "tasks")]
        let background = Background(self.worker);
        #[cfg(not(feature = "tasks"))]
        let background = Background(());
        (self.server, background)
    }
}

/// Work the application runs beside its HTTP server; stops when dropped.
#[cfg(feature = "tasks")]
pub struct Background(#[allow(dead_code)] Option<tasks_core::WorkerHandle>);

/// Work the application runs beside its HTTP server; stops when dropped.
#[cfg(not(feature = "tasks"))]
pub struct Background(());

impl Application {}

/// The routes of the server and of every enabled module, with the OpenAPI document they make.
fn compose(
    config: &Config,
    state: &web::Data<AppState>,
    identity: &web::Data<Identity>,
) -> utoipa_actix_web::UtoipaApp<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse,
        Error = actix_web::Error,
        InitError = (),
    > + use<>,
> {
    let max_json_bytes = config.max_json_bytes;
    #[allow(unused_mut)]
    let mut app = App::new()
        .into_utoipa_app()
        .openapi(base_document())
        .app_data(state.clone())
        .app_data(identity.clone())
        .map(|app| app.configure(|c| http::configure_extractors(c, max_json_bytes)))
        .service(health::health)
        .service(health::live)
        .service(health::ready);
    #[cfg(feature = "auth")]
    if let Some(auth) = state.auth.clone() {
        // Documented once, under /api/v1/auth; /auth answers the same.
        let alias = auth.clone();
        app = app
            .service(scope("/api/v1/auth").configure(move |cfg| auth.configure(cfg)))
            .map(|app| {
                app.service(web::scope("/auth").configure(move |c| {
                    alias.configure(&mut utoipa_actix_web::service_config::ServiceConfig::new(c))
                }))
            });
    }
    #[cfg(feature = "tasks")]
    if let Some(tasks) = state.tasks.clone() {
        app = app.service(scope("/api/v1/tasks").configure(move |cfg| tasks.configure(cfg)));
    }
    #[cfg(feature = "blog")]
    if let Some(blog) = state.blog.clone() {
        app = app.service(scope("/api/v1/blog").configure(move |cfg| blog.configure(cfg)));
    }
    app.openapi_service(|api| SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", api))
        .map(|app| {
            app.route(
                "/docs",
                web::get().to(|| async {
                    HttpResponse::PermanentRedirect()
                        .insert_header((header::LOCATION, "/docs/"))
                        .finish()
                }),
            )
        })
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
