//! The in-process queue: the same semantics as Redis (leases, visibility timeout, delayed jobs,
//! retention), kept in one process's memory. Jobs and results die with the process.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use tokio::sync::{Notify, broadcast};

use super::{BackendKind, Finished, TaskBackend};
use crate::domain::{
    CANCELLED_ERROR, CancelOutcome, ClaimPolicy, Held, LastRun, Lease, Outcome, QueueDepth,
    TaskRecord, TaskStatus, worker_lost_error,
};
use crate::error::TasksError;

/// Jobs announced as finished that a slow listener may fall behind by before it is told it
/// missed some ([`Finished::Missed`]).
const FINISHED_BACKLOG: usize = 4096;

/// The in-memory backend. Share one instance (in an `Arc`) between the API and the workers.
pub struct MemoryBackend {
    inner: Mutex<Inner>,
    /// Wakes waiting fetches when jobs become available.
    notify: Notify,
    /// Announces jobs that end (see [`TaskBackend::finished`]).
    finished: broadcast::Sender<String>,
    /// Announces running jobs to stop (see [`TaskBackend::cancellations`]).
    cancels: broadcast::Sender<String>,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend {
            inner: Mutex::default(),
            notify: Notify::new(),
            finished: broadcast::channel(FINISHED_BACKLOG).0,
            cancels: broadcast::channel(FINISHED_BACKLOG).0,
        }
    }
}

#[derive(Default)]
struct Inner {
    jobs: HashMap<String, Stored>,
    queues: HashMap<String, MemQueue>,
    seq: u64,
    /// Claimed runs of periodic tasks: (task, due ms) until when the claim is kept.
    claims: HashMap<(String, i64), Instant>,
    last_runs: HashMap<String, LastRun>,
}

struct Stored {
    record: TaskRecord,
    /// The token of the lease that holds the job while it runs.
    lease: Option<String>,
    /// Set when the job is finished.
    expires_at: Option<Instant>,
    /// Its cancellation was asked for while it ran.
    cancel_requested: bool,
}

impl Stored {
    fn new(record: TaskRecord) -> Stored {
        Stored {
            record,
            lease: None,
            expires_at: None,
            cancel_requested: false,
        }
    }

    /// Ends the job as cancelled.
    fn cancelled(&mut self, expires_at: Instant) {
        self.record.status = TaskStatus::Cancelled;
        self.record.error = Some(CANCELLED_ERROR.to_owned());
        self.record.finished_at = Some(kernel::time::now());
        self.lease = None;
        self.expires_at = Some(expires_at);
    }

    fn is_kept_failure(&self, now: Instant) -> bool {
        self.record.status == TaskStatus::Failed && self.expires_at.is_none_or(|t| t > now)
    }
}

#[derive(Default)]
struct MemQueue {
    ready: VecDeque<String>,
    /// (due, sequence, task id)
    delayed: BTreeSet<(Instant, u64, String)>,
    inflight: HashMap<String, InFlight>,
}

struct InFlight {
    token: String,
    deadline: Instant,
    visibility: Duration,
}

