//! The built-in tasks: load-test workloads on `load_test`, maintenance on `system`.

#[cfg(feature = "testing")]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use kernel::jobs::{ArgsCheck, EnqueueRequest, TaskFn, TaskInput, TaskResult};
use serde_json::{Map, Value, json};

use crate::domain::{QUEUE_LOAD_TEST, QUEUE_SYSTEM, TaskStatus};
use crate::registry::TaskDefinition;
use crate::schedule::Schedule;
use crate::service::TasksService;

pub const IO_SIMULATION: &str = "io_simulation_task";
pub const CPU_INTENSIVE: &str = "cpu_intensive_task";
pub const MEMORY_OPERATIONS: &str = "memory_operations_task";
pub const FAILURE_TESTING: &str = "failure_testing_task";
pub const LOAD_TEST_ORCHESTRATOR: &str = "load_test_orchestrator";
pub const SYSTEM_HEALTH_CHECK: &str = "system_health_check";
pub const CLEANUP_EXPIRED_DATA: &str = "cleanup_expired_data";
/// When `cleanup_expired_data` runs unless `TASK_SCHEDULES` says otherwise: daily at 00:00 UTC.
pub const CLEANUP_SCHEDULE: &str = "@daily";

/// Where the built-in tasks get their randomness (`failure_testing_task`'s roll); tests inject
/// [`SequenceRandom`] to make it deterministic.
pub trait RandomSource: Send + Sync {
    /// A number in `[0, 1)`.
    fn next_f64(&self) -> f64;
}

/// Random numbers from the operating system's generator.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemRandom;

impl RandomSource for SystemRandom {
    fn next_f64(&self) -> f64 {
        // The low 53 bits of a v4 UUID are random (version and variant bits sit higher).
        let bits = (uuid::Uuid::new_v4().as_u128() & ((1u128 << 53) - 1)) as u64;
        bits as f64 / (1u64 << 53) as f64
    }
}

/// Returns the given numbers in turn, starting over at the end (tests).
#[cfg(feature = "testing")]
#[derive(Debug)]
pub struct SequenceRandom {
    values: Vec<f64>,
    next: AtomicUsize,
}

#[cfg(feature = "testing")]
impl SequenceRandom {
    pub fn new(values: Vec<f64>) -> SequenceRandom {
        SequenceRandom {
            values,
            next: AtomicUsize::new(0),
        }
    }
}

