//! `DELETE /{task_id}`: cancel a queued, delayed or running task.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, delete, web};
use kernel::ApiError;
use kernel::identity::{Caller, Role, need};
use kernel::openapi::ErrorBody;

use super::TaskStatusResponse;
use crate::domain::CancelOutcome;
use crate::service::{Canceller, TasksService};

/// Cancels a task. A queued or delayed task is cancelled at once and never runs (200, status
/// `cancelled`); a running one is asked to stop at its next await point (202, status still
/// `in_progress`, or 200 `cancelled` when its worker stopped it at once; its result turns `cancelled` once its worker has stopped it, or `completed` /
/// `failed` if it ended first). Only the user who enqueued it, or an administrator, may cancel
/// it: for anyone else it does not exist (404, as an unknown id).
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The id returned by enqueue")),
    responses(
        (status = 200, body = TaskStatusResponse, description = "Cancelled (or already cancelled): it will not run"),
        (status = 202, body = TaskStatusResponse, description = "Running: its worker was asked to stop it"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "Task not found: <id> (unknown, expired, or another user's)"),
        (status = 409, body = ErrorBody, description = "The task has already completed or failed"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable: <why>"),
    )
)]
#[delete("/{task_id}")]
pub(super) async fn cancel_task(
    user: Caller<need::User>,
    service: web::Data<TasksService>,
    task_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let by = Canceller {
        user_id: user.user_id(),
        admin: user.has_role(Role::Admin),
    };
    let (outcome, record) = service.cancel(&task_id, &by).await?;
    // A running task's worker may have stopped it already by the time it is read back.
    let status = match outcome {
        CancelOutcome::Requested if !record.status.is_finished() => StatusCode::ACCEPTED,
        _ => StatusCode::OK,
    };
    Ok(HttpResponse::build(status).json(TaskStatusResponse::from(record)))
}