impl MemoryBackend {
    pub fn new() -> MemoryBackend {
        MemoryBackend::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Hands out up to `max` jobs of `queue`: due delayed jobs move to the ready list first, then
    /// jobs of workers not heard of for the visibility timeout are taken over, then ready jobs.
    fn take(
        &mut self,
        queue: &str,
        consumer: &str,
        max: usize,
        now: Instant,
        policy: &ClaimPolicy,
        finished: &broadcast::Sender<String>,
    ) -> Vec<Lease> {
        let q = self.queues.entry(queue.to_owned()).or_default();
        while let Some((due, _, _)) = q.delayed.first() {
            if *due > now {
                break;
            }
            if let Some((_, _, id)) = q.delayed.pop_first() {
                q.ready.push_back(id);
            }
        }
        let mut expired: Vec<(Instant, String)> = q
            .inflight
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(id, f)| (f.deadline, id.clone()))
            .collect();
        expired.sort();
        let mut picked: Vec<String> = Vec::new();
        for (_, id) in expired.into_iter().take(max) {
            q.inflight.remove(&id);
            picked.push(id);
        }
        while picked.len() < max {
            match q.ready.pop_front() {
                Some(id) => picked.push(id),
                None => break,
            }
        }

        let mut leases = Vec::new();
        for id in picked {
            let Some(stored) = self.jobs.get_mut(&id) else {
                continue;
            };
            if stored.record.status.is_finished() {
                continue;
            }
            if stored.cancel_requested {
                stored.cancelled(now + policy.keep_result);
                let _ = finished.send(id);
                continue;
            }
            let record = &mut stored.record;
            if record.status == TaskStatus::InProgress && record.attempts >= policy.max_tries {
                record.status = TaskStatus::Failed;
                record.error = Some(worker_lost_error(record.attempts, policy.max_tries));
                record.finished_at = Some(kernel::time::now());
                stored.lease = None;
                stored.expires_at = Some(now + policy.keep_result);
                continue;
            }
            let token = uuid::Uuid::new_v4().to_string();
            record.attempts += 1;
            record.status = TaskStatus::InProgress;
            record.started_at = Some(kernel::time::now());
            stored.lease = Some(token.clone());
            q.inflight.insert(
                id.clone(),
                InFlight {
                    token: token.clone(),
                    deadline: now + policy.visibility_timeout,
                    visibility: policy.visibility_timeout,
                },
            );
            leases.push(Lease {
                task_id: id,
                task_name: record.task_name.clone(),
                queue: queue.to_owned(),
                args: record.args.clone(),
                kwargs: record.kwargs.clone(),
                attempt: record.attempts,
                token: token.clone(),
                consumer: consumer.to_owned(),
                delivery: token,
            });
        }
        leases
    }

    /// When something of `queue` may next become available without an enqueue.
    fn next_event(&self, queue: &str) -> Option<Instant> {
        let q = self.queues.get(queue)?;
        let delayed = q.delayed.first().map(|(due, _, _)| *due);
        let expiry = q.inflight.values().map(|f| f.deadline).min();
        match (delayed, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The stored job of a lease, when the lease still holds it.
    fn held(&mut self, lease: &Lease) -> Option<&mut Stored> {
        self.jobs
            .get_mut(&lease.task_id)
            .filter(|s| s.lease.as_deref() == Some(lease.token.as_str()))
    }
}

#[async_trait::async_trait]
impl TaskBackend for MemoryBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Memory
    }

    async fn ping(&self) -> Result<(), TasksError> {
        Ok(())
    }

    async fn prepare(&self, queue: &str) -> Result<(), TasksError> {
        self.lock().queues.entry(queue.to_owned()).or_default();
        Ok(())
    }

    async fn enqueue(&self, job: &TaskRecord, delay: Duration) -> Result<(), TasksError> {
        {
            let mut inner = self.lock();
            let seq = inner.next_seq();
            inner
                .jobs
                .insert(job.task_id.clone(), Stored::new(job.clone()));
            let q = inner.queues.entry(job.queue.clone()).or_default();
            if delay.is_zero() {
                q.ready.push_back(job.task_id.clone());
            } else {
                q.delayed
                    .insert((Instant::now() + delay, seq, job.task_id.clone()));
            }
        }
        self.notify.notify_waiters();
        Ok(())
    }

    async fn get(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError> {
        let mut inner = self.lock();
        let now = Instant::now();
        match inner.jobs.get(task_id) {
            None => Ok(None),
            Some(s) if s.expires_at.is_some_and(|t| t <= now) => {
                inner.jobs.remove(task_id);
                Ok(None)
            }
            Some(s) => Ok(Some(s.record.clone())),
        }
    }

    async fn depth(&self, queue: &str) -> Result<QueueDepth, TasksError> {
        let inner = self.lock();
        Ok(inner
            .queues
            .get(queue)
            .map(|q| QueueDepth {
                queued: q.ready.len() as u64,
                scheduled: q.delayed.len() as u64,
                in_progress: q.inflight.len() as u64,
            })
            .unwrap_or_default())
    }

    async fn fetch(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        wait: Duration,
        policy: &ClaimPolicy,
    ) -> Result<Vec<Lease>, TasksError> {
        let deadline = Instant::now() + wait;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_event = {
                let mut inner = self.lock();
                let leases =
                    inner.take(queue, consumer, max, Instant::now(), policy, &self.finished);
                if !leases.is_empty() {
                    return Ok(leases);
                }
                inner.next_event(queue)
            };
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let until = next_event.map_or(deadline, |t| t.min(deadline));
            let _ = tokio::time::timeout_at(tokio::time::Instant::from_std(until), notified).await;
        }
    }

