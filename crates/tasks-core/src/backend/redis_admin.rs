//! The Redis side of periodic runs, dead letters and cancellation: each change is one script.
//!
//! Keys (under the prefix):
//! - `schedule:<task>:<due ms>`: the claim of one due run of a periodic task (`SET NX` with
//!   expiry); whoever sets it queues the run.
//! - `schedules:last`: a hash of each periodic task's latest run, `<due ms> <task id>`.
//! - `dead`: a sorted set of failed jobs still kept, scored by failure time (Redis time, ms).
//! - `cancel`: the channel on which running jobs are told to stop.

use std::collections::HashMap;
use std::time::Duration;

use deadpool_redis::redis::{self, Value};

use super::{RedisBackend, integer, millis, record_fields, text};
use crate::domain::{CancelOutcome, LastRun, TaskRecord, TaskStatus};
use crate::error::TasksError;

/// KEYS: claim, job, stream, last runs. ARGV: claim ms, task id, task name, due ms, then the
/// job's hash fields. Returns 1 when this call claimed the run (and queued it).
pub(super) const SCHEDULE: &str = include_str!("lua/schedule.lua");

/// KEYS: job, delayed. ARGV: now (RFC 3339), keep ms, task id, finished channel, cancel channel.
pub(super) const CANCEL: &str = include_str!("lua/cancel.lua");

/// KEYS: dead. ARGV: keep ms, offset, limit. Returns {total, ids}.
pub(super) const DEAD_PAGE: &str = include_str!("lua/dead_page.lua");

/// KEYS: dead, job, stream. ARGV: task id, now (RFC 3339).
pub(super) const DEAD_RETRY: &str = include_str!("lua/dead_retry.lua");

/// KEYS: dead, job. ARGV: task id.
pub(super) const DEAD_DROP: &str = include_str!("lua/dead_drop.lua");

impl RedisBackend {
    /// The channel on which `cancel.lua` tells workers to stop a running job.
    pub(super) fn cancel_channel(&self) -> String {
        format!("{}cancel", self.prefix)
    }

    fn claim_key(&self, task: &str, due_ms: i64) -> String {
        format!("{}schedule:{task}:{due_ms}", self.prefix)
    }

    fn last_runs_key(&self) -> String {
        format!("{}schedules:last", self.prefix)
    }

    pub(super) async fn claim_scheduled(
        &self,
        job: &TaskRecord,
        due_ms: i64,
        claim_ttl: Duration,
    ) -> Result<bool, TasksError> {
        let mut cmd = self.scripts.schedule.call(4);
        cmd.arg(self.claim_key(&job.task_name, due_ms))
            .arg(self.job_key(&job.task_id))
            .arg(self.stream_key(&job.queue))
            .arg(self.last_runs_key())
            .arg(millis(claim_ttl).max(1))
            .arg(&job.task_id)
            .arg(&job.task_name)
            .arg(due_ms);
        for (field, value) in record_fields(job) {
            cmd.arg(field).arg(value);
        }
        let claimed: i64 = self.link.eval(&self.scripts.schedule, &cmd).await?;
        Ok(claimed == 1)
    }

    pub(super) async fn read_last_runs(&self) -> Result<HashMap<String, LastRun>, TasksError> {
        let runs: HashMap<String, String> = self
            .link
            .query(redis::cmd("HGETALL").arg(self.last_runs_key()))
            .await?;
        Ok(runs
            .into_iter()
            .filter_map(|(task, run)| {
                let (due, id) = run.split_once(' ')?;
                Some((
                    task,
                    LastRun {
                        due_ms: due.parse().ok()?,
                        task_id: id.to_owned(),
                    },
                ))
            })
            .collect())
    }

