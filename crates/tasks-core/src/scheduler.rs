//! Periodic tasks: which tasks run by themselves, and the scheduler that queues their due runs.
//!
//! Every worker (the embedded one of `keel serve` and each `keel worker` process) runs a
//! scheduler. Each due run is claimed in the backend before it is queued (on Redis, `SET NX`
//! with an expiry on a key of the task and its due time, in the same script that queues the
//! job), so however many schedulers run, each due run is queued once. A scheduler sleeps until
//! the next due time (at most a minute at a time, so that a changed clock is noticed); it never
//! polls faster. Runs that fell due while no scheduler was running are not made up.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Map;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::domain::TaskRecord;
use crate::error::TasksError;
use crate::schedule::Schedule;
use crate::service::TasksService;

/// The longest a scheduler sleeps before it looks at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// How soon a run that could not be queued (backend down) is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Where a task's schedule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleSource {
    /// The module that declared the task.
    Task,
    /// The deployer's `TASK_SCHEDULES`.
    Setting,
}

impl ScheduleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleSource::Task => "task",
            ScheduleSource::Setting => "setting",
        }
    }
}

/// A task that runs by itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledTask {
    pub task_name: String,
    pub queue: String,
    pub schedule: Schedule,
    pub source: ScheduleSource,
}

/// A periodic task with its next and latest runs (`GET /api/v1/tasks/schedules`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleView {
    pub task: ScheduledTask,
    pub next_run: Option<NaiveDateTime>,
    /// The due time of the latest run queued, and its job.
    pub last_run: Option<(NaiveDateTime, String)>,
}

impl TasksService {
    /// Every task that runs by itself, by name: the modules' schedules, with `TASK_SCHEDULES`
    /// added, overriding, or turning them off.
    pub fn schedules(&self) -> Vec<ScheduledTask> {
        let mut tasks: Vec<ScheduledTask> = self
            .registry()
            .scheduled()
            .into_iter()
            .map(|(task_name, queue, schedule)| ScheduledTask {
                task_name,
                queue,
                schedule,
                source: ScheduleSource::Task,
            })
            .collect();
        for o in &self.config().schedules {
            tasks.retain(|t| t.task_name != o.task);
            if let (Some(schedule), Some(def)) = (&o.schedule, self.registry().get(&o.task)) {
                tasks.push(ScheduledTask {
                    task_name: def.name,
                    queue: def.queue,
                    schedule: schedule.clone(),
                    source: ScheduleSource::Setting,
                });
            }
        }
        tasks.sort_by(|a, b| a.task_name.cmp(&b.task_name));
        tasks
    }

    /// Checks that every task `TASK_SCHEDULES` names is registered (call once every module's
    /// tasks are): the server refuses to start otherwise.
    pub fn check_schedules(&self) -> Result<(), kernel::jobs::JobError> {
        for o in &self.config().schedules {
            if self.registry().get(&o.task).is_none() {
                return Err(kernel::jobs::JobError::Registration {
                    name: o.task.clone(),
                    reason: format!(
                        "TASK_SCHEDULES names it, but no enabled module registers a task of that \
                         name (registered: {})",
                        self.registry().names().join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    /// The periodic tasks with their next and latest runs.
    pub async fn schedule_views(&self) -> Result<Vec<ScheduleView>, TasksError> {
        let last = self.backend().last_runs().await?;
        let now = Utc::now();
        Ok(self
            .schedules()
            .into_iter()
            .map(|task| {
                let last_run = last.get(&task.task_name).and_then(|run| {
                    let due = DateTime::<Utc>::from_timestamp_millis(run.due_ms)?;
                    Some((due.naive_utc(), run.task_id.clone()))
                });
                ScheduleView {
                    next_run: task.schedule.next_after(now).map(|t| t.naive_utc()),
                    last_run,
                    task,
                }
            })
            .collect())
    }

    /// Queues the run of periodic task `task_name` due at `due`, unless some scheduler already
    /// did: the new job's id when this call queued it.
    pub async fn run_schedule(
        &self,
        task_name: &str,
        due: DateTime<Utc>,
    ) -> Result<Option<String>, TasksError> {
        let task = self
            .schedules()
            .into_iter()
            .find(|t| t.task_name == task_name)
            .ok_or_else(|| TasksError::NotFound(task_name.to_owned()))?;
        self.queue_due_run(&task, due).await
    }

    async fn queue_due_run(
        &self,
        task: &ScheduledTask,
        due: DateTime<Utc>,
    ) -> Result<Option<String>, TasksError> {
        let record = TaskRecord::new(
            task.task_name.clone(),
            task.queue.clone(),
            Vec::new(),
            Map::new(),
        );
        let claimed = self
            .backend()
            .enqueue_scheduled(
                &record,
                due.timestamp_millis(),
                task.schedule.claim_ttl(due),
            )
            .await?;
        if claimed {
            tracing::info!(task = %task.task_name, task_id = %record.task_id, due = %due, "periodic task queued");
        }
        Ok(claimed.then_some(record.task_id))
    }
}

/// A scheduled task's next due run, and when to try it.
struct Slot {
    task: ScheduledTask,
    due: Option<DateTime<Utc>>,
    try_at: Option<DateTime<Utc>>,
}

/// Queues the due runs of every periodic task until `stop` says stop (a deadline is set).
pub(crate) async fn run(service: Arc<TasksService>, mut stop: watch::Receiver<Option<Instant>>) {
    let now = Utc::now();
    let mut slots: Vec<Slot> = service
        .schedules()
        .into_iter()
        .map(|task| {
            let due = task.schedule.next_after(now);
            Slot {
                task,
                due,
                try_at: due,
            }
        })
        .collect();
    if slots.is_empty() {
        return;
    }
    loop {
        if stop.borrow_and_update().is_some() {
            return;
        }
        let Some(earliest) = slots.iter().filter_map(|s| s.try_at).min() else {
            return;
        };
        let wait = (earliest - Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(MAX_SLEEP);
        if !wait.is_zero() {
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue;
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
        let now = Utc::now();
        for slot in &mut slots {
            let (Some(due), Some(try_at)) = (slot.due, slot.try_at) else {
                continue;
            };
            if try_at > now {
                continue;
            }
            match service.queue_due_run(&slot.task, due).await {
                Ok(_) => {
                    slot.due = slot.task.schedule.next_after(now.max(due));
                    slot.try_at = slot.due;
                }
                Err(e) => {
                    tracing::warn!(task = %slot.task.task_name, error = %e, "cannot queue a periodic task's run; trying again");
                    let retry = now + RETRY_AFTER;
                    // Give up this run once the next one is due.
                    if let Some(next) = slot.task.schedule.next_after(due)
                        && next <= retry
                    {
                        slot.due = Some(next);
                    }
                    slot.try_at = Some(retry);
                }
            }
        }
    }
}
