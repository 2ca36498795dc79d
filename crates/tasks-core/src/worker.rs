//! Workers: one loop per queue, `WORKER_THREADS` jobs at a time per queue, each attempt under a
//! time limit and a renewed lease; failures retry with exponential backoff; shutdown stops taking
//! jobs, lets running ones finish for a bounded time and hands the rest back to the queue.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt as _};
use kernel::jobs::{TaskInput, TaskResult};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::backend::TaskBackend;
use crate::domain::{Held, Lease, Outcome};
use crate::registry::TaskDefinition;
use crate::service::TasksService;

type Running = Arc<Mutex<HashMap<String, Lease>>>;

/// The running jobs of one worker process that can be told to stop, by task id.
#[derive(Default)]
struct Stoppers(Mutex<HashMap<String, Arc<Notify>>>);

impl Stoppers {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, task_id: &str) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        self.lock().insert(task_id.to_owned(), notify.clone());
        notify
    }

    fn remove(&self, task_id: &str) {
        self.lock().remove(task_id);
    }

    fn stop(&self, task_id: &str) {
        if let Some(notify) = self.lock().get(task_id) {
            // Kept as a permit if the job's runner is not waiting yet.
            notify.notify_one();
        }
    }
}

/// How long the cancellation listener waits before listening again after its connection failed.
const RELISTEN_DELAY: Duration = Duration::from_millis(500);

/// A running worker. Stop it with [`WorkerHandle::shutdown`]; dropping the handle also stops it
/// (in the background, with `WORKER_SHUTDOWN_TIMEOUT_SECONDS`).
pub struct WorkerHandle {
    stop: watch::Sender<Option<Instant>>,
    loops: Vec<JoinHandle<()>>,
    consumer: String,
    queues: Vec<String>,
    default_timeout: Duration,
}

impl WorkerHandle {
    /// This worker's name in the queue (its Redis consumer name).
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The queues this worker serves.
    pub fn queues(&self) -> &[String] {
        &self.queues
    }

    /// Stops taking jobs, waits up to `timeout` for running jobs, then hands the unfinished ones
    /// back to the queue (their interrupted attempt is not counted) and returns.
    pub async fn shutdown(mut self, timeout: Duration) {
        let _ = self.stop.send(Some(Instant::now() + timeout));
        for handle in std::mem::take(&mut self.loops) {
            let _ = handle.await;
        }
        tracing::info!(consumer = %self.consumer, "worker stopped");
    }

    /// Stops at once without settling anything, as a crash would: running jobs are dropped
    /// mid-flight and other workers take them over after the visibility timeout.
    pub fn abort(mut self) {
        for handle in std::mem::take(&mut self.loops) {
            handle.abort();
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if !self.loops.is_empty() {
            let _ = self.stop.send(Some(Instant::now() + self.default_timeout));
        }
    }
}

/// A worker's unique name: host, process id and a random suffix.
fn consumer_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..8])
}

/// Starts one loop per queue (must run inside a Tokio runtime).
pub(crate) fn start(service: Arc<TasksService>, queues: Vec<String>) -> WorkerHandle {
    let consumer = consumer_name();
    let (stop, stopped) = watch::channel(None);
    let stoppers = Arc::new(Stoppers::default());
    let mut loops: Vec<JoinHandle<()>> = queues
        .iter()
        .map(|queue| {
            tokio::spawn(queue_loop(
                service.clone(),
                queue.clone(),
                consumer.clone(),
                stopped.clone(),
                stoppers.clone(),
            ))
        })
        .collect();
    loops.push(tokio::spawn(listen_for_cancels(
        service.clone(),
        stopped.clone(),
        stoppers,
    )));
    loops.push(tokio::spawn(crate::scheduler::run(
        service.clone(),
        stopped.clone(),
    )));
    tracing::info!(%consumer, queues = ?queues, backend = service.backend().kind().as_str(), "worker started");
    WorkerHandle {
        stop,
        loops,
        consumer,
        queues,
        default_timeout: service.config().shutdown_timeout,
    }
}