    async fn heartbeat(&self, lease: &Lease) -> Result<Held, TasksError> {
        let mut inner = self.lock();
        let cancelled = match inner.held(lease) {
            None => return Ok(Held::Lost),
            Some(stored) => stored.cancel_requested,
        };
        let Some(f) = inner
            .queues
            .get_mut(&lease.queue)
            .and_then(|q| q.inflight.get_mut(&lease.task_id))
            .filter(|f| f.token == lease.token)
        else {
            return Ok(Held::Lost);
        };
        f.deadline = Instant::now() + f.visibility;
        Ok(if cancelled {
            Held::Cancelled
        } else {
            Held::Yes
        })
    }

    async fn finish(
        &self,
        lease: &Lease,
        outcome: &Outcome,
        keep: Duration,
    ) -> Result<bool, TasksError> {
        {
            let mut inner = self.lock();
            let now = Instant::now();
            let seq = inner.next_seq();
            let Some(stored) = inner.held(lease) else {
                return Ok(false);
            };
            stored.lease = None;
            // A retry of a job whose cancellation was asked for is its end.
            let cancelled = Outcome::Cancelled;
            let outcome = match outcome {
                Outcome::Retry { .. } if stored.cancel_requested => &cancelled,
                other => other,
            };
            let mut retry_at = None;
            if !matches!(outcome, Outcome::Retry { .. }) {
                // No listener is not an error: nobody waits.
                let _ = self.finished.send(lease.task_id.clone());
            }
            if matches!(outcome, Outcome::Cancelled) {
                stored.cancelled(now + keep);
            }
            let record = &mut stored.record;
            match outcome {
                Outcome::Cancelled => {}
                Outcome::Completed(value) => {
                    record.status = TaskStatus::Completed;
                    record.result = Some(value.clone());
                    record.error = None;
                    record.finished_at = Some(kernel::time::now());
                    stored.expires_at = Some(now + keep);
                }
                Outcome::Failed(error) => {
                    record.status = TaskStatus::Failed;
                    record.error = Some(error.clone());
                    record.finished_at = Some(kernel::time::now());
                    stored.expires_at = Some(now + keep);
                }
                Outcome::Retry { error, delay } => {
                    record.status = TaskStatus::Queued;
                    record.error = Some(error.clone());
                    retry_at = Some(now + *delay);
                }
            }
            let q = inner.queues.entry(lease.queue.clone()).or_default();
            q.inflight.remove(&lease.task_id);
            if let Some(due) = retry_at {
                q.delayed.insert((due, seq, lease.task_id.clone()));
            }
        }
        self.notify.notify_waiters();
        Ok(true)
    }

