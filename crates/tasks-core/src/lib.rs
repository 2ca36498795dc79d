//! Keel's background tasks module: named tasks on isolated queues (`system`, `load_test`), run by
//! workers with at-least-once delivery, retries with exponential backoff, per-task time limits and
//! results kept for a while. It is the task runner of the server: other modules declare their
//! tasks ([`kernel::Module::tasks`]) and enqueue through [`kernel::jobs::JobQueue`], which this
//! module implements; neither needs this crate.
//!
//! Two backends behind one trait (`TaskBackend`): Redis (shared by every server and worker
//! process pointed at it) and an in-process queue (the embedded default).
//!
//! Embedding it alone in an actix-web app, with its worker beside the server:
//!
//! ```no_run
//! use std::sync::Arc;
//! use kernel::module::{BodyLimits, BuildModule, Deps, Module, mount};
//! use tasks_core::{TasksConfig, TasksModule};
//! use utoipa_actix_web::AppExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let deps = Deps::new(kernel::DbPool::connect("sqlite://data/app.db", 4).await?)?;
//! let tasks = TasksModule::build(TasksConfig::from_env()?, &deps).await?;
//! let worker = tasks.start_embedded_worker(); // when WORKER_EMBEDDED is true
//! let shutdown = tasks.config().shutdown_timeout;
//! let tasks: Arc<dyn Module> = Arc::new(tasks);
//! actix_web::HttpServer::new(move || {
//!     mount(kernel::http::app(BodyLimits::default()).into_utoipa_app(), &tasks).into_app()
//! })
//! .bind(("127.0.0.1", 8000))?
//! .run()
//! .await?;
//! if let Some(worker) = worker {
//!     worker.shutdown(shutdown).await;
//! }
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use kernel::Authenticator;
use kernel::capability::{Capabilities, CapabilityId, Use};
use kernel::health::{HealthStatus, ModuleHealth};
use kernel::identity::Identity;
use kernel::jobs::{JobError, JobQueue, RunningWorker, TaskDef, TaskFn, TaskKind, TaskRunner};
use kernel::module::{BuildModule, Deps, Module, ModuleError, Mounts};

#[cfg(feature = "testing")]
pub mod backend;
#[cfg(not(feature = "testing"))]
mod backend;
mod builtin;
#[cfg(feature = "cli")]
pub mod cli;
mod config;
mod dead_letters;
mod domain;
mod error;
mod http;
mod registry;
mod schedule;
mod scheduler;
mod service;
mod waiters;
mod worker;

pub use backend::BackendKind;
use backend::{MemoryBackend, RedisBackend, TaskBackend};
use builtin::{RandomSource, SystemRandom};
/// Test hooks: backends and random sources to build the module on (`testing` feature).
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::backend::{MemoryBackend, RedisBackend, TaskBackend};
    pub use crate::builtin::{RandomSource, SequenceRandom, SystemRandom};
}
pub use config::{BackendChoice, TasksConfig};
pub use domain::{CancelOutcome, QUEUE_LOAD_TEST, QUEUE_SYSTEM, TaskRecord, TaskStatus};
pub use error::TasksError;
pub use http::{
    EnqueueBody, EnqueueResponse, FailedListResponse, FailedTaskResponse, ScheduleListResponse,
    ScheduleResponse, TaskListResponse, TaskStatusResponse,
};
pub use registry::TaskDefinition;
pub use schedule::{Schedule, ScheduleOverride, parse_overrides};
pub use scheduler::{ScheduleSource, ScheduleView, ScheduledTask};
pub use service::{Canceller, TasksService};
pub use worker::WorkerHandle;

use backend::redis::RedisSettings;

/// The tasks module: its service, its routes and its workers.
#[derive(Clone)]
pub struct TasksModule {
    /// Where the routes are mounted (the host's choice, else [`Self::MOUNTS`]).
    mounts: Mounts,
    service: Arc<TasksService>,
    /// `TASKS_BACKEND=auto` found no Redis and fell back to memory.
    fell_back: bool,
    /// The Redis pool when the queue runs on Redis.
    redis: Option<deadpool_redis::Pool>,
    /// Who may call the routes (every route needs an active user when auth is mounted).
    identity: web::Data<Identity>,
}

