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
    ClaimPolicy, Lease, Outcome, QueueDepth, TaskRecord, TaskStatus, worker_lost_error,
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
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend {
            inner: Mutex::default(),
            notify: Notify::new(),
            finished: broadcast::channel(FINISHED_BACKLOG).0,
        }
    }
}

#[derive(Default)]
struct Inner {
    jobs: HashMap<String, Stored>,
    queues: HashMap<String, MemQueue>,
    seq: u64,
}

struct Stored {
    record: TaskRecord,
    /// The token of the lease that holds the job while it runs.
    lease: Option<String>,
    /// Set when the job is finished.
    expires_at: Option<Instant>,
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
            let record = &mut stored.record;
            if record.status.is_finished() {
                continue;
            }
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
            inner.jobs.insert(
                job.task_id.clone(),
                Stored {
                    record: job.clone(),
                    lease: None,
                    expires_at: None,
                },
            );
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
                let leases = inner.take(queue, consumer, max, Instant::now(), policy);
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

    async fn heartbeat(&self, lease: &Lease) -> Result<bool, TasksError> {
        let mut inner = self.lock();
        if inner.held(lease).is_none() {
            return Ok(false);
        }
        let Some(f) = inner
            .queues
            .get_mut(&lease.queue)
            .and_then(|q| q.inflight.get_mut(&lease.task_id))
            .filter(|f| f.token == lease.token)
        else {
            return Ok(false);
        };
        f.deadline = Instant::now() + f.visibility;
        Ok(true)
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
            let record = &mut stored.record;
            let mut retry_at = None;
            if !matches!(outcome, Outcome::Retry { .. }) {
                // No listener is not an error: nobody waits.
                let _ = self.finished.send(lease.task_id.clone());
            }
            match outcome {
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
        Ok((before - inner.jobs.len()) as u64)
    }
}
