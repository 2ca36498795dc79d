//! Keel's background tasks module: named tasks on isolated queues (`system`, `load_test`), run by
//! workers with at-least-once delivery, retries with exponential backoff, per-task time limits and
//! results kept for a while.
//!
//! Two backends behind [`TaskBackend`]: Redis (shared by every server and worker process pointed at
//! it) and an in-process queue (the embedded default). Other modules enqueue through
//! [`kernel::jobs::JobQueue`] ([`TasksModule::queue`]) and register their own tasks with
//! [`TasksModule::register`].
//!
//! ```no_run
//! use tasks_core::{TasksConfig, TasksModule};
//! use utoipa_actix_web::AppExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let tasks = TasksModule::build(TasksConfig::from_env()?).await?;
//! let worker = tasks.start_embedded_worker(); // when WORKER_EMBEDDED is true
//! let (app, openapi) = actix_web::App::new()
//!     .app_data(kernel::identity::Identity::new(None))
//!     .into_utoipa_app()
//!     .service(
//!         utoipa_actix_web::scope::scope("/api/v1/tasks").configure(|cfg| tasks.configure(cfg)),
//!     )
//!     .split_for_parts();
//! // ... serve `app`; on shutdown:
//! if let Some(worker) = worker {
//!     worker.shutdown(tasks.config().shutdown_timeout).await;
//! }
//! # let _ = (app, openapi);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use kernel::health::{HealthStatus, ModuleHealth};
use kernel::jobs::{JobQueue, TaskFn};

pub mod backend;
pub mod builtin;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod registry;
pub mod service;
pub mod worker;

pub use backend::{BackendKind, MemoryBackend, RedisBackend, TaskBackend};
pub use builtin::{RandomSource, SequenceRandom, SystemRandom};
pub use config::{BackendChoice, TasksConfig};
pub use domain::{QUEUE_LOAD_TEST, QUEUE_SYSTEM, TaskRecord, TaskStatus};
pub use error::TasksError;
pub use registry::TaskDefinition;
pub use service::TaskService;
pub use worker::WorkerHandle;

use backend::redis::RedisSettings;

/// The tasks module: its service, its routes and its workers.
#[derive(Clone)]
pub struct TasksModule {
    service: Arc<TaskService>,
    /// `TASKS_BACKEND=auto` found no Redis and fell back to memory.
    fell_back: bool,
    /// The Redis pool when the queue runs on Redis.
    redis: Option<deadpool_redis::Pool>,
}

impl TasksModule {
    /// Builds the module on the backend `config` chooses. With `redis`, this succeeds while Redis
    /// is down (the endpoints answer 503 until it is back); with `auto`, Redis is used when it
    /// answers now, else the in-memory queue, with a warning.
    pub async fn build(config: TasksConfig) -> Result<TasksModule, TasksError> {
        let mut redis_pool = None;
        let (backend, fell_back): (Arc<dyn TaskBackend>, bool) = match config.backend {
            BackendChoice::Memory => (Arc::new(MemoryBackend::new()), false),
            BackendChoice::Redis => {
                let redis = RedisBackend::connect(&redis_settings(&config))?;
                if let Err(e) = redis.ping().await {
                    tracing::warn!(error = %e, "Redis (REDIS_URL) is not answering; task endpoints answer 503 until it does");
                }
                redis_pool = Some(redis.pool().clone());
                (Arc::new(redis), false)
            }
            BackendChoice::Auto => {
                let redis = RedisBackend::connect(&redis_settings(&config))?;
                let limit = config.redis_connect_timeout + Duration::from_secs(1);
                match tokio::time::timeout(limit, redis.ping()).await {
                    Ok(Ok(())) => {
                        redis_pool = Some(redis.pool().clone());
                        (Arc::new(redis), false)
                    }
                    outcome => {
                        let why = match outcome {
                            Ok(Err(e)) => e.to_string(),
                            _ => "no answer".to_owned(),
                        };
                        tracing::warn!(reason = %why,
                            "Redis (REDIS_URL) did not answer: using the in-memory task queue. \
                             Jobs live only in this process and are lost when it stops; \
                             set TASKS_BACKEND=redis to require Redis");
                        (Arc::new(MemoryBackend::new()), true)
                    }
                }
            }
        };
        let mut module = TasksModule::with_backend(config, backend, Arc::new(SystemRandom));
        module.fell_back = fell_back;
        module.redis = redis_pool;
        Ok(module)
    }

    /// Builds the module on a given backend and random source (tests inject both).
    pub fn with_backend(
        config: TasksConfig,
        backend: Arc<dyn TaskBackend>,
        random: Arc<dyn RandomSource>,
    ) -> TasksModule {
        let service = Arc::new(TaskService::new(config, backend, random));
        if let Err(e) = builtin::register_builtins(&service) {
            tracing::error!(error = %e, "built-in tasks could not be registered");
        }
        TasksModule {
            service,
            fell_back: false,
            redis: None,
        }
    }

    pub fn config(&self) -> &TasksConfig {
        self.service.config()
    }