    async fn finished(&self) -> Result<BoxStream<'static, Finished>, TasksError> {
        let receiver = self.finished.subscribe();
        Ok(
            futures_util::stream::unfold(receiver, |mut receiver| async move {
                match receiver.recv().await {
                    Ok(id) => Some((Finished::Job(id), receiver)),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        Some((Finished::Missed, receiver))
                    }
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            })
            .boxed(),
        )
    }

    async fn release(&self, lease: &Lease) -> Result<bool, TasksError> {
        {
            let mut inner = self.lock();
            let Some(stored) = inner.held(lease) else {
                return Ok(false);
            };
            stored.lease = None;
            stored.record.status = TaskStatus::Queued;
            stored.record.attempts = stored.record.attempts.saturating_sub(1);
            stored.record.started_at = None;
            let q = inner.queues.entry(lease.queue.clone()).or_default();
            q.inflight.remove(&lease.task_id);
            q.ready.push_front(lease.task_id.clone());
        }
        self.notify.notify_waiters();
        Ok(true)
    }

    async fn purge_expired(&self) -> Result<u64, TasksError> {
        let mut inner = self.lock();
        let now = Instant::now();
        let before = inner.jobs.len();
        inner
            .jobs
            .retain(|_, s| s.expires_at.is_none_or(|t| t > now));
        inner.claims.retain(|_, until| *until > now);
        Ok((before - inner.jobs.len()) as u64)
    }

    async fn enqueue_scheduled(
        &self,
        job: &TaskRecord,
        due_ms: i64,
        claim_ttl: Duration,
    ) -> Result<bool, TasksError> {
        {
            let mut inner = self.lock();
            let now = Instant::now();
            inner.claims.retain(|_, until| *until > now);
            let claim = (job.task_name.clone(), due_ms);
            if inner.claims.contains_key(&claim) {
                return Ok(false);
            }
            inner.claims.insert(claim, now + claim_ttl);
            inner.last_runs.insert(
                job.task_name.clone(),
                LastRun {
                    due_ms,
                    task_id: job.task_id.clone(),
                },
            );
            inner
                .jobs
                .insert(job.task_id.clone(), Stored::new(job.clone()));
            let q = inner.queues.entry(job.queue.clone()).or_default();
            q.ready.push_back(job.task_id.clone());
        }
        self.notify.notify_waiters();
        Ok(true)
    }

    async fn last_runs(&self) -> Result<HashMap<String, LastRun>, TasksError> {
        Ok(self.lock().last_runs.clone())
    }

    async fn failed_page(
        &self,
        offset: u64,
        limit: u64,
        _keep: Duration,
    ) -> Result<(Vec<TaskRecord>, u64), TasksError> {
        let inner = self.lock();
        let now = Instant::now();
        let mut failed: Vec<&TaskRecord> = inner
            .jobs
            .values()
            .filter(|s| s.is_kept_failure(now))
            .map(|s| &s.record)
            .collect();
        failed.sort_by(|a, b| {
            b.finished_at
                .cmp(&a.finished_at)
                .then_with(|| b.task_id.cmp(&a.task_id))
        });
        let total = failed.len() as u64;
        let page = failed
            .into_iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        Ok((page, total))
    }

    async fn retry_failed(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError> {
        let record = {
            let mut inner = self.lock();
            let now = Instant::now();
            let Some(stored) = inner
                .jobs
                .get_mut(task_id)
                .filter(|s| s.is_kept_failure(now))
            else {
                return Ok(None);
            };
            let record = &mut stored.record;
            record.status = TaskStatus::Queued;
            record.attempts = 0;
            record.error = None;
            record.result = None;
            record.started_at = None;
            record.finished_at = None;
            record.queued_at = kernel::time::now();
            stored.expires_at = None;
            stored.cancel_requested = false;
            let record = stored.record.clone();
            inner
                .queues
                .entry(record.queue.clone())
                .or_default()
                .ready
                .push_back(task_id.to_owned());
            record
        };
        self.notify.notify_waiters();
        Ok(Some(record))
    }

    async fn drop_failed(&self, task_id: &str) -> Result<bool, TasksError> {
        let mut inner = self.lock();
        let now = Instant::now();
        if !inner
            .jobs
            .get(task_id)
            .is_some_and(|s| s.is_kept_failure(now))
        {
            return Ok(false);
        }
        inner.jobs.remove(task_id);
        Ok(true)
    }

    async fn cancel(&self, task_id: &str, keep: Duration) -> Result<CancelOutcome, TasksError> {
        let mut inner = self.lock();
        let now = Instant::now();
        let Some(stored) = inner
            .jobs
            .get_mut(task_id)
            .filter(|s| s.expires_at.is_none_or(|t| t > now))
        else {
            return Ok(CancelOutcome::Missing);
        };
        match stored.record.status {
            TaskStatus::Queued => {
                stored.cancelled(now + keep);
                let queue = stored.record.queue.clone();
                if let Some(q) = inner.queues.get_mut(&queue) {
                    q.ready.retain(|id| id != task_id);
                    q.delayed.retain(|(_, _, id)| id != task_id);
                }
                let _ = self.finished.send(task_id.to_owned());
                Ok(CancelOutcome::Cancelled)
            }
            TaskStatus::InProgress => {
                stored.cancel_requested = true;
                let _ = self.cancels.send(task_id.to_owned());
                Ok(CancelOutcome::Requested)
            }
            done => Ok(CancelOutcome::Finished(done)),
        }
    }

    async fn cancellations(&self) -> Result<BoxStream<'static, String>, TasksError> {
        let receiver = self.cancels.subscribe();
        Ok(
            futures_util::stream::unfold(receiver, |mut receiver| async move {
                loop {
                    match receiver.recv().await {
                        Ok(id) => return Some((id, receiver)),
                        // A missed request is caught by the next lease renewal.
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            })
            .boxed(),
        )
    }
}
