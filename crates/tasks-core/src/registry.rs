//! Which tasks exist, on which queue, with which handler.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use kernel::jobs::{ArgsCheck, TaskFn};

use crate::domain::{QUEUE_LOAD_TEST, QUEUE_SYSTEM, valid_name};
use crate::error::TasksError;
use crate::schedule::Schedule;

/// A task: its name, its one queue, its handler and optionally its own time limit.
#[derive(Clone)]
pub struct TaskDefinition {
    pub name: String,
    pub queue: String,
    pub handler: TaskFn,
    /// The time limit of one attempt; `None` uses `WORKER_TASK_TIMEOUT_SECONDS`.
    pub timeout: Option<Duration>,
    /// Checks the arguments at enqueue.
    pub check: Option<ArgsCheck>,
    /// When it runs by itself (`TASK_SCHEDULES` may override it).
    pub schedule: Option<Schedule>,
}

impl TaskDefinition {
    pub fn new(name: impl Into<String>, queue: impl Into<String>, handler: TaskFn) -> Self {
        TaskDefinition {
            name: name.into(),
            queue: queue.into(),
            handler,
            timeout: None,
            check: None,
            schedule: None,
        }
    }

    /// Runs the task periodically (see [`Schedule::parse`]).
    pub fn with_schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = Some(schedule);
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks the arguments when the task is enqueued (400 naming the argument).
    pub fn with_args_check(mut self, check: ArgsCheck) -> Self {
        self.check = Some(check);
        self
    }
}

impl std::fmt::Debug for TaskDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskDefinition")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("timeout", &self.timeout)
            .field("schedule", &self.schedule.as_ref().map(Schedule::as_str))
            .finish_non_exhaustive()
    }
}

pub(crate) struct Registry {
    tasks: RwLock<BTreeMap<String, TaskDefinition>>,
    queues: RwLock<BTreeSet<String>>,
    cleanups: RwLock<Vec<(String, TaskFn)>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            tasks: RwLock::default(),
            queues: RwLock::new(
                [QUEUE_SYSTEM, QUEUE_LOAD_TEST]
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            ),
            cleanups: RwLock::default(),
        }
    }
}

impl Registry {
    pub fn register(&self, def: TaskDefinition) -> Result<(), TasksError> {
        for name in [&def.name, &def.queue] {
            if !valid_name(name) {
                return Err(TasksError::InvalidName(name.clone()));
            }
        }
        let mut tasks = self.tasks.write().unwrap_or_else(PoisonError::into_inner);
        if tasks.contains_key(&def.name) {
            return Err(TasksError::AlreadyRegistered(def.name));
        }
        self.queues
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(def.queue.clone());
        tasks.insert(def.name.clone(), def);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<TaskDefinition> {
        self.tasks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Every task name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tasks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Every queue, sorted.
    pub fn queues(&self) -> Vec<String> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    pub fn has_queue(&self, queue: &str) -> bool {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(queue)
    }

    /// Task names per queue (every queue listed, even without tasks).
    pub fn by_queue(&self) -> BTreeMap<String, Vec<String>> {
        let mut map: BTreeMap<String, Vec<String>> =
            self.queues().into_iter().map(|q| (q, Vec::new())).collect();
        for def in self
            .tasks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            map.entry(def.queue.clone())
                .or_default()
                .push(def.name.clone());
        }
        map
    }

    /// Every task with its own schedule: (name, queue, schedule).
    pub fn scheduled(&self) -> Vec<(String, String, Schedule)> {
        self.tasks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter_map(|d| Some((d.name.clone(), d.queue.clone(), d.schedule.clone()?)))
            .collect()
    }

    pub fn add_cleanup(&self, name: String, hook: TaskFn) {
        self.cleanups
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name, hook));
    }

    pub fn cleanups(&self) -> Vec<(String, TaskFn)> {
        self.cleanups
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn noop() -> TaskFn {
        Arc::new(|_| Box::pin(async { Ok(serde_json::Value::Null) }))
    }

    #[test]
    fn each_task_has_one_queue() {
        let registry = Registry::default();
        assert!(
            registry
                .register(TaskDefinition::new("a", "system", noop()))
                .is_ok()
        );
        assert_eq!(
            registry.register(TaskDefinition::new("a", "load_test", noop())),
            Err(TasksError::AlreadyRegistered("a".into()))
        );
        assert_eq!(
            registry.register(TaskDefinition::new("b", "Bad Queue", noop())),
            Err(TasksError::InvalidName("Bad Queue".into()))
        );
        assert!(
            registry
                .register(TaskDefinition::new("c", "media", noop()))
                .is_ok()
        );
        assert_eq!(registry.queues(), vec!["load_test", "media", "system"]);
        let by_queue = registry.by_queue();
        assert_eq!(by_queue.get("system"), Some(&vec!["a".to_owned()]));
        assert_eq!(by_queue.get("load_test"), Some(&Vec::new()));
    }
}
