//! The rules of enqueueing and reading tasks, over a [`TaskBackend`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use kernel::jobs::{EnqueueRequest, JobError, JobQueue, TaskInput};

use crate::backend::{BackendKind, TaskBackend};
use crate::builtin::RandomSource;
use crate::config::TasksConfig;
use crate::domain::{CancelOutcome, ClaimPolicy, QueueDepth, TaskRecord, TaskStatus};
use crate::error::TasksError;
use crate::registry::{Registry, TaskDefinition};
use crate::waiters::Waiters;

/// The longest accepted `delay_seconds`: 30 days.
pub const MAX_DELAY_SECONDS: u64 = 30 * 24 * 3600;

/// The longest a result request may wait for its job to end (`?wait=`, seconds).
pub const MAX_WAIT_SECONDS: u64 = 30;

/// The seconds of a `?wait=` value: a whole number from 1 to [`MAX_WAIT_SECONDS`].
pub(crate) fn wait_seconds(raw: &str) -> Result<u64, TasksError> {
    raw.parse::<u64>()
        .ok()
        .filter(|s| (1..=MAX_WAIT_SECONDS).contains(s))
        .ok_or_else(|| {
            TasksError::Invalid(format!(
                "wait must be a whole number of seconds from 1 to {MAX_WAIT_SECONDS}"
            ))
        })
}

/// A job just queued.
#[derive(Debug, Clone, PartialEq)]
pub struct Enqueued {
    pub record: TaskRecord,
    /// When the job becomes eligible to run (`queued_at` + the delay).
    pub estimated_start: NaiveDateTime,
}

/// Registered tasks and the state of each queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    pub backend: BackendKind,
    pub available_tasks: Vec<String>,
    pub queues: BTreeMap<String, Vec<String>>,
    pub depths: BTreeMap<String, QueueDepth>,
}

/// Enqueues and reads tasks; shared by the HTTP handlers, the CLI, the workers and other modules
/// (through [`JobQueue`]).
pub struct TasksService {
    backend: Arc<dyn TaskBackend>,
    registry: Registry,
    config: TasksConfig,
    random: Arc<dyn RandomSource>,
    waiters: Arc<Waiters>,
}

impl TasksService {
    pub(crate) fn new(
        config: TasksConfig,
        backend: Arc<dyn TaskBackend>,
        random: Arc<dyn RandomSource>,
    ) -> TasksService {
        TasksService {
            backend,
            registry: Registry::default(),
            config,
            random,
            waiters: Arc::default(),
        }
    }

    pub fn config(&self) -> &TasksConfig {
        &self.config
    }

    pub fn backend(&self) -> &Arc<dyn TaskBackend> {
        &self.backend
    }

    pub fn random(&self) -> &Arc<dyn RandomSource> {
        &self.random
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn register(&self, def: TaskDefinition) -> Result<(), TasksError> {
        self.registry.register(def)
    }

    /// Every registered task name, sorted.
    pub fn task_names(&self) -> Vec<String> {
        self.registry.names()
    }

    /// Every queue, sorted.
    pub fn queues(&self) -> Vec<String> {
        self.registry.queues()
    }

    pub fn claim_policy(&self) -> ClaimPolicy {
        ClaimPolicy {
            visibility_timeout: self.config.visibility_timeout,
            max_tries: self.config.max_tries,
            keep_result: self.config.keep_result,
        }
    }

    /// Queues a registered task. The task name is checked first, then the queue.
    pub async fn enqueue(&self, request: EnqueueRequest) -> Result<Enqueued, TasksError> {
        self.enqueue_as(request, None).await
    }

    /// Queues a registered task for a user of the API, who may then cancel it.
    pub async fn enqueue_as(
        &self,
        request: EnqueueRequest,
        enqueued_by: Option<i64>,
    ) -> Result<Enqueued, TasksError> {
        let def = self
            .registry
            .get(&request.task_name)
            .ok_or_else(|| TasksError::UnknownTask {
                name: shortened(&request.task_name),
                available: self.registry.names(),
            })?;
        if let Some(queue) = request.queue.as_deref()
            && queue != def.queue
        {
            if !self.registry.has_queue(queue) {
                return Err(TasksError::UnknownQueue {
                    queue: queue.to_owned(),
                    available: self.registry.queues(),
                });
            }
            return Err(TasksError::WrongQueue {
                task: def.name,
                expected: def.queue,
                requested: queue.to_owned(),
            });
        }
        if request.delay_seconds > MAX_DELAY_SECONDS {
            return Err(TasksError::Invalid(format!(
                "delay_seconds must be between 0 and {MAX_DELAY_SECONDS}"
            )));
        }
        let input = TaskInput {
            args: request.args,
            kwargs: request.kwargs,
            attempt: 0,
        };
        if let Some(check) = &def.check {
            check(&input).map_err(|message| TasksError::InvalidArguments {
                task: def.name.clone(),
                message,
            })?;
        }
        let mut record = TaskRecord::new(def.name, def.queue, input.args, input.kwargs);
        record.enqueued_by = enqueued_by;
        let delay = Duration::from_secs(request.delay_seconds);
        self.backend.enqueue(&record, delay).await?;
        let estimated_start = record.queued_at
            + chrono::Duration::seconds(i64::try_from(request.delay_seconds).unwrap_or(0));
        tracing::debug!(task_id = %record.task_id, task = %record.task_name, queue = %record.queue, "task queued");
        Ok(Enqueued {
            record,
            estimated_start,
        })
    }

    /// A task by id: 404 when unknown or expired.
    pub async fn status(&self, task_id: &str) -> Result<TaskRecord, TasksError> {
        self.backend
            .get(task_id)
            .await?
            .ok_or_else(|| TasksError::NotFound(task_id.to_owned()))
    }

    /// A task by id once it has ended (completed or failed), or as it is when `wait_seconds`
    /// (1 to `MAX_WAIT_SECONDS`, 30) have passed first. Woken by the backend's announcement of the
    /// job's end, never by polling; a caller dropped meanwhile leaves nothing behind. 404 when
    /// unknown or expired.
    pub async fn wait_for_end(
        &self,
        task_id: &str,
        wait_seconds: u64,
    ) -> Result<TaskRecord, TasksError> {
        let wait_seconds = wait_seconds.clamp(1, MAX_WAIT_SECONDS);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_seconds);
        let waiter = self.waiters.wait_for(&self.backend, task_id);
        loop {
            // Armed before the read, so that an end announced between the two is not missed.
            let woken = waiter.notify().notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let record = self.status(task_id).await?;
            if record.status.is_finished() {
                return Ok(record);
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return Ok(record);
            }
        }
    }