fn lock(running: &Running) -> MutexGuard<'_, HashMap<String, Lease>> {
    running.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn queue_loop(
    service: Arc<TasksService>,
    queue: String,
    consumer: String,
    mut stop: watch::Receiver<Option<Instant>>,
    stoppers: Arc<Stoppers>,
) {
    let config = service.config().clone();
    let policy = service.claim_policy();
    let backend = service.backend().clone();
    let semaphore = Arc::new(Semaphore::new(config.worker_threads.max(1)));
    let running: Running = Arc::default();
    let mut jobs = JoinSet::new();
    let mut failures = 0u32;
    let mut prepared = false;

    let deadline = loop {
        while jobs.try_join_next().is_some() {}
        if let Some(deadline) = *stop.borrow_and_update() {
            break deadline;
        }
        if !prepared {
            prepared = backend.prepare(&queue).await.is_ok();
        }
        let permit = tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() {
                    break Instant::now() + config.shutdown_timeout;
                }
                continue;
            }
            permit = semaphore.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break Instant::now(),
            },
        };
        let mut permits = vec![permit];
        while let Ok(permit) = semaphore.clone().try_acquire_owned() {
            permits.push(permit);
        }
        match backend
            .fetch(
                &queue,
                &consumer,
                permits.len(),
                config.poll_interval,
                &policy,
            )
            .await
        {
            Ok(leases) => {
                if failures > 0 {
                    tracing::info!(%queue, "task queue reachable again");
                }
                failures = 0;
                for lease in leases {
                    let Some(permit) = permits.pop() else {
                        break;
                    };
                    lock(&running).insert(lease.task_id.clone(), lease.clone());
                    let cancelled = stoppers.add(&lease.task_id);
                    jobs.spawn(run_job(
                        service.clone(),
                        lease,
                        permit,
                        running.clone(),
                        (stoppers.clone(), cancelled),
                    ));
                }
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                if failures == 1 || failures.is_multiple_of(30) {
                    tracing::warn!(%queue, error = %e, "cannot fetch jobs; retrying");
                }
                drop(permits);
                let pause = Duration::from_millis(100)
                    .saturating_mul(1u32 << failures.min(6))
                    .min(Duration::from_secs(5));
                tokio::select! {
                    _ = stop.changed() => {}
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    };

    let drained = tokio::time::timeout_at(deadline, async {
        while jobs.join_next().await.is_some() {}
    })
    .await
    .is_ok();
    if !drained {
        jobs.shutdown().await;
        let unfinished: Vec<Lease> = lock(&running).drain().map(|(_, lease)| lease).collect();
        for lease in unfinished {
            match backend.release(&lease).await {
                Ok(_) => {
                    tracing::info!(task_id = %lease.task_id, "unfinished task handed back to the queue")
                }
                Err(e) => tracing::warn!(task_id = %lease.task_id, error = %e,
                    "could not hand the task back; it is retried after the visibility timeout"),
            }
        }
    }
    if let Err(e) = backend.forget_consumer(&queue, &consumer).await {
        tracing::debug!(%queue, error = %e, "could not remove the worker's consumer");
    }
}

async fn run_job(
    service: Arc<TasksService>,
    lease: Lease,
    _permit: OwnedSemaphorePermit,
    running: Running,
    (stoppers, cancelled): (Arc<Stoppers>, Arc<Notify>),
) {
    let config = service.config();
    let outcome = match service.registry().get(&lease.task_name) {
        None => Some(Outcome::Failed(format!(
            "Unknown task: {} (not registered in this worker)",
            lease.task_name
        ))),
        Some(def) => {
            let input = TaskInput {
                args: lease.args.clone(),
                kwargs: lease.kwargs.clone(),
                attempt: lease.attempt,
            };
            let limit = def.timeout.unwrap_or(config.task_timeout);
            tokio::select! {
                result = run_attempt(&def, input, limit) => Some(match result {
                    Ok(value) => Outcome::Completed(value),
                    Err(error) if lease.attempt < config.max_tries => Outcome::Retry {
                        error,
                        delay: config.backoff(lease.attempt),
                    },
                    Err(error) => Outcome::Failed(error),
                }),
                held = keep_alive(service.backend().as_ref(), &lease, config.visibility_timeout) => match held {
                    Held::Cancelled => Some(Outcome::Cancelled),
                    Held::Lost | Held::Yes => None,
                },
                // Cancelled: the handler's future is dropped here, at its current await point.
                () = cancelled.notified() => Some(Outcome::Cancelled),
            }
        }
    };
    match outcome {
        Some(outcome) => {
            settle(
                service.backend().as_ref(),
                &lease,
                outcome,
                config.keep_result,
            )
            .await
        }
        None => tracing::warn!(task_id = %lease.task_id,
            "another worker took the task over; this attempt was stopped"),
    }
    lock(&running).remove(&lease.task_id);
    stoppers.remove(&lease.task_id);
}

/// Runs one attempt: its result, or why it failed (error, panic or time limit).
async fn run_attempt(def: &TaskDefinition, input: TaskInput, limit: Duration) -> TaskResult {
    let handler = def.handler.clone();
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| handler(input))) {
        Ok(future) => future,
        Err(panic) => return Err(format!("Task panicked: {}", panic_text(panic.as_ref()))),
    };
    match tokio::time::timeout(limit, AssertUnwindSafe(future).catch_unwind()).await {
        Err(_) => Err(format!("Task timed out after {limit:?}")),
        Ok(Err(panic)) => Err(format!("Task panicked: {}", panic_text(panic.as_ref()))),
        Ok(Ok(result)) => result,
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// Renews the lease every third of the visibility timeout; returns when the lease is lost or the
/// job was cancelled (a cancellation whose announcement was missed is found here).
async fn keep_alive(backend: &dyn TaskBackend, lease: &Lease, visibility: Duration) -> Held {
    let every = (visibility / 3).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(every).await;
        match backend.heartbeat(lease).await {
            Ok(Held::Yes) => {}
            Ok(other) => return other,
            Err(e) => {
                tracing::warn!(task_id = %lease.task_id, error = %e, "cannot renew the lease")
            }
        }
    }
}