#[cfg(feature = "testing")]
impl RandomSource for SequenceRandom {
    fn next_f64(&self) -> f64 {
        if self.values.is_empty() {
            return 0.5;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.values.len();
        self.values[i].clamp(0.0, 1.0)
    }
}

fn task<F, Fut>(f: F) -> TaskFn
where
    F: Fn(TaskInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = TaskResult> + Send + 'static,
{
    Arc::new(move |input| Box::pin(f(input)))
}

/// A task that needs the service; it fails cleanly if the module is gone.
fn service_task<F, Fut>(service: &Arc<TasksService>, f: F) -> TaskFn
where
    F: Fn(Arc<TasksService>, TaskInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = TaskResult> + Send + 'static,
{
    let weak: Weak<TasksService> = Arc::downgrade(service);
    let f = Arc::new(f);
    Arc::new(move |input| {
        let weak = weak.clone();
        let f = f.clone();
        Box::pin(async move {
            match weak.upgrade() {
                Some(service) => f(service, input).await,
                None => Err("the tasks module has been shut down".to_owned()),
            }
        })
    })
}

/// Registers every built-in task on `service`.
pub(crate) fn register_builtins(service: &Arc<TasksService>) -> Result<(), crate::TasksError> {
    let defs = [
        TaskDefinition::new(IO_SIMULATION, QUEUE_LOAD_TEST, task(io_simulation))
            .with_args_check(check_kwargs(latency_scale)),
        TaskDefinition::new(CPU_INTENSIVE, QUEUE_LOAD_TEST, task(cpu_intensive))
            .with_args_check(check_kwargs(prime_limit)),
        TaskDefinition::new(MEMORY_OPERATIONS, QUEUE_LOAD_TEST, task(memory_operations))
            .with_args_check(check_kwargs(memory_size)),
        TaskDefinition::new(
            FAILURE_TESTING,
            QUEUE_LOAD_TEST,
            service_task(service, |s, input| {
                let roll = s.random().next_f64();
                async move { failure_testing(input, roll) }
            }),
        )
        .with_args_check(check_kwargs(failure_rate)),
        TaskDefinition::new(
            LOAD_TEST_ORCHESTRATOR,
            QUEUE_LOAD_TEST,
            service_task(service, load_test_orchestrator),
        )
        .with_args_check(check_kwargs(load_test_plan)),
        TaskDefinition::new(
            SYSTEM_HEALTH_CHECK,
            QUEUE_SYSTEM,
            service_task(service, system_health_check),
        ),
        TaskDefinition {
            schedule: Schedule::parse(CLEANUP_SCHEDULE).ok(),
            ..TaskDefinition::new(
                CLEANUP_EXPIRED_DATA,
                QUEUE_SYSTEM,
                service_task(service, cleanup_expired_data),
            )
        },
    ];
    for def in defs {
        service.register(def)?;
    }
    Ok(())
}

fn kw_u64(
    kwargs: &Map<String, Value>,
    name: &str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, String> {
    match kwargs.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().filter(|n| range.contains(n)).ok_or_else(|| {
            format!(
                "{name} must be an integer between {} and {}",
                range.start(),
                range.end()
            )
        }),
    }
}

fn kw_f64(
    kwargs: &Map<String, Value>,
    name: &str,
    default: f64,
    min: f64,
    max: f64,
) -> Result<f64, String> {
    match kwargs.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("{name} must be a number between {min} and {max}")),
    }
}

/// `io_simulation_task`'s `latency_scale`.
fn latency_scale(kwargs: &Map<String, Value>) -> Result<f64, String> {
    kw_f64(kwargs, "latency_scale", 1.0, 0.0, 10_000.0)
}

/// `cpu_intensive_task`'s `limit`.
fn prime_limit(kwargs: &Map<String, Value>) -> Result<u64, String> {
    kw_u64(kwargs, "limit", 50_000, 2..=20_000_000)
}

/// `memory_operations_task`'s `size`.
fn memory_size(kwargs: &Map<String, Value>) -> Result<u64, String> {
    kw_u64(kwargs, "size", 100_000, 1..=10_000_000)
}

/// `failure_testing_task`'s `failure_rate`.
fn failure_rate(kwargs: &Map<String, Value>) -> Result<f64, String> {
    kw_f64(kwargs, "failure_rate", 0.2, 0.0, 1.0)
}

/// A check of a task's keyword arguments at enqueue, by the same parser the task uses.
fn check_kwargs<T: 'static>(parse: fn(&Map<String, Value>) -> Result<T, String>) -> ArgsCheck {
    Arc::new(move |input: &TaskInput| parse(&input.kwargs).map(drop))
}

