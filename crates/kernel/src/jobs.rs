//! Background jobs across modules: a module that wants background work registers tasks and
//! enqueues them through [`JobQueue`]; tasks-core implements it (Redis or in-memory).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

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
}

/// Enqueues tasks by name. Returns the new task's id (a UUID string).
#[async_trait::async_trait]
pub trait JobQueue: Send + Sync {
    async fn enqueue(&self, request: EnqueueRequest) -> Result<String, JobError>;
}
