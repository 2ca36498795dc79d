//! Background jobs across modules: a module that wants background work registers tasks and
//! enqueues them through [`JobQueue`]; tasks-core implements it (Redis or in-memory).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

/// The queue of maintenance and background work.
pub const QUEUE_SYSTEM: &str = "system";
/// The queue of load-test tasks, isolated from the others.
pub const QUEUE_LOAD_TEST: &str = "load_test";

/// What a task receives: its positional and keyword arguments, and which attempt this is (1-based).
#[derive(Debug, Clone, Default)]
pub struct TaskInput {
    pub args: Vec<Value>,
    pub kwargs: Map<String, Value>,
    pub attempt: u32,
}

/// A task's outcome: a JSON result, or an error message (which may be retried).
pub type TaskResult = Result<Value, String>;

/// A task handler: an async function of its input.
pub type TaskFn =
    Arc<dyn Fn(TaskInput) -> Pin<Box<dyn Future<Output = TaskResult> + Send>> + Send + Sync>;

/// Checks a task's arguments when it is enqueued, so that bad arguments are refused at once
/// (`Err` says which argument and what to fix) rather than failing every attempt later.
pub type ArgsCheck = Arc<dyn Fn(&TaskInput) -> Result<(), String> + Send + Sync>;

/// A request to run a task.
#[derive(Debug, Clone, Default)]
pub struct EnqueueRequest {
    pub task_name: String,
    /// The queue to use; `None` means the task's own queue.
    pub queue: Option<String>,
    pub args: Vec<Value>,
    pub kwargs: Map<String, Value>,
    pub delay_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("Unknown task: {0}")]
    UnknownTask(String),
    #[error("Task {task} runs on queue {expected}, not {requested}")]
    WrongQueue {
        task: String,
        expected: String,
        requested: String,
    },
    #[error("Task queue unavailable: {0}")]
    Unavailable(String),
    #[error("Task {name} cannot be registered: {reason}")]
    Registration { name: String, reason: String },
}

/// Enqueues tasks by name. Returns the new task's id (a UUID string).
#[async_trait::async_trait]
pub trait JobQueue: Send + Sync {
    async fn enqueue(&self, request: EnqueueRequest) -> Result<String, JobError>;
}

/// What a background task is for: an ordinary task, or a step of the task runner's
/// `cleanup_expired_data` maintenance task (e.g. removing a module's old webhook events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Task,
    Cleanup,
}

/// A background task a module declares ([`crate::module::Module::tasks`]): its name, its one
/// queue, its handler and optionally its own time limit.
#[derive(Clone)]
pub struct TaskDef {
    pub name: String,
    pub queue: String,
    pub handler: TaskFn,
    /// The time limit of one attempt; `None` uses the runner's default.
    pub timeout: Option<std::time::Duration>,
    /// Checks the arguments at enqueue.
    pub check: Option<ArgsCheck>,
    pub kind: TaskKind,
    /// When the task runs by itself: a cron expression (`0 3 * * *`, UTC) or an interval
    /// (`@every 15m`); `None`: only when enqueued. The task runner checks it at registration,
    /// and a deployer may override it (tasks-core's `TASK_SCHEDULES`).
    pub schedule: Option<String>,
}

impl TaskDef {
    /// A task on `queue`.
    pub fn new(name: impl Into<String>, queue: impl Into<String>, handler: TaskFn) -> Self {
        TaskDef {
            name: name.into(),
            queue: queue.into(),
            handler,
            timeout: None,
            check: None,
            kind: TaskKind::Task,
            schedule: None,
        }
    }

    /// A step of `cleanup_expired_data`, reported under `name`.
    pub fn cleanup(name: impl Into<String>, handler: TaskFn) -> Self {
        TaskDef {
            name: name.into(),
            queue: String::new(),
            handler,
            timeout: None,
            check: None,
            kind: TaskKind::Cleanup,
            schedule: None,
        }
    }

    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks the arguments when the task is enqueued (400 naming the argument).
    pub fn with_args_check(mut self, check: ArgsCheck) -> Self {
        self.check = Some(check);
        self
    }

    /// Runs the task periodically: a cron expression (five fields, or six with seconds first;
    /// `@daily`, `@hourly`...; UTC) or an interval `@every <n>s|m|h|d`. Each due run is enqueued
    /// once, however many workers run.
    pub fn with_schedule(mut self, schedule: impl Into<String>) -> Self {
        self.schedule = Some(schedule.into());
        self
    }
}

impl std::fmt::Debug for TaskDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskDef")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("timeout", &self.timeout)
            .field("kind", &self.kind)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

/// A worker running beside the server; [`RunningWorker::shutdown`] lets running jobs finish
/// (bounded) or returns them to the queue. Dropping it stops it too.
#[async_trait::async_trait]
pub trait RunningWorker: Send {
    async fn shutdown(self: Box<Self>);
}

/// The module that runs background tasks (tasks-core): it takes every module's tasks and runs
/// the workers.
#[async_trait::async_trait]
pub trait TaskRunner: Send + Sync {
    /// The queue the other modules enqueue through.
    fn queue(&self) -> Arc<dyn JobQueue>;

    /// Registers a module's task; call before any worker starts.
    fn register(&self, task: TaskDef) -> Result<(), JobError>;

    /// The worker `keel serve` runs in-process, when the runner's settings want one.
    fn start_embedded_worker(&self) -> Option<Box<dyn RunningWorker>>;

    /// How many worker processes `keel worker` should run.
    fn worker_processes(&self) -> usize;

    /// One worker process (`keel worker`) on `queues` (empty: every queue) until SIGTERM or
    /// SIGINT.
    async fn run_worker(&self, queues: &[String]) -> Result<(), String>;

    /// Checks what can only be checked once every module's tasks are registered (e.g. that the
    /// deployer's schedules name registered tasks). The server calls it before it starts.
    fn check_registered(&self) -> Result<(), JobError> {
        Ok(())
    }
}

impl crate::capability::Capability for dyn JobQueue {
    const NAME: &'static str = "a job queue";
}

impl crate::capability::Capability for dyn TaskRunner {
    const NAME: &'static str = "a task runner";
}