fn elapsed_ms(start: Instant) -> f64 {
    (start.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// Seven concurrent simulated I/O waits: two database queries, two API calls, three cache reads.
/// `latency_scale` (kwargs, default 1) multiplies every wait.
async fn io_simulation(input: TaskInput) -> TaskResult {
    let scale = latency_scale(&input.kwargs)?;
    const OPERATIONS: [(&str, &str, f64); 7] = [
        ("database", "fetch_user_profile", 1.0),
        ("database", "load_recent_orders", 1.0),
        ("api", "payment_gateway_status", 1.0),
        ("api", "shipping_rates_lookup", 1.0),
        ("cache", "profile_cache_lookup", 0.5),
        ("cache", "feature_flags", 0.5),
        ("cache", "rate_limit_counter", 0.5),
    ];
    let start = Instant::now();
    let operations = futures_util::future::join_all(OPERATIONS.iter().map(
        |&(kind, operation, ms)| async move {
            let simulated_ms = ms * scale;
            let began = Instant::now();
            tokio::time::sleep(Duration::from_secs_f64(simulated_ms / 1000.0)).await;
            json!({
                "kind": kind,
                "operation": operation,
                "simulated_ms": simulated_ms,
                "elapsed_ms": elapsed_ms(began),
            })
        },
    ))
    .await;
    let total_duration_ms = elapsed_ms(start);
    let sequential_ms: f64 = OPERATIONS.iter().map(|(_, _, ms)| ms * scale).sum();
    Ok(json!({
        "task_type": "io_simulation",
        "database_operations": 2,
        "api_operations": 2,
        "cache_operations": 3,
        "total_concurrent_operations": OPERATIONS.len(),
        "operations": operations,
        "sequential_wait_ms": sequential_ms,
        "total_duration_ms": total_duration_ms,
        "work_type": "OPTIMIZED_ASYNC_IO",
        "attempt": input.attempt,
        "status": "completed",
    }))
}

/// Counts primes up to `limit` (kwargs, default 50,000) with a sieve, on the blocking pool.
async fn cpu_intensive(input: TaskInput) -> TaskResult {
    let limit = prime_limit(&input.kwargs)? as usize;
    let start = Instant::now();
    let (count, largest) = tokio::task::spawn_blocking(move || {
        let mut composite = vec![false; limit + 1];
        let mut count = 0u64;
        let mut largest = 0usize;
        for n in 2..=limit {
            if composite[n] {
                continue;
            }
            count += 1;
            largest = n;
            let mut multiple = n.saturating_mul(n);
            while multiple <= limit {
                composite[multiple] = true;
                multiple += n;
            }
        }
        (count, largest)
    })
    .await
    .map_err(|e| format!("CPU work failed: {e}"))?;
    Ok(json!({
        "task_type": "cpu_intensive",
        "limit": limit,
        "primes_found": count,
        "largest_prime": largest,
        "duration_ms": elapsed_ms(start),
        "attempt": input.attempt,
        "status": "completed",
    }))
}

/// Allocates `size` (kwargs, default 100,000) numbers, sorts and deduplicates them.
async fn memory_operations(input: TaskInput) -> TaskResult {
    let size = memory_size(&input.kwargs)? as usize;
    let start = Instant::now();
    let (unique, sum, bytes) = tokio::task::spawn_blocking(move || {
        // A fixed linear congruential sequence: the same work every run.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut values: Vec<u64> = (0..size)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 33) % (size as u64 * 4).max(1)
            })
            .collect();
        let bytes = values.capacity() * std::mem::size_of::<u64>();
        values.sort_unstable();
        values.dedup();
        let sum = values.iter().fold(0u64, |acc, v| acc.wrapping_add(*v));
        (values.len(), sum, bytes)
    })
    .await
    .map_err(|e| format!("memory work failed: {e}"))?;
    Ok(json!({
        "task_type": "memory_operations",
        "elements": size,
        "unique_elements": unique,
        "checksum": sum,
        "allocated_bytes": bytes,
        "duration_ms": elapsed_ms(start),
        "attempt": input.attempt,
        "status": "completed",
    }))
}

/// Fails when `roll` is below `failure_rate` (kwargs, default 0.2), so retries can be watched.
fn failure_testing(input: TaskInput, roll: f64) -> TaskResult {
    let rate = failure_rate(&input.kwargs)?;
    if roll < rate {
        return Err(format!(
            "Simulated failure for resilience testing (attempt {}, roll={roll:.3})",
            input.attempt
        ));
    }
    Ok(json!({
        "task_type": "failure_testing",
        "roll": roll,
        "failure_rate": rate,
        "attempt": input.attempt,
        "status": "completed",
    }))
}

/// The task that `task_type` (kwargs) names: a full name or its short form (`io_simulation`).
fn load_task_name(raw: &str) -> Option<&'static str> {
    [
        IO_SIMULATION,
        CPU_INTENSIVE,
        MEMORY_OPERATIONS,
        FAILURE_TESTING,
    ]
    .into_iter()
    .find(|name| *name == raw || name.strip_suffix("_task") == Some(raw))
}