impl TasksModule {
    /// Where the module mounts its routes unless the host chooses (`Deps::mounted_at`).
    pub const MOUNTS: &'static [&'static str] = &["/api/v1/tasks"];
}

impl BuildModule for TasksModule {
    const NAME: &'static str = "tasks";
    type Settings = TasksConfig;

    fn provides() -> Vec<CapabilityId> {
        vec![
            CapabilityId::of::<dyn TaskRunner>(),
            CapabilityId::of::<dyn JobQueue>(),
        ]
    }

    fn uses() -> Vec<Use> {
        vec![Use::optional::<dyn Authenticator>()]
    }

    #[cfg(feature = "cli")]
    fn commands() -> Vec<clap::Command> {
        vec![cli::command()]
    }

    async fn build(config: TasksConfig, deps: &Deps) -> Result<Self, ModuleError> {
        let mut module = TasksModule::connect(config)
            .await
            .map_err(|e| ModuleError::new(Self::NAME, e))?;
        module.identity = deps.identity();
        module.mounts = deps.mounts_or(Self::MOUNTS);
        Ok(module)
    }
}

impl TasksModule {
    /// Builds the module on the backend `config` chooses, with open routes (no authenticator).
    /// With `redis`, this succeeds while Redis is down (the endpoints answer 503 until it is
    /// back); with `auto`, Redis is used when it answers now, else the in-memory queue, with a
    /// warning.
    pub async fn connect(config: TasksConfig) -> Result<TasksModule, TasksError> {
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
        let mut module = TasksModule::assemble(config, backend, Arc::new(SystemRandom));
        module.fell_back = fell_back;
        module.redis = redis_pool;
        Ok(module)
    }

    /// Builds the module on a given backend and random source (`testing` feature: tests inject
    /// both).
    #[cfg(feature = "testing")]
    pub fn with_backend(
        config: TasksConfig,
        backend: Arc<dyn TaskBackend>,
        random: Arc<dyn RandomSource>,
    ) -> TasksModule {
        TasksModule::assemble(config, backend, random)
    }

    fn assemble(
        config: TasksConfig,
        backend: Arc<dyn TaskBackend>,
        random: Arc<dyn RandomSource>,
    ) -> TasksModule {
        let service = Arc::new(TasksService::new(config, backend, random));
        if let Err(e) = builtin::register_builtins(&service) {
            tracing::error!(error = %e, "built-in tasks could not be registered");
        }
        TasksModule {
            mounts: Mounts::new(Self::MOUNTS),
            service,
            fell_back: false,
            redis: None,
            identity: Identity::new(None),
        }
    }

    /// The same module with routes guarded by `authenticator` (every route then needs an
    /// active user); the server hands it in through [`Deps`] instead.
    pub fn with_authenticator(
        mut self,
        authenticator: Option<Arc<dyn kernel::Authenticator>>,
    ) -> Self {
        self.identity = Identity::new(authenticator);
        self
    }

    pub fn config(&self) -> &TasksConfig {
        self.service.config()
    }

    pub fn service(&self) -> Arc<TasksService> {
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
        kernel::signals::stop_requested().await;
        tracing::info!("stop signal received; finishing running tasks");
        handle.shutdown(self.config().shutdown_timeout).await;
        Ok(())
    }

    /// The module's health for `GET /health`.
    async fn queue_health(&self) -> ModuleHealth {
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
        let why = match self.backend_kind() {
            BackendKind::Redis => return Ok(()),
            BackendKind::Memory if self.fell_back => {
                "Redis (REDIS_URL) did not answer, so TASKS_BACKEND=auto chose the in-memory queue"
            }
            BackendKind::Memory => "TASKS_BACKEND=memory chose the in-memory queue",
        };
        Err(TasksError::Unavailable(format!(
            "{why}, which lives inside one process: `keel worker`, `keel tasks enqueue` and \
             `keel tasks result` need Redis (start it, set REDIS_URL, and TASKS_BACKEND=redis or \
             auto). Without Redis, `keel serve` runs tasks in its own in-memory queue: enqueue \
             and read them through its API (POST /api/v1/tasks/enqueue, GET \
             /api/v1/tasks/result/ID)"
        )))
    }
}

