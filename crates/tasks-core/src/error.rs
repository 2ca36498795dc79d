//! `TasksError` and its one mapping to the HTTP error envelope.

use actix_web::http::StatusCode;
use kernel::ApiError;
use kernel::jobs::JobError;
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TasksError {
    #[error("Unknown task: {name}")]
    UnknownTask {
        name: String,
        available: Vec<String>,
    },
    #[error("Unknown queue: {queue}")]
    UnknownQueue {
        queue: String,
        available: Vec<String>,
    },
    #[error("Task {task} runs on queue {expected}, not {requested}")]
    WrongQueue {
        task: String,
        expected: String,
        requested: String,
    },
    #[error("Task not found: {0}")]
    NotFound(String),
    /// Not a failed job still kept (a dead letter).
    #[error("Failed task not found: {0}")]
    DeadLetterNotFound(String),
    /// `DELETE /{task_id}` of a job that has already ended.
    #[error(
        "Task {task_id} has already finished ({status}); only queued, delayed or running tasks can be cancelled"
    )]
    AlreadyFinished { task_id: String, status: String },
    /// A request value out of its range.
    #[error("{0}")]
    Invalid(String),
    /// A task's arguments refused at enqueue by the task's own check.
    #[error("Invalid arguments for {task}: {message}")]
    InvalidArguments { task: String, message: String },
    /// The queue backend cannot be reached (Redis down).
    #[error("Task queue unavailable: {0}")]
    Unavailable(String),
    /// A task name is registered twice.
    #[error("Task already registered: {0}")]
    AlreadyRegistered(String),
    /// A task or queue name that cannot be used as a key.
    #[error("Invalid name {0:?}: use lower-case letters, digits, '_' and '-'")]
    InvalidName(String),
    #[error(transparent)]
    Config(#[from] kernel::ConfigError),
    /// Data in the queue that cannot be read back (a bug, or keys written by something else).
    #[error("corrupt task data: {0}")]
    Corrupt(String),
}

impl From<TasksError> for ApiError {
    fn from(e: TasksError) -> Self {
        let detail = e.to_string();
        match e {
            TasksError::UnknownTask { available, .. } => {
                ApiError::bad_request(detail).field("available_tasks", json!(available))
            }
            TasksError::UnknownQueue { available, .. } => {
                ApiError::bad_request(detail).field("available_queues", json!(available))
            }
            TasksError::WrongQueue { .. } | TasksError::InvalidArguments { .. } => {
                ApiError::bad_request(detail)
            }
            TasksError::NotFound(_) | TasksError::DeadLetterNotFound(_) => {
                ApiError::not_found(detail)
            }
            TasksError::AlreadyFinished { .. } => ApiError::new(StatusCode::CONFLICT, detail),
            TasksError::Invalid(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail),
            TasksError::Unavailable(_) => ApiError::service_unavailable(detail),
            TasksError::AlreadyRegistered(_)
            | TasksError::InvalidName(_)
            | TasksError::Config(_)
            | TasksError::Corrupt(_) => ApiError::internal(detail),
        }
    }
}

impl From<TasksError> for JobError {
    fn from(e: TasksError) -> Self {
        match e {
            TasksError::UnknownTask { name, .. } => JobError::UnknownTask(name),
            TasksError::WrongQueue {
                task,
                expected,
                requested,
            } => JobError::WrongQueue {
                task,
                expected,
                requested,
            },
            TasksError::Unavailable(why) => JobError::Unavailable(why),
            other => JobError::Unavailable(other.to_string()),
        }
    }
}

impl From<deadpool_redis::redis::RedisError> for TasksError {
    fn from(e: deadpool_redis::redis::RedisError) -> Self {
        TasksError::Unavailable(format!("Redis error: {e}"))
    }
}

impl From<deadpool_redis::PoolError> for TasksError {
    fn from(e: deadpool_redis::PoolError) -> Self {
        TasksError::Unavailable(format!("Redis is unreachable: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_follow_the_contract() {
        let e = TasksError::UnknownTask {
            name: "nope".into(),
            available: vec!["a".into()],
        };
        assert_eq!(e.to_string(), "Unknown task: nope");
        let api: ApiError = e.into();
        assert_eq!(api.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            TasksError::NotFound("x".into()).to_string(),
            "Task not found: x"
        );
        assert_eq!(
            TasksError::Unavailable("down".into()).to_string(),
            "Task queue unavailable: down"
        );
        let api: ApiError = TasksError::Unavailable("down".into()).into();
        assert_eq!(api.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