    pub(super) async fn read_failed_page(
        &self,
        offset: u64,
        limit: u64,
        keep: Duration,
    ) -> Result<(Vec<TaskRecord>, u64), TasksError> {
        let mut call = self.scripts.dead_page.call(1);
        call.arg(self.dead_key())
            .arg(millis(keep).max(1))
            .arg(offset)
            .arg(limit.max(1));
        let page: Value = self.link.eval(&self.scripts.dead_page, &call).await?;
        let Value::Array(parts) = page else {
            return Err(TasksError::Corrupt("dead letter page".to_owned()));
        };
        let mut parts = parts.into_iter();
        let total = parts.next().as_ref().and_then(integer).unwrap_or(0);
        let ids: Vec<String> = match parts.next() {
            Some(Value::Array(ids)) => ids.iter().filter_map(text).collect(),
            _ => Vec::new(),
        };
        let mut records = Vec::with_capacity(ids.len());
        let mut stale = 0u64;
        for id in ids {
            use super::TaskBackend as _;
            match self.get(&id).await? {
                Some(record) if record.status == TaskStatus::Failed => records.push(record),
                // Expired, or retried meanwhile: no longer a dead letter.
                _ => {
                    stale += 1;
                    let _: i64 = self
                        .link
                        .query(redis::cmd("ZREM").arg(self.dead_key()).arg(&id))
                        .await?;
                }
            }
        }
        Ok((records, total.max(0).unsigned_abs().saturating_sub(stale)))
    }

    pub(super) async fn requeue_failed(
        &self,
        task_id: &str,
    ) -> Result<Option<TaskRecord>, TasksError> {
        use super::TaskBackend as _;
        // The queue of a job never changes: read it first, the script checks the rest.
        let Some(mut record) = self.get(task_id).await? else {
            return Ok(None);
        };
        if record.status != TaskStatus::Failed {
            return Ok(None);
        }
        let now = kernel::time::now();
        let mut call = self.scripts.dead_retry.call(3);
        call.arg(self.dead_key())
            .arg(self.job_key(task_id))
            .arg(self.stream_key(&record.queue))
            .arg(task_id)
            .arg(kernel::time::format(&now));
        let done: i64 = self.link.eval(&self.scripts.dead_retry, &call).await?;
        if done != 1 {
            return Ok(None);
        }
        // As the script left it (a worker may already be running it).
        record.status = TaskStatus::Queued;
        record.attempts = 0;
        record.error = None;
        record.result = None;
        record.started_at = None;
        record.finished_at = None;
        record.queued_at = now;
        Ok(Some(record))
    }

    pub(super) async fn delete_failed(&self, task_id: &str) -> Result<bool, TasksError> {
        let mut call = self.scripts.dead_drop.call(2);
        call.arg(self.dead_key())
            .arg(self.job_key(task_id))
            .arg(task_id);
        let done: i64 = self.link.eval(&self.scripts.dead_drop, &call).await?;
        Ok(done == 1)
    }

    pub(super) async fn cancel_job(
        &self,
        task_id: &str,
        keep: Duration,
    ) -> Result<CancelOutcome, TasksError> {
        use super::TaskBackend as _;
        let Some(record) = self.get(task_id).await? else {
            return Ok(CancelOutcome::Missing);
        };
        let mut call = self.scripts.cancel.call(2);
        call.arg(self.job_key(task_id))
            .arg(self.delayed_key(&record.queue))
            .arg(kernel::time::format(&kernel::time::now()))
            .arg(millis(keep).max(1))
            .arg(task_id)
            .arg(self.finished_channel())
            .arg(self.cancel_channel());
        let outcome: String = self.link.eval(&self.scripts.cancel, &call).await?;
        Ok(match outcome.as_str() {
            "missing" => CancelOutcome::Missing,
            "cancelled" => CancelOutcome::Cancelled,
            "requested" => CancelOutcome::Requested,
            other => match TaskStatus::parse(other) {
                Some(status) => CancelOutcome::Finished(status),
                None => {
                    return Err(TasksError::Corrupt(format!(
                        "job {task_id}: status {other}"
                    )));
                }
            },
        })
    }
}
