//! Settings of the tasks module, read from the environment.

use std::time::Duration;

use kernel::ConfigError;
use kernel::config::{flag, parse, parse_in_range, var};

use crate::schedule::{ScheduleOverride, parse_overrides};

/// Which queue backend to use (`TASKS_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// Redis when it answers at start, else the in-process queue (with a warning).
    Auto,
    /// Redis only: when it is down, the task endpoints answer 503.
    Redis,
    /// The in-process queue: jobs live and die with the process.
    Memory,
}

impl BackendChoice {
    pub fn parse(raw: &str) -> Option<BackendChoice> {
        match raw.to_ascii_lowercase().as_str() {
            "auto" => Some(BackendChoice::Auto),
            "redis" => Some(BackendChoice::Redis),
            "memory" => Some(BackendChoice::Memory),
            _ => None,
        }
    }
}

/// Everything the tasks module and its workers need to know.
#[derive(Debug, Clone)]
pub struct TasksConfig {
    /// `TASKS_BACKEND` (default `auto`).
    pub backend: BackendChoice,
    /// `REDIS_URL` (default `redis://localhost:6379`).
    pub redis_url: String,
    /// `REDIS_DB` (default 0). `None` keeps the database named in `REDIS_URL`.
    pub redis_db: Option<i64>,
    /// An extra key segment: keys live under `keel:tasks:<namespace>:` instead of `keel:tasks:`.
    /// Lets several independent deployments (or test runs) share one Redis database.
    pub namespace: Option<String>,
    /// How long to wait for a Redis connection before calling Redis down.
    pub redis_connect_timeout: Duration,
    /// `WORKER_THREADS` (default 8): concurrent jobs per queue in one worker process.
    pub worker_threads: usize,
    /// `WORKER_PROCESSES` (default 1): worker processes that `keel worker` runs.
    pub worker_processes: usize,
    /// `WORKER_MAX_TRIES` (default 3): attempts per job, the first included.
    pub max_tries: u32,
    /// `WORKER_KEEP_RESULT_SECONDS` (default 3600): how long results and failures are kept.
    pub keep_result: Duration,
    /// `WORKER_EMBEDDED` (default true): whether `keel serve` runs a worker in-process.
    pub embedded_worker: bool,
    /// `WORKER_TASK_TIMEOUT_SECONDS` (default 300): the time limit of one attempt, for tasks that do
    /// not set their own.
    pub task_timeout: Duration,
    /// `WORKER_VISIBILITY_TIMEOUT_SECONDS` (default 30): a job whose worker has not been heard of for
    /// this long is taken by another worker. Running jobs renew their claim every third of it.
    pub visibility_timeout: Duration,
    /// `WORKER_RETRY_BACKOFF_SECONDS` (default 2): the wait before the second attempt; it doubles
    /// with every further attempt.
    pub retry_backoff: Duration,
    /// `WORKER_RETRY_BACKOFF_MAX_SECONDS` (default 300): the longest wait between attempts.
    pub retry_backoff_max: Duration,
    /// `WORKER_SHUTDOWN_TIMEOUT_SECONDS` (default 30): how long a stopping worker lets running jobs
    /// finish before it hands them back to the queue.
    pub shutdown_timeout: Duration,
    /// `WORKER_POLL_INTERVAL_SECONDS` (default 1): the longest an idle worker waits before it looks
    /// again for delayed jobs, retries and jobs of dead workers. New jobs wake it at once.
    pub poll_interval: Duration,
    /// `TASK_SCHEDULES`: schedules added or overridden (or turned off) by the deployer.
    pub schedules: Vec<ScheduleOverride>,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            backend: BackendChoice::Auto,
            redis_url: DEFAULT_REDIS_URL.to_owned(),
            redis_db: None,
            namespace: None,
            redis_connect_timeout: Duration::from_secs(2),
            worker_threads: 8,
            worker_processes: 1,
            max_tries: 3,
            keep_result: Duration::from_secs(3600),
            embedded_worker: true,
            task_timeout: Duration::from_secs(300),
            visibility_timeout: Duration::from_secs(30),
            retry_backoff: Duration::from_secs(2),
            retry_backoff_max: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            schedules: Vec::new(),
        }
    }
}

pub const DEFAULT_REDIS_URL: &str = "redis://localhost:6379";

/// The longest accepted duration setting: 30 days.
const MAX_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

impl kernel::ModuleConfig for TasksConfig {
    fn from_env() -> Result<Self, ConfigError> {
        TasksConfig::from_env()
    }
}

