//! Jobs, their states and what a worker holds while it runs one. No I/O here.

use std::time::Duration;

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The two built-in queues. Modules may register tasks on further queues.
pub use kernel::jobs::{QUEUE_LOAD_TEST, QUEUE_SYSTEM};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = tasks::TaskStatus)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Waiting to run: new, delayed, or waiting for its next attempt.
    Queued,
    /// A worker is running it.
    InProgress,
    /// Finished with a result.
    Completed,
    /// Finished with an error after its last attempt.
    Failed,
    /// Cancelled before it finished (`DELETE /api/v1/tasks/{task_id}`).
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(raw: &str) -> Option<TaskStatus> {
        [
            TaskStatus::Queued,
            TaskStatus::InProgress,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == raw)
    }

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// A job as stored by a backend.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub task_id: String,
    pub task_name: String,
    pub queue: String,
    pub args: Vec<Value>,
    pub kwargs: Map<String, Value>,
    pub status: TaskStatus,
    pub result: Option<Value>,
    /// The error of the last failed attempt (kept while a retry waits).
    pub error: Option<String>,
    /// Attempts started so far.
    pub attempts: u32,
    pub queued_at: NaiveDateTime,
    /// When the latest attempt started.
    pub started_at: Option<NaiveDateTime>,
    pub finished_at: Option<NaiveDateTime>,
    /// The user who enqueued it through the API (`None`: a module, the scheduler, the CLI, or
    /// an open deployment). They may cancel it.
    pub enqueued_by: Option<i64>,
}

impl TaskRecord {
    /// A new job, queued now.
    pub fn new(
        task_name: String,
        queue: String,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> TaskRecord {
        TaskRecord {
            task_id: uuid::Uuid::new_v4().to_string(),
            task_name,
            queue,
            args,
            kwargs,
            status: TaskStatus::Queued,
            result: None,
            error: None,
            attempts: 0,
            queued_at: kernel::time::now(),
            started_at: None,
            finished_at: None,
            enqueued_by: None,
        }
    }
}

/// A job handed to one worker: valid while the worker keeps renewing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub task_id: String,
    pub task_name: String,
    pub queue: String,
    pub args: Vec<Value>,
    pub kwargs: Map<String, Value>,
    /// This attempt's number, 1-based.
    pub attempt: u32,
    /// Proves that this worker still holds the job; a job taken over by another worker gets a new one.
    pub token: String,
    /// The worker (consumer) holding it.
    pub consumer: String,
    /// The backend's delivery reference (the Redis stream entry id).
    pub delivery: String,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed(Value),
    /// The last attempt failed: the job is finished with this error.
    Failed(String),
    /// The attempt failed and the job runs again after `delay`.
    Retry {
        error: String,
        delay: Duration,
    },
    /// The attempt was stopped because the job was cancelled.
    Cancelled,
}

impl Outcome {
    /// The outcome as the job metric counts it (a cancelled job is not counted).
    pub fn metric(&self) -> Option<kernel::metrics::JobOutcome> {
        match self {
            Outcome::Completed(_) => Some(kernel::metrics::JobOutcome::Succeeded),
            Outcome::Retry { .. } => Some(kernel::metrics::JobOutcome::Retried),
            Outcome::Failed(_) => Some(kernel::metrics::JobOutcome::Failed),
            Outcome::Cancelled => None,
        }
    }
}

/// The rules a backend applies when it hands out jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimPolicy {
    /// A job held by a worker not heard of for this long is given to another worker.
    pub visibility_timeout: Duration,
    /// A job whose last allowed attempt was running when its worker died is failed, not retried.
    pub max_tries: u32,
    /// How long finished jobs are kept.
    pub keep_result: Duration,
}

/// How many jobs of one queue are where.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = tasks::QueueDepth)]
pub struct QueueDepth {
    /// Ready to run now.
    pub queued: u64,
    /// Delayed, or waiting for a retry.
    pub scheduled: u64,
    /// Held by a worker.
    pub in_progress: u64,
}

/// The `error` of a cancelled job.
pub const CANCELLED_ERROR: &str = "Task cancelled";

/// Whether a running job may go on after its lease was renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Still held: go on.
    Yes,
    /// Taken over by another worker (or gone): stop without storing anything.
    Lost,
    /// Still held, but the job was cancelled: stop and store the cancellation.
    Cancelled,
}

/// What `DELETE /api/v1/tasks/{task_id}` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Unknown or expired.
    Missing,
    /// It was queued or delayed: it is cancelled now and will not run.
    Cancelled,
    /// It is running: its worker was asked to stop it.
    Requested,
    /// It had already ended this way.
    Finished(TaskStatus),
}

/// A task's latest scheduled run: its due time (Unix ms) and the job it enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRun {
    pub due_ms: i64,
    pub task_id: String,
}

/// The error of a job whose worker died during its last allowed attempt.
pub fn worker_lost_error(attempts: u32, max_tries: u32) -> String {
    format!(
        "The worker running the task stopped before it finished (attempt {attempts} of {max_tries})"
    )
}

/// Task and queue names become parts of keys: lower-case ASCII letters, digits, `_` and `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for s in [
            TaskStatus::Queued,
            TaskStatus::InProgress,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(Value::String(s.as_str().into()))
            );
        }
        assert!(TaskStatus::Failed.is_finished() && !TaskStatus::Queued.is_finished());
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("io_simulation_task"));
        assert!(valid_name("load-test2"));
        assert!(!valid_name(""));
        assert!(!valid_name("Bad Name"));
        assert!(!valid_name("a:b"));
    }
}
