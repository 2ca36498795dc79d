//! Dead letters: `GET /failed`, `POST /failed/{task_id}/retry`, `DELETE /failed/{task_id}`
//! (administrators).

use actix_web::{HttpResponse, delete, get, post, web};
use kernel::identity::{Caller, need};
use kernel::openapi::ErrorBody;
use kernel::pagination::PageParams;
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::TaskStatusResponse;
use crate::domain::TaskRecord;
use crate::service::TasksService;

/// A job that failed its last attempt, kept for `WORKER_KEEP_RESULT_SECONDS`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::FailedTaskResponse)]
pub struct FailedTaskResponse {
    pub task_id: String,
    pub task_name: String,
    pub queue_type: String,
    #[schema(value_type = Vec<Object>)]
    pub args: Vec<Value>,
    #[schema(value_type = Object)]
    pub kwargs: Map<String, Value>,
    /// The error of the last attempt.
    pub error: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    pub queued_at: Timestamp,
    /// When the last attempt failed.
    pub failed_at: Option<Timestamp>,
}

impl From<TaskRecord> for FailedTaskResponse {
    fn from(r: TaskRecord) -> Self {
        FailedTaskResponse {
            task_id: r.task_id,
            task_name: r.task_name,
            queue_type: r.queue,
            args: r.args,
            kwargs: r.kwargs,
            error: r.error,
            attempts: r.attempts,
            queued_at: r.queued_at.into(),
            failed_at: r.finished_at.map(Timestamp),
        }
    }
}

/// `GET /failed`: a page of failed jobs, most recent failure first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::FailedListResponse)]
pub struct FailedListResponse {
    pub tasks: Vec<FailedTaskResponse>,
    /// How many failed jobs are kept.
    pub total: u64,
    pub page: i64,
    pub page_size: i64,
}

/// Failed jobs (dead letters) still kept, most recent failure first.
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    params(PageParams),
    responses(
        (status = 200, body = FailedListResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Insufficient permissions"),
        (status = 422, body = ErrorBody, description = "page or page_size out of range"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable: <why>"),
    )
)]
#[get("/failed")]
pub(super) async fn list_failed(
    _admin: Caller<need::Admin>,
    service: web::Data<TasksService>,
    query: web::Query<PageParams>,
) -> Result<web::Json<FailedListResponse>, ApiError> {
    let page = query.into_inner().resolve()?;
    let (tasks, total) = service.failed(page).await?;
    Ok(web::Json(FailedListResponse {
        tasks: tasks.into_iter().map(FailedTaskResponse::from).collect(),
        total,
        page: page.page,
        page_size: page.page_size,
    }))
}

/// Queues a failed job again under the same id (its attempts start over) and removes it from
/// the failed list, in one step. Its result is then read as any task's.
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The failed task's id")),
    responses(
        (status = 200, body = TaskStatusResponse, description = "Queued again"),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Insufficient permissions"),
        (status = 404, body = ErrorBody, description = "Failed task not found: <id>"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable: <why>"),
    )
)]
#[post("/failed/{task_id}/retry")]
pub(super) async fn retry_failed(
    _admin: Caller<need::Admin>,
    service: web::Data<TasksService>,
    task_id: web::Path<String>,
) -> Result<web::Json<TaskStatusResponse>, ApiError> {
    Ok(web::Json(service.retry_failed(&task_id).await?.into()))
}

/// Removes a failed job for good.
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The failed task's id")),
    responses(
        (status = 204, description = "Dropped"),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Insufficient permissions"),
        (status = 404, body = ErrorBody, description = "Failed task not found: <id>"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable: <why>"),
    )
)]
#[delete("/failed/{task_id}")]
pub(super) async fn drop_failed(
    _admin: Caller<need::Admin>,
    service: web::Data<TasksService>,
    task_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    service.drop_failed(&task_id).await?;
    Ok(HttpResponse::NoContent().finish())
}