impl TasksConfig {
    /// Reads every setting from the environment; a present but invalid value names its setting.
    pub fn from_env() -> Result<TasksConfig, ConfigError> {
        let d = TasksConfig::default();
        let backend = match var("TASKS_BACKEND") {
            None => d.backend,
            Some(raw) => BackendChoice::parse(&raw).ok_or_else(|| {
                ConfigError::new(
                    "TASKS_BACKEND",
                    format!("{raw:?} is not one of auto, redis, memory"),
                )
            })?,
        };
        let redis_url = var("REDIS_URL").unwrap_or(d.redis_url);
        if !(redis_url.starts_with("redis://")
            || redis_url.starts_with("rediss://")
            || redis_url.starts_with("unix://")
            || redis_url.starts_with("redis+unix://"))
        {
            return Err(ConfigError::new(
                "REDIS_URL",
                format!("{redis_url:?} is not a redis:// URL"),
            ));
        }
        let redis_db = match var("REDIS_DB") {
            None => None,
            Some(_) => Some(parse_in_range("REDIS_DB", 0i64, 0..=65535)?),
        };
        let keep_result = seconds("WORKER_KEEP_RESULT_SECONDS", d.keep_result, 1.0)?;
        let retry_backoff = seconds("WORKER_RETRY_BACKOFF_SECONDS", d.retry_backoff, 0.0)?;
        let retry_backoff_max =
            seconds("WORKER_RETRY_BACKOFF_MAX_SECONDS", d.retry_backoff_max, 0.0)?;
        if retry_backoff_max < retry_backoff {
            return Err(ConfigError::new(
                "WORKER_RETRY_BACKOFF_MAX_SECONDS",
                "must not be less than WORKER_RETRY_BACKOFF_SECONDS",
            ));
        }
        Ok(TasksConfig {
            backend,
            redis_url,
            redis_db,
            namespace: None,
            redis_connect_timeout: d.redis_connect_timeout,
            worker_threads: parse_in_range("WORKER_THREADS", d.worker_threads, 1..=1024)?,
            worker_processes: parse_in_range("WORKER_PROCESSES", d.worker_processes, 1..=256)?,
            max_tries: parse_in_range("WORKER_MAX_TRIES", d.max_tries, 1..=100)?,
            keep_result,
            embedded_worker: flag("WORKER_EMBEDDED", d.embedded_worker)?,
            task_timeout: seconds("WORKER_TASK_TIMEOUT_SECONDS", d.task_timeout, 0.001)?,
            visibility_timeout: seconds(
                "WORKER_VISIBILITY_TIMEOUT_SECONDS",
                d.visibility_timeout,
                0.1,
            )?,
            retry_backoff,
            retry_backoff_max,
            shutdown_timeout: seconds("WORKER_SHUTDOWN_TIMEOUT_SECONDS", d.shutdown_timeout, 0.0)?,
            poll_interval: seconds("WORKER_POLL_INTERVAL_SECONDS", d.poll_interval, 0.01)?,
            schedules: match var("TASK_SCHEDULES") {
                None => Vec::new(),
                Some(raw) => {
                    parse_overrides(&raw).map_err(|e| ConfigError::new("TASK_SCHEDULES", e))?
                }
            },
        })
    }

    /// The Redis key prefix: `keel:tasks:` or `keel:tasks:<namespace>:`.
    pub fn key_prefix(&self) -> String {
        match &self.namespace {
            Some(ns) if !ns.is_empty() => format!("keel:tasks:{ns}:"),
            _ => "keel:tasks:".to_owned(),
        }
    }

    /// The wait before attempt `failed_attempt + 1`: `retry_backoff * 2^(failed_attempt - 1)`,
    /// at most `retry_backoff_max`.
    pub fn backoff(&self, failed_attempt: u32) -> Duration {
        let exponent = failed_attempt.saturating_sub(1).min(30);
        let factor = 1u32 << exponent;
        self.retry_backoff
            .checked_mul(factor)
            .unwrap_or(self.retry_backoff_max)
            .min(self.retry_backoff_max)
    }
}

/// A duration setting in seconds (decimals allowed), at least `min` and at most 30 days.
fn seconds(name: &str, default: Duration, min: f64) -> Result<Duration, ConfigError> {
    let value: f64 = parse(name, default.as_secs_f64())?;
    if !value.is_finite() || value < min || value > MAX_SECONDS {
        return Err(ConfigError::new(
            name,
            format!("{value} is outside {min}..={MAX_SECONDS} seconds"),
        ));
    }
    Ok(Duration::from_secs_f64(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_choices_parse() {
        assert_eq!(BackendChoice::parse("Redis"), Some(BackendChoice::Redis));
        assert_eq!(BackendChoice::parse("memory"), Some(BackendChoice::Memory));
        assert_eq!(BackendChoice::parse("auto"), Some(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse("kafka"), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let config = TasksConfig {
            retry_backoff: Duration::from_secs(2),
            retry_backoff_max: Duration::from_secs(10),
            ..TasksConfig::default()
        };
        assert_eq!(config.backoff(1), Duration::from_secs(2));
        assert_eq!(config.backoff(2), Duration::from_secs(4));
        assert_eq!(config.backoff(3), Duration::from_secs(8));
        assert_eq!(config.backoff(4), Duration::from_secs(10));
        assert_eq!(config.backoff(90), Duration::from_secs(10));
    }

    #[test]
    fn key_prefix_keeps_the_namespace_under_keel_tasks() {
        let mut config = TasksConfig::default();
        assert_eq!(config.key_prefix(), "keel:tasks:");
        config.namespace = Some("staging".to_owned());
        assert_eq!(config.key_prefix(), "keel:tasks:staging:");
    }
}