/// Enqueues `num_tasks` load tasks in batches, waits for them (up to `wait_timeout_seconds`) and
/// reports throughput.
/// What `load_test_orchestrator` is asked to do.
struct LoadTestPlan {
    num_tasks: u64,
    batch_size: u64,
    delay_ms: u64,
    wait_timeout: u64,
    task_name: &'static str,
}

fn load_test_plan(kwargs: &Map<String, Value>) -> Result<LoadTestPlan, String> {
    let raw_type = match kwargs.get("task_type") {
        None | Some(Value::Null) => "cpu_intensive",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err("task_type must be a string".to_owned()),
    };
    let task_name = load_task_name(raw_type).ok_or_else(|| {
        let shown: String = raw_type.chars().take(100).collect();
        format!("task_type must be one of io_simulation, cpu_intensive, memory_operations, failure_testing; got {shown}")
    })?;
    if kwargs
        .get("task_kwargs")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err("task_kwargs must be an object".to_owned());
    }
    Ok(LoadTestPlan {
        num_tasks: kw_u64(kwargs, "num_tasks", 100, 1..=10_000)?,
        batch_size: kw_u64(kwargs, "batch_size", 10, 1..=1_000)?,
        delay_ms: kw_u64(kwargs, "delay_ms", 0, 0..=60_000)?,
        wait_timeout: kw_u64(kwargs, "wait_timeout_seconds", 60, 0..=3_600)?,
        task_name,
    })
}