    pub fn service(&self) -> Arc<TaskService> {
        self.service.clone()
    }

    /// A pool on the Redis the queue uses (`None` on the in-memory queue): other shared state of
    /// the server, such as the auth rate-limit counters, lives there too.
    pub fn redis_pool(&self) -> Option<deadpool_redis::Pool> {
        self.redis.clone()
    }

    pub fn backend_kind(&self) -> BackendKind {
        self.service.backend().kind()
    }

    /// The queue other modules enqueue through.
    pub fn queue(&self) -> Arc<dyn JobQueue> {
        self.service.clone()
    }

    /// Registers a task on one queue (`system`, `load_test`, or a new queue of the module's own).
    /// Register before starting workers.
    pub fn register(
        &self,
        name: impl Into<String>,
        queue: impl Into<String>,
        task: TaskFn,
    ) -> Result<(), TasksError> {
        self.service
            .register(TaskDefinition::new(name, queue, task))
    }

    /// Registers a task with its own settings (time limit).
    pub fn register_task(&self, definition: TaskDefinition) -> Result<(), TasksError> {
        self.service.register(definition)
    }

    /// Adds a step to `cleanup_expired_data` (e.g. removing a module's old webhook events). The
    /// hook's result is reported under `name`.
    pub fn register_cleanup(&self, name: impl Into<String>, hook: TaskFn) {
        self.service.registry().add_cleanup(name.into(), hook);
    }

    /// Every queue, sorted.
    pub fn queues(&self) -> Vec<String> {
        self.service.queues()
    }

    /// Registers the routes (mount under `/api/v1/tasks`).
    pub fn configure(&self, cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
        http::configure(cfg, self.service.clone());
    }

    /// Starts a worker on `queues` (empty: every queue). Must run inside a Tokio runtime.
    pub fn start_worker(&self, queues: &[&str]) -> Result<WorkerHandle, TasksError> {
        let queues = self.resolve_queues(queues)?;
        Ok(worker::start(self.service.clone(), queues))
    }

    /// The embedded worker of `keel serve`: started on every queue when `WORKER_EMBEDDED` is true.
    pub fn start_embedded_worker(&self) -> Option<WorkerHandle> {
        self.config()
            .embedded_worker
            .then(|| worker::start(self.service.clone(), self.queues()))
    }

    /// One worker process (`keel worker`): works `queues` (empty: all) until SIGTERM or SIGINT,
    /// then shuts down gracefully within `WORKER_SHUTDOWN_TIMEOUT_SECONDS`. Refuses the in-memory
    /// backend, whose jobs no other process can see.
    pub async fn run_worker_until_signal(&self, queues: &[&str]) -> Result<(), TasksError> {
        self.require_shared_backend()?;
        let handle = self.start_worker(queues)?;
        wait_for_stop_signal().await;
        tracing::info!("stop signal received; finishing running tasks");
        handle.shutdown(self.config().shutdown_timeout).await;
        Ok(())
    }

    /// The module's health for `GET /health`.
    pub async fn health(&self) -> ModuleHealth {
        let kind = self.backend_kind().as_str();
        match self.service.backend().ping().await {
            Ok(()) if self.fell_back => ModuleHealth {
                status: HealthStatus::Degraded,
                detail: "Redis did not answer at start: using the in-memory queue".to_owned(),
            },
            Ok(()) => ModuleHealth::healthy(format!(
                "{kind} backend; queues: {}",
                self.queues().join(", ")
            )),
            Err(e) => ModuleHealth::unhealthy(e.to_string()),
        }
    }

    fn resolve_queues(&self, queues: &[&str]) -> Result<Vec<String>, TasksError> {
        let known = self.queues();
        if queues.is_empty() {
            return Ok(known);
        }
        let mut resolved: Vec<String> = Vec::new();
        for queue in queues {
            if !known.iter().any(|k| k == queue) {
                return Err(TasksError::UnknownQueue {
                    queue: (*queue).to_owned(),
                    available: known,
                });
            }
            if !resolved.iter().any(|r| r == queue) {
                resolved.push((*queue).to_owned());
            }
        }
        Ok(resolved)
    }

    /// Errors for the in-memory backend: another process cannot see its jobs.
    fn require_shared_backend(&self) -> Result<(), TasksError> {
        match self.backend_kind() {
            BackendKind::Redis => Ok(()),
            BackendKind::Memory => Err(TasksError::Unavailable(
                "the in-memory queue lives inside one process; run Redis and set TASKS_BACKEND=redis \
                 (and REDIS_URL) to use workers and task commands from other processes"
                    .to_owned(),
            )),
        }
    }
}

fn redis_settings(config: &TasksConfig) -> RedisSettings {
    RedisSettings {
        url: config.redis_url.clone(),
        db: config.redis_db,
        prefix: config.key_prefix(),
        connect_timeout: config.redis_connect_timeout,
        max_block: config.poll_interval,
        pool_size: (config.worker_threads.saturating_mul(2) + 12).min(256),
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn wait_for_stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