/// Stores an attempt's outcome, retrying briefly when the backend is unreachable.
async fn settle(backend: &dyn TaskBackend, lease: &Lease, outcome: Outcome, keep: Duration) {
    let mut pause = Duration::from_millis(100);
    for _ in 0..6 {
        match backend.finish(lease, &outcome, keep).await {
            Ok(true) => {
                if let Some(metric) = outcome.metric() {
                    kernel::metrics::task_job(&lease.queue, metric);
                }
                match &outcome {
                    Outcome::Cancelled => {
                        tracing::info!(task_id = %lease.task_id, task = %lease.task_name, "task cancelled while running")
                    }
                    Outcome::Completed(_) => {
                        tracing::debug!(task_id = %lease.task_id, task = %lease.task_name, "task completed")
                    }
                    Outcome::Retry { error, delay } => {
                        tracing::info!(task_id = %lease.task_id, task = %lease.task_name,
                            attempt = lease.attempt, %error, retry_in = ?delay, "task failed; will retry")
                    }
                    Outcome::Failed(error) => {
                        tracing::warn!(task_id = %lease.task_id, task = %lease.task_name,
                            attempt = lease.attempt, %error, "task failed")
                    }
                }
                return;
            }
            Ok(false) => {
                tracing::warn!(task_id = %lease.task_id,
                    "another worker took the task over; this attempt's outcome was dropped");
                return;
            }
            Err(e) => {
                tracing::warn!(task_id = %lease.task_id, error = %e, "cannot store the outcome; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
    }
    tracing::error!(task_id = %lease.task_id,
        "could not store the outcome; the task runs again after the visibility timeout");
}

/// Tells running jobs of this process to stop when their cancellation is announced, until the
/// worker stops. Listens again when the connection drops; a request missed meanwhile is found
/// by the job's next lease renewal.
async fn listen_for_cancels(
    service: Arc<TasksService>,
    mut stop: watch::Receiver<Option<Instant>>,
    stoppers: Arc<Stoppers>,
) {
    let backend = service.backend().clone();
    loop {
        if stop.borrow_and_update().is_some() {
            return;
        }
        let listening = async {
            match backend.cancellations().await {
                Ok(mut ids) => {
                    while let Some(id) = ids.next().await {
                        stoppers.stop(&id);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "cannot listen for task cancellations")
                }
            }
            tokio::time::sleep(RELISTEN_DELAY).await;
        };
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = listening => {}
        }
    }
}
