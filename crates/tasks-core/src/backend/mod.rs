//! Queue backends: one trait, two implementations (Redis and in-memory) with the same semantics,
//! checked by one shared test suite.

use std::time::Duration;

use futures_util::stream::BoxStream;

use std::collections::HashMap;

use crate::domain::{
    CancelOutcome, ClaimPolicy, Held, LastRun, Lease, Outcome, QueueDepth, TaskRecord,
};
use crate::error::TasksError;

pub mod memory;
pub mod redis;

pub use memory::MemoryBackend;
pub use redis::RedisBackend;

/// Which backend is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Redis,
    Memory,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Redis => "redis",
            BackendKind::Memory => "memory",
        }
    }
}

/// What [`TaskBackend::finished`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// This job just ended (completed or failed).
    Job(String),
    /// Announcements may have been missed (the listener fell behind): every waiter looks again.
    Missed,
}

/// Storage and delivery of jobs.
///
/// Delivery is at least once: [`TaskBackend::fetch`] hands a job to one worker under a lease;
/// the worker renews it with [`TaskBackend::heartbeat`] and settles it with
/// [`TaskBackend::finish`]. A lease not renewed for the visibility timeout is handed to another
/// worker with a new token, and the old token can no longer settle the job, so every job ends with
/// exactly one stored outcome.
#[async_trait::async_trait]
pub trait TaskBackend: Send + Sync + 'static {
    fn kind(&self) -> BackendKind;

    /// Whether the backend answers.
    async fn ping(&self) -> Result<(), TasksError>;

    /// Prepares a queue for delivery (idempotent).
    async fn prepare(&self, queue: &str) -> Result<(), TasksError>;

    /// Stores a new job and queues it, to run after `delay`.
    async fn enqueue(&self, job: &TaskRecord, delay: Duration) -> Result<(), TasksError>;

    /// A job by id; `None` when unknown or expired.
    async fn get(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError>;

    async fn depth(&self, queue: &str) -> Result<QueueDepth, TasksError>;

    /// Up to `max` jobs of `queue` for `consumer`: delayed jobs that are due, jobs of workers not
    /// heard of for the visibility timeout, and new jobs. Waits up to `wait` when there are none.
    async fn fetch(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        wait: Duration,
        policy: &ClaimPolicy,
    ) -> Result<Vec<Lease>, TasksError>;

    /// Renews a lease: whether the job is still held under it, and whether it was cancelled.
    async fn heartbeat(&self, lease: &Lease) -> Result<Held, TasksError>;

    /// Settles a job; `false` (and no change) when the lease was lost to another worker.
    async fn finish(
        &self,
        lease: &Lease,
        outcome: &Outcome,
        keep: Duration,
    ) -> Result<bool, TasksError>;

    /// Hands a job back unfinished (graceful shutdown): it is queued again at once and the
    /// interrupted attempt is not counted.
    async fn release(&self, lease: &Lease) -> Result<bool, TasksError>;

    /// Removes expired data and forgets idle workers; returns how many items went.
    async fn purge_expired(&self) -> Result<u64, TasksError>;

    /// The jobs that end from now on, announced by whichever process settles them: for the
    /// waiters of `GET /result/{id}?wait=`. The stream ends when the listener's connection is
    /// lost (the caller then listens again; it may have missed announcements meanwhile).
    async fn finished(&self) -> Result<BoxStream<'static, Finished>, TasksError>;

    /// Stores and queues the run of a periodic task due at `due_ms` (Unix ms), unless that run
    /// was already claimed, by this or any other process: the claim is kept `claim_ttl`. Returns
    /// whether this call claimed it (and so queued `job`).
    async fn enqueue_scheduled(
        &self,
        job: &TaskRecord,
        due_ms: i64,
        claim_ttl: Duration,
    ) -> Result<bool, TasksError>;

    /// Each periodic task's latest run, by task name.
    async fn last_runs(&self) -> Result<HashMap<String, LastRun>, TasksError>;

    /// Failed jobs still kept (dead letters), most recent failure first: `limit` of them from
    /// `offset`, and how many there are.
    async fn failed_page(
        &self,
        offset: u64,
        limit: u64,
        keep: Duration,
    ) -> Result<(Vec<TaskRecord>, u64), TasksError>;

    /// Queues a failed job again (attempts start over) and removes its dead letter, in one step.
    /// `None` when `task_id` is not a kept failed job.
    async fn retry_failed(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError>;

    /// Removes a failed job and its dead letter; `false` when it is not a kept failed job.
    async fn drop_failed(&self, task_id: &str) -> Result<bool, TasksError>;

    /// Cancels a queued or delayed job at once, or asks the worker running it to stop.
    async fn cancel(&self, task_id: &str, keep: Duration) -> Result<CancelOutcome, TasksError>;

    /// The ids of running jobs whose cancellation is requested from now on (for the workers).
    /// The stream ends when the listener's connection is lost (the caller listens again; the
    /// lease renewal catches any request missed meanwhile).
    async fn cancellations(&self) -> Result<BoxStream<'static, String>, TasksError>;

    /// Forgets a worker that stopped cleanly (a no-op where nothing is kept per worker).
    async fn forget_consumer(&self, _queue: &str, _consumer: &str) -> Result<(), TasksError> {
        Ok(())
    }
}
