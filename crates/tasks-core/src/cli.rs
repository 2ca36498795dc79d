//! `keel tasks list|enqueue|result|cancel|schedules|failed`, and what `keel worker --queues`
//! parses. Answers are the same bodies as the HTTP API, printed as JSON.

use std::time::Duration;

use clap::{ArgMatches, FromArgMatches, Subcommand};

use kernel::jobs::EnqueueRequest;
use serde_json::{Map, Value};

use crate::TasksModule;
use crate::error::TasksError;
use crate::http::{
    EnqueueResponse, FailedListResponse, FailedTaskResponse, ScheduleListResponse,
    ScheduleResponse, TaskListResponse, TaskStatusResponse,
};
use crate::service::Canceller;

/// The command's name: `keel tasks`.
pub const COMMAND: &str = "tasks";

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Registered tasks per queue, and queue depths (of the Redis queue; without Redis, this
    /// command's own empty in-memory queue).
    List,
    /// Enqueue a task on the Redis queue; prints its id. Needs Redis.
    Enqueue {
        name: String,
        /// The queue (default: the task's own).
        #[arg(long)]
        queue: Option<String>,
        /// Arguments as JSON: an array (positional), an object (keyword) or {"args": [...], "kwargs": {...}}.
        #[arg(long)]
        args: Option<String>,
        /// Run it no sooner than this many seconds from now.
        #[arg(long, default_value_t = 0)]
        delay: u64,
    },
    /// A task's state and result, from the Redis queue. Needs Redis.
    Result {
        id: String,
        /// Wait until the task has finished.
        #[arg(long)]
        wait: bool,
        /// The longest wait, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
    /// Cancel a queued or delayed task, or ask the worker running it to stop (as an
    /// administrator's `DELETE /api/v1/tasks/{id}`). Needs Redis.
    Cancel { id: String },
    /// Periodic tasks with their next and latest runs. Needs Redis.
    Schedules,
    /// Failed tasks kept for WORKER_KEEP_RESULT_SECONDS (dead letters). Needs Redis.
    Failed {
        #[command(subcommand)]
        command: FailedCommand,
    },
}

/// `keel tasks failed ...`.
#[derive(Debug, Subcommand)]
pub enum FailedCommand {
    /// A page of failed tasks, most recent failure first.
    List {
        #[arg(long, default_value_t = 1)]
        page: i64,
        #[arg(long, default_value_t = kernel::pagination::DEFAULT_PAGE_SIZE)]
        page_size: i64,
    },
    /// Queue a failed task again (same id, attempts start over) and remove it from the list.
    Retry { id: String },
    /// Remove a failed task for good.
    Drop { id: String },
}

/// `keel tasks`.
pub fn command() -> clap::Command {
    TasksCommand::augment_subcommands(
        clap::Command::new(COMMAND)
            .about(
                "Inspect and enqueue background tasks. `enqueue` and `result` need Redis \
                 (REDIS_URL answering, TASKS_BACKEND=redis or auto), as `keel worker` does; \
                 without Redis, `keel serve` runs tasks in its own in-memory queue, reached \
                 through its API only",
            )
            .subcommand_required(true),
    )
}

/// Runs `keel tasks <matches>` and prints the answer as JSON.
pub async fn run(module: &TasksModule, matches: &ArgMatches) -> Result<(), String> {
    let fail = |e: TasksError| e.to_string();
    let json = match TasksCommand::from_arg_matches(matches).map_err(|e| e.to_string())? {
        TasksCommand::List => serde_json::to_string_pretty(&module.cli_list().await.map_err(fail)?),
        TasksCommand::Enqueue {
            name,
            queue,
            args,
            delay,
        } => serde_json::to_string_pretty(
            &module
                .cli_enqueue(&name, queue.as_deref(), args.as_deref(), delay)
                .await
                .map_err(fail)?,
        ),
        TasksCommand::Result { id, wait, timeout } => {
            let wait = wait.then(|| Duration::from_secs(timeout));
            serde_json::to_string_pretty(&module.cli_result(&id, wait).await.map_err(fail)?)
        }
        TasksCommand::Cancel { id } => {
            serde_json::to_string_pretty(&module.cli_cancel(&id).await.map_err(fail)?)
        }
        TasksCommand::Schedules => {
            serde_json::to_string_pretty(&module.cli_schedules().await.map_err(fail)?)
        }
        TasksCommand::Failed { command } => match command {
            FailedCommand::List { page, page_size } => serde_json::to_string_pretty(
                &module.cli_failed(page, page_size).await.map_err(fail)?,
            ),
            FailedCommand::Retry { id } => {
                serde_json::to_string_pretty(&module.cli_retry_failed(&id).await.map_err(fail)?)
            }
            FailedCommand::Drop { id } => {
                module.cli_drop_failed(&id).await.map_err(fail)?;
                serde_json::to_string_pretty(&serde_json::json!({"dropped": id}))
            }
        },
    };
    println!("{}", json.map_err(|e| e.to_string())?);
    Ok(())
}

/// How often `result --wait` looks again.
const WAIT_POLL: Duration = Duration::from_millis(200);

impl TasksModule {
    /// `keel tasks list`: registered tasks per queue and queue depths.
    pub async fn cli_list(&self) -> Result<TaskListResponse, TasksError> {
        Ok(self.service.overview().await?.into())
    }

    /// `keel tasks enqueue NAME [--queue Q] [--args JSON] [--delay SECONDS]` (see
    /// [`parse_cli_args`]).
    pub async fn cli_enqueue(
        &self,
        task_name: &str,
        queue: Option<&str>,
        args_json: Option<&str>,
        delay_seconds: u64,
    ) -> Result<EnqueueResponse, TasksError> {
        self.require_shared_backend()?;
        let (args, kwargs) = match args_json {
            Some(raw) => parse_cli_args(raw)?,
            None => (Vec::new(), Map::new()),
        };
        let queued = self
            .service
            .enqueue(EnqueueRequest {
                task_name: task_name.to_owned(),
                queue: queue.map(str::to_owned),
                args,
                kwargs,
                delay_seconds,
            })
            .await?;
        Ok(queued.into())
    }

    /// `keel tasks result ID [--wait]`: the task's state; with `wait`, polls until it is finished
    /// or `wait` has passed (then returns the pending state).
    pub async fn cli_result(
        &self,
        task_id: &str,
        wait: Option<Duration>,
    ) -> Result<TaskStatusResponse, TasksError> {
        self.require_shared_backend()?;
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        loop {
            let record = self.service.status(task_id).await?;
            let done = record.status.is_finished();
            match deadline {
                Some(deadline) if !done && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(WAIT_POLL).await;
                }
                _ => return Ok(record.into()),
            }
        }
    }
}