    /// Cancels a queued or delayed job, or asks the worker running it to stop; returns what was
    /// done and the job as it is now. Only its enqueuer or an administrator may: anyone else is
    /// told it does not exist (404), as for an unknown id. A job already cancelled answers as
    /// if cancelled now; one that completed or failed is refused (409).
    pub async fn cancel(
        &self,
        task_id: &str,
        by: &Canceller,
    ) -> Result<(CancelOutcome, TaskRecord), TasksError> {
        let record = self.status(task_id).await?;
        if !by.may_cancel(&record) {
            return Err(TasksError::NotFound(task_id.to_owned()));
        }
        let outcome = self
            .backend
            .cancel(task_id, self.config.keep_result)
            .await?;
        match outcome {
            CancelOutcome::Missing => Err(TasksError::NotFound(task_id.to_owned())),
            CancelOutcome::Finished(TaskStatus::Cancelled) => {
                Ok((CancelOutcome::Cancelled, self.status(task_id).await?))
            }
            CancelOutcome::Finished(status) => Err(TasksError::AlreadyFinished {
                task_id: task_id.to_owned(),
                status: status.as_str().to_owned(),
            }),
            CancelOutcome::Cancelled | CancelOutcome::Requested => {
                tracing::info!(task_id, ?outcome, "task cancellation");
                Ok((outcome, self.status(task_id).await?))
            }
        }
    }

    /// How many result requests wait for their job now.
    pub fn waiting(&self) -> usize {
        self.waiters.count()
    }

    pub async fn overview(&self) -> Result<Overview, TasksError> {
        let queues = self.registry.by_queue();
        let mut depths = BTreeMap::new();
        for queue in queues.keys() {
            depths.insert(queue.clone(), self.backend.depth(queue).await?);
        }
        Ok(Overview {
            backend: self.backend.kind(),
            available_tasks: self.registry.names(),
            queues,
            depths,
        })
    }
}

/// Who asks to cancel a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canceller {
    /// The user, when the caller is one.
    pub user_id: Option<i64>,
    /// An administrator (or an open deployment, where everyone is).
    pub admin: bool,
}

impl Canceller {
    fn may_cancel(&self, record: &TaskRecord) -> bool {
        self.admin || (self.user_id.is_some() && self.user_id == record.enqueued_by)
    }
}

#[async_trait::async_trait]
impl JobQueue for TasksService {
    async fn enqueue(&self, request: EnqueueRequest) -> Result<String, JobError> {
        Ok(TasksService::enqueue(self, request).await?.record.task_id)
    }
}

/// The longest piece of a client's task name echoed back (answers and logs).
const ECHO_MAX_CHARS: usize = 100;

/// `raw`, cut to [`ECHO_MAX_CHARS`] characters with `…` when longer.
fn shortened(raw: &str) -> String {
    match raw.char_indices().nth(ECHO_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &raw[..cut]),
        None => raw.to_owned(),
    }
}