async fn load_test_orchestrator(service: Arc<TasksService>, input: TaskInput) -> TaskResult {
    let kwargs = &input.kwargs;
    let LoadTestPlan {
        num_tasks,
        batch_size,
        delay_ms,
        wait_timeout,
        task_name,
    } = load_test_plan(kwargs)?;
    let task_kwargs = kwargs
        .get("task_kwargs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();

    let start = Instant::now();
    let mut ids = Vec::with_capacity(num_tasks as usize);
    let mut enqueued = 0u64;
    while enqueued < num_tasks {
        let batch = batch_size.min(num_tasks - enqueued);
        for _ in 0..batch {
            let queued = service
                .enqueue(EnqueueRequest {
                    task_name: task_name.to_owned(),
                    kwargs: task_kwargs.clone(),
                    ..EnqueueRequest::default()
                })
                .await
                .map_err(|e| e.to_string())?;
            ids.push(queued.record.task_id);
        }
        enqueued += batch;
        if delay_ms > 0 && enqueued < num_tasks {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
    }
    let enqueue_ms = elapsed_ms(start);

    let deadline = Instant::now() + Duration::from_secs(wait_timeout);
    let mut pending: Vec<String> = ids.clone();
    let (mut completed, mut failed) = (0u64, 0u64);
    loop {
        let mut still = Vec::with_capacity(pending.len());
        for id in pending {
            match service.status(&id).await.map(|r| r.status) {
                Ok(TaskStatus::Completed) => completed += 1,
                Ok(TaskStatus::Failed) => failed += 1,
                Ok(_) => still.push(id),
                // Expired before we looked: it finished; count it as completed.
                Err(crate::TasksError::NotFound(_)) => completed += 1,
                Err(e) => return Err(e.to_string()),
            }
        }
        pending = still;
        if pending.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let total_ms = elapsed_ms(start);
    let seconds = (total_ms / 1000.0).max(0.001);
    Ok(json!({
        "task_type": "load_test_orchestrator",
        "target_task": task_name,
        "num_tasks": num_tasks,
        "batch_size": batch_size,
        "enqueued": enqueued,
        "completed": completed,
        "failed": failed,
        "pending": pending.len(),
        "enqueue_duration_ms": enqueue_ms,
        "total_duration_ms": total_ms,
        "enqueue_rate_per_second": (enqueued as f64 / (enqueue_ms / 1000.0).max(0.001)).round(),
        "tasks_per_second": ((completed + failed) as f64 / seconds * 100.0).round() / 100.0,
        "sample_task_ids": ids.iter().take(10).collect::<Vec<_>>(),
        "status": if pending.is_empty() { "completed" } else { "timed_out" },
    }))
}

/// Checks that the queue backend answers and reports every queue's depth.
async fn system_health_check(service: Arc<TasksService>, _input: TaskInput) -> TaskResult {
    let backend = service.backend();
    let reachable = backend.ping().await;
    let depths = match service.overview().await {
        Ok(overview) => json!(overview.depths),
        Err(e) => json!({"error": e.to_string()}),
    };
    Ok(json!({
        "task_type": "system_health_check",
        "status": if reachable.is_ok() { "healthy" } else { "unhealthy" },
        "backend": backend.kind().as_str(),
        "backend_error": reachable.err().map(|e| e.to_string()),
        "queues": depths,
        "registered_tasks": service.task_names().len(),
        "checked_at": kernel::time::format(&kernel::time::now()),
    }))
}

/// Removes expired results (and workers that went away), then runs the cleanup hooks that other
/// modules registered (old webhook events, for instance).
async fn cleanup_expired_data(service: Arc<TasksService>, input: TaskInput) -> TaskResult {
    let removed = service
        .backend()
        .purge_expired()
        .await
        .map_err(|e| e.to_string())?;
    let mut hooks = Map::new();
    let mut errors = Vec::new();
    for (name, hook) in service.registry().cleanups() {
        match hook(input.clone()).await {
            Ok(value) => {
                hooks.insert(name, value);
            }
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    if !errors.is_empty() {
        return Err(format!("cleanup failed: {}", errors.join("; ")));
    }
    Ok(json!({
        "task_type": "cleanup_expired_data",
        "expired_items_removed": removed,
        "hooks": hooks,
        "status": "completed",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kwargs: Value) -> TaskInput {
        TaskInput {
            args: Vec::new(),
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
            attempt: 1,
        }
    }

    #[test]
    fn failure_testing_follows_the_roll() {
        let failed = failure_testing(input(json!({})), 0.1);
        assert!(failed.is_err_and(|e| e.contains("roll=0.100")));
        let passed = failure_testing(input(json!({})), 0.2);
        assert!(passed.is_ok());
        let always = failure_testing(input(json!({"failure_rate": 1.0})), 0.99);
        assert!(always.is_err());
        assert!(failure_testing(input(json!({"failure_rate": 2})), 0.5).is_err());
    }

    #[test]
    fn random_sources_stay_in_range() {
        let sequence = SequenceRandom::new(vec![0.1, 0.9]);
        assert_eq!(
            [
                sequence.next_f64(),
                sequence.next_f64(),
                sequence.next_f64()
            ],
            [0.1, 0.9, 0.1]
        );
        for _ in 0..1000 {
            let x = SystemRandom.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[tokio::test]
    async fn io_simulation_reports_seven_concurrent_waits() {
        let result = io_simulation(input(json!({"latency_scale": 0.5})))
            .await
            .unwrap_or_default();
        assert_eq!(result["total_concurrent_operations"], 7);
        assert_eq!(result["operations"].as_array().map(Vec::len), Some(7));
        assert_eq!(result["database_operations"], 2);
        assert_eq!(result["cache_operations"], 3);
        assert!(result["total_duration_ms"].as_f64().is_some());
    }

    #[tokio::test]
    async fn cpu_and_memory_work_is_deterministic() {
        let cpu = cpu_intensive(input(json!({"limit": 100})))
            .await
            .unwrap_or_default();
        assert_eq!(cpu["primes_found"], 25);
        assert_eq!(cpu["largest_prime"], 97);
        let a = memory_operations(input(json!({"size": 1000})))
            .await
            .unwrap_or_default();
        let b = memory_operations(input(json!({"size": 1000})))
            .await
            .unwrap_or_default();
        assert_eq!(a["checksum"], b["checksum"]);
        assert_eq!(a["elements"], 1000);
    }

    #[test]
    fn load_task_names_accept_short_forms() {
        assert_eq!(load_task_name("io_simulation"), Some(IO_SIMULATION));
        assert_eq!(load_task_name("cpu_intensive_task"), Some(CPU_INTENSIVE));
        assert_eq!(load_task_name("load_test_orchestrator"), None);
    }
}