impl TasksModule {
    /// `keel tasks schedules`: the periodic tasks with their next and latest runs.
    pub async fn cli_schedules(&self) -> Result<ScheduleListResponse, TasksError> {
        self.require_shared_backend()?;
        let views = self.service.schedule_views().await?;
        Ok(ScheduleListResponse {
            schedules: views.into_iter().map(ScheduleResponse::from).collect(),
        })
    }

    /// `keel tasks cancel ID`, with an administrator's rights: the task as it is now.
    pub async fn cli_cancel(&self, task_id: &str) -> Result<TaskStatusResponse, TasksError> {
        self.require_shared_backend()?;
        let admin = Canceller {
            user_id: None,
            admin: true,
        };
        let (_, record) = self.service.cancel(task_id, &admin).await?;
        Ok(record.into())
    }

    /// `keel tasks failed list [--page N] [--page-size N]`.
    pub async fn cli_failed(
        &self,
        page: i64,
        page_size: i64,
    ) -> Result<FailedListResponse, TasksError> {
        self.require_shared_backend()?;
        let page = kernel::pagination::PageParams {
            page: Some(page),
            page_size: Some(page_size),
        }
        .resolve()
        .map_err(|e| TasksError::Invalid(e.detail().to_string()))?;
        let (tasks, total) = self.service.failed(page).await?;
        Ok(FailedListResponse {
            tasks: tasks.into_iter().map(FailedTaskResponse::from).collect(),
            total,
            page: page.page,
            page_size: page.page_size,
        })
    }

    /// `keel tasks failed retry ID`.
    pub async fn cli_retry_failed(&self, task_id: &str) -> Result<TaskStatusResponse, TasksError> {
        self.require_shared_backend()?;
        Ok(self.service.retry_failed(task_id).await?.into())
    }

    /// `keel tasks failed drop ID`.
    pub async fn cli_drop_failed(&self, task_id: &str) -> Result<(), TasksError> {
        self.require_shared_backend()?;
        self.service.drop_failed(task_id).await
    }
}

/// `--args JSON`: an array gives positional arguments, an object keyword arguments, and
/// `{"args": [...], "kwargs": {...}}` both.
pub fn parse_cli_args(raw: &str) -> Result<(Vec<Value>, Map<String, Value>), TasksError> {
    let value: Value = serde_json::from_str(raw)
        .map_err(|e| TasksError::Invalid(format!("--args is not valid JSON: {e}")))?;
    match value {
        Value::Array(args) => Ok((args, Map::new())),
        Value::Object(mut object) => {
            let both = object.len() <= 2
                && object.keys().all(|k| k == "args" || k == "kwargs")
                && !object.is_empty();
            if both {
                let args = match object.remove("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(a)) => a,
                    Some(_) => {
                        return Err(TasksError::Invalid(
                            "--args: \"args\" must be an array".into(),
                        ));
                    }
                };
                let kwargs = match object.remove("kwargs") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(k)) => k,
                    Some(_) => {
                        return Err(TasksError::Invalid(
                            "--args: \"kwargs\" must be an object".into(),
                        ));
                    }
                };
                Ok((args, kwargs))
            } else {
                Ok((Vec::new(), object))
            }
        }
        _ => Err(TasksError::Invalid(
            "--args must be a JSON array (positional) or object (keyword arguments)".into(),
        )),
    }
}

/// `--queues system,load_test`: trimmed, non-empty names.
pub fn parse_queue_list(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cli_args_take_three_shapes() {
        let (args, kwargs) = parse_cli_args("[1, \"a\"]").unwrap_or_default();
        assert_eq!(args, vec![json!(1), json!("a")]);
        assert!(kwargs.is_empty());
        let (args, kwargs) = parse_cli_args("{\"limit\": 10}").unwrap_or_default();
        assert!(args.is_empty());
        assert_eq!(kwargs.get("limit"), Some(&json!(10)));
        let (args, kwargs) =
            parse_cli_args("{\"args\": [2], \"kwargs\": {\"x\": true}}").unwrap_or_default();
        assert_eq!(args, vec![json!(2)]);
        assert_eq!(kwargs.get("x"), Some(&json!(true)));
        assert!(parse_cli_args("3").is_err());
        assert!(parse_cli_args("{").is_err());
    }

    #[test]
    fn queue_lists_are_split() {
        assert_eq!(
            parse_queue_list(" system, load_test ,,"),
            vec!["system", "load_test"]
        );
    }
}