#[async_trait::async_trait]
impl Module for TasksModule {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// `GET /result/{task_id}?wait=` holds its request until the job ends or the client leaves.
    fn watches_clients(&self) -> bool {
        true
    }

    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    fn routes(&self, cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
        http::configure(cfg, self.service.clone(), self.identity.clone());
    }

    async fn health(&self) -> ModuleHealth {
        self.queue_health().await
    }

    /// Not ready while the queue's Redis does not answer.
    async fn ready(&self) -> Result<(), String> {
        let queue = self.queue_health().await;
        match queue.status {
            HealthStatus::Unhealthy => Err(format!("task queue unreachable: {}", queue.detail)),
            _ => Ok(()),
        }
    }

    fn provide(&self, capabilities: &mut Capabilities) {
        let runner: Arc<dyn TaskRunner> = Arc::new(self.clone());
        capabilities.provide::<dyn JobQueue>(runner.queue());
        capabilities.provide::<dyn TaskRunner>(runner);
    }

    /// Every queue's depth; a queue whose backend does not answer within two seconds keeps its
    /// last value.
    async fn sample_metrics(&self) {
        let backend = self.service.backend();
        for queue in self.queues() {
            let depth = tokio::time::timeout(Duration::from_secs(2), backend.depth(&queue)).await;
            if let Ok(Ok(depth)) = depth {
                kernel::metrics::task_queue_depth(
                    &queue,
                    depth.queued,
                    depth.scheduled,
                    depth.in_progress,
                );
            }
        }
    }

    #[cfg(feature = "cli")]
    async fn run_command(&self, name: &str, matches: &clap::ArgMatches) -> Result<(), String> {
        match name {
            cli::COMMAND => cli::run(self, matches).await,
            other => Err(format!("the tasks module has no command {other}")),
        }
    }
}

/// The embedded worker as the server holds it.
struct EmbeddedWorker {
    handle: WorkerHandle,
    shutdown_timeout: Duration,
}

#[async_trait::async_trait]
impl RunningWorker for EmbeddedWorker {
    async fn shutdown(self: Box<Self>) {
        self.handle.shutdown(self.shutdown_timeout).await;
    }
}

#[async_trait::async_trait]
impl TaskRunner for TasksModule {
    fn queue(&self) -> Arc<dyn JobQueue> {
        self.service.clone()
    }

    fn register(&self, task: TaskDef) -> Result<(), JobError> {
        let name = task.name.clone();
        match task.kind {
            TaskKind::Cleanup => {
                self.register_cleanup(task.name, task.handler);
                Ok(())
            }
            TaskKind::Task => {
                let schedule = match task.schedule.as_deref().map(schedule::Schedule::parse) {
                    None => None,
                    Some(Ok(schedule)) => Some(schedule),
                    Some(Err(reason)) => {
                        return Err(JobError::Registration {
                            name,
                            reason: format!("its schedule: {reason}"),
                        });
                    }
                };
                let mut definition = TaskDefinition::new(task.name, task.queue, task.handler);
                definition.timeout = task.timeout;
                definition.check = task.check;
                definition.schedule = schedule;
                self.register_task(definition)
                    .map_err(|e| JobError::Registration {
                        name,
                        reason: e.to_string(),
                    })
            }
        }
    }

    fn start_embedded_worker(&self) -> Option<Box<dyn RunningWorker>> {
        let handle = TasksModule::start_embedded_worker(self)?;
        Some(Box::new(EmbeddedWorker {
            handle,
            shutdown_timeout: self.config().shutdown_timeout,
        }))
    }

    fn worker_processes(&self) -> usize {
        self.config().worker_processes
    }

    fn check_registered(&self) -> Result<(), JobError> {
        self.service.check_schedules()
    }

    async fn run_worker(&self, queues: &[String]) -> Result<(), String> {
        let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
        self.run_worker_until_signal(&queues)
            .await
            .map_err(|e| e.to_string())
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
