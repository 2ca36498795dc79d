//! The HTTP surface, mounted at `/api/v1/tasks`: thin handlers over [`TasksService`].

use kernel::Timestamp;
use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use kernel::ApiError;
use kernel::identity::{Caller, Identity, need};
use kernel::jobs::EnqueueRequest;
use kernel::openapi::ErrorBody;
use kernel::peer::PeerConnection;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::{QueueDepth, TaskRecord, TaskStatus};
use crate::service::{Enqueued, Overview, TasksService};

mod cancel;
mod failed;
mod schedules;

pub use failed::{FailedListResponse, FailedTaskResponse};
pub use schedules::{ScheduleListResponse, ScheduleResponse};

/// `POST /enqueue` body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = tasks::EnqueueBody)]
pub struct EnqueueBody {
    /// A registered task's name.
    pub task_name: String,
    /// The queue; default: the task's own queue. Another queue is refused.
    #[serde(default)]
    pub queue_type: Option<String>,
    /// Positional arguments.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub args: Option<Vec<Value>>,
    /// Keyword arguments (`task_kwargs` is accepted too).
    #[serde(default, alias = "task_kwargs")]
    #[schema(value_type = Object)]
    pub kwargs: Option<Map<String, Value>>,
    /// Seconds to wait before the task may run (0 to 2,592,000).
    #[serde(default)]
    pub delay_seconds: Option<u64>,
}

impl From<EnqueueBody> for EnqueueRequest {
    fn from(body: EnqueueBody) -> Self {
        EnqueueRequest {
            task_name: body.task_name,
            queue: body.queue_type,
            args: body.args.unwrap_or_default(),
            kwargs: body.kwargs.unwrap_or_default(),
            delay_seconds: body.delay_seconds.unwrap_or(0),
        }
    }
}

/// `POST /enqueue` answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::EnqueueResponse)]
pub struct EnqueueResponse {
    pub task_id: String,
    pub task_name: String,
    pub queue_type: String,
    pub status: TaskStatus,
    pub queued_at: Timestamp,
    /// When the task becomes eligible to run: `queued_at` plus the delay.
    pub estimated_start: Timestamp,
    pub message: String,
}

impl From<Enqueued> for EnqueueResponse {
    fn from(e: Enqueued) -> Self {
        let r = e.record;
        EnqueueResponse {
            message: format!("Task '{}' enqueued to {} queue", r.task_name, r.queue),
            task_id: r.task_id,
            task_name: r.task_name,
            queue_type: r.queue,
            status: r.status,
            queued_at: r.queued_at.into(),
            estimated_start: e.estimated_start.into(),
        }
    }
}

/// A task's state: the body of `GET /result/{id}` and `GET /status/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::TaskStatusResponse)]
pub struct TaskStatusResponse {
    pub task_id: String,
    pub task_name: String,
    pub queue_type: String,
    pub status: TaskStatus,
    /// The task's return value once completed.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// The error of the last failed attempt (`Task cancelled` once cancelled).
    pub error: Option<String>,
    /// Attempts started so far.
    pub attempts: u32,
    pub queued_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
}

impl From<TaskRecord> for TaskStatusResponse {
    fn from(r: TaskRecord) -> Self {
        TaskStatusResponse {
            task_id: r.task_id,
            task_name: r.task_name,
            queue_type: r.queue,
            status: r.status,
            result: r.result,
            error: r.error,
            attempts: r.attempts,
            queued_at: r.queued_at.into(),
            started_at: r.started_at.map(Timestamp),
            finished_at: r.finished_at.map(Timestamp),
        }
    }
}

/// `GET /` answer: registered tasks per queue and each queue's depth.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::TaskListResponse)]
pub struct TaskListResponse {
    pub available_tasks: Vec<String>,
    pub total_count: usize,
    /// Task names per queue.
    pub queues: BTreeMap<String, Vec<String>>,
    pub queue_depths: BTreeMap<String, QueueDepthBody>,
    /// `redis` or `memory`.
    pub backend: String,
}

/// How many jobs of a queue are where.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::QueueDepthBody)]
pub struct QueueDepthBody {
    /// Ready to run.
    pub queued: u64,
    /// Delayed or waiting for a retry.
    pub scheduled: u64,
    /// Running.
    pub in_progress: u64,
}

impl From<QueueDepth> for QueueDepthBody {
    fn from(d: QueueDepth) -> Self {
        QueueDepthBody {
            queued: d.queued,
            scheduled: d.scheduled,
            in_progress: d.in_progress,
        }
    }
}

impl From<Overview> for TaskListResponse {
    fn from(o: Overview) -> Self {
        TaskListResponse {
            total_count: o.available_tasks.len(),
            available_tasks: o.available_tasks,
            queues: o.queues,
            queue_depths: o.depths.into_iter().map(|(q, d)| (q, d.into())).collect(),
            backend: o.backend.as_str().to_owned(),
        }
    }
}

/// Registers the routes and their app data: the service and the identity the module was built
/// with (when auth is mounted, every route needs an active user).
pub fn configure(
    cfg: &mut ServiceConfig,
    service: Arc<TasksService>,
    identity: web::Data<Identity>,
) {
    cfg.app_data(web::Data::from(service))
        .app_data(identity)
        .service(list_tasks)
        .service(enqueue_task)
        .service(task_result)
        .service(task_status)
        .service(schedules::list_schedules)
        .service(failed::list_failed)
        .service(failed::retry_failed)
        .service(failed::drop_failed)
        .service(cancel::cancel_task)
        .route("/", web::get().to(list_tasks_slash));
}

async fn overview(service: &TasksService) -> Result<TaskListResponse, ApiError> {
    Ok(service.overview().await?.into())
}

/// Registered tasks per queue and the depth of each queue.
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    responses(
        (status = 200, body = TaskListResponse),
        (status = 401, body = ErrorBody, description = "Auth is mounted and the caller is not an active user"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable"),
    )
)]
#[get("")]
async fn list_tasks(
    _user: Caller<need::User>,
    service: web::Data<TasksService>,
) -> Result<web::Json<TaskListResponse>, ApiError> {
    Ok(web::Json(overview(&service).await?))
}

/// `GET /api/v1/tasks/` (trailing slash), as the reference answers it.
async fn list_tasks_slash(
    _user: Caller<need::User>,
    service: web::Data<TasksService>,
) -> Result<web::Json<TaskListResponse>, ApiError> {
    Ok(web::Json(overview(&service).await?))
}

/// Queues a registered task.
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    request_body = EnqueueBody,
    responses(
        (status = 200, body = EnqueueResponse),
        (status = 400, body = ErrorBody, description = "Unknown task (with available_tasks), unknown queue or the task's queue is another"),
        (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Malformed body or delay out of range"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable: <why>"),
    )
)]
#[post("/enqueue")]
async fn enqueue_task(
    user: Caller<need::User>,
    service: web::Data<TasksService>,
    body: kernel::http::Json<EnqueueBody>,
) -> Result<web::Json<EnqueueResponse>, ApiError> {
    // The enqueuer may cancel the task later.
    let queued = service
        .enqueue_as(body.into_inner().into(), user.user_id())
        .await?;
    Ok(web::Json(queued.into()))
}

/// `GET /result/{task_id}` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResultQuery {
    /// Seconds (1 to 30) to hold the request until the task ends; without it the answer is
    /// immediate.
    #[param(value_type = Option<u64>, minimum = 1, maximum = 30)]
    pub wait: Option<String>,
}

/// A task's result: 200 when finished (completed, failed or cancelled), 202 while pending.
/// With `wait`, the answer comes when the task ends, or when `wait` seconds have passed (then
/// 202).
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The id returned by enqueue"), ResultQuery),
    responses(
        (status = 200, body = TaskStatusResponse, description = "Finished: completed, failed or cancelled"),
        (status = 202, body = TaskStatusResponse, description = "Pending: queued or in_progress"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "Task not found: <id> (unknown or expired)"),
        (status = 422, body = ErrorBody, description = "wait must be a whole number of seconds from 1 to 30"),
        (status = 503, body = ErrorBody),
    )
)]
#[get("/result/{task_id}")]
async fn task_result(
    _user: Caller<need::User>,
    service: web::Data<TasksService>,
    task_id: web::Path<String>,
    query: web::Query<ResultQuery>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let record = match &query.wait {
        Some(wait) => {
            let seconds = crate::service::wait_seconds(wait)?;
            let waiting = service.wait_for_end(&task_id, seconds);
            match PeerConnection::of(&req) {
                // A client that leaves ends the wait (and nobody reads the answer).
                Some(peer) => tokio::select! {
                    record = waiting => record?,
                    () = peer.closed() => return Ok(HttpResponse::NoContent().finish()),
                },
                None => waiting.await?,
            }
        }
        None => service.status(&task_id).await?,
    };
    let status = if record.status.is_finished() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok(HttpResponse::build(status).json(TaskStatusResponse::from(record)))
}

/// A task's state, whatever it is (always 200 for a known id).
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The id returned by enqueue")),
    responses(
        (status = 200, body = TaskStatusResponse),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "Task not found: <id> (unknown or expired)"),
        (status = 503, body = ErrorBody),
    )
)]
#[get("/status/{task_id}")]
async fn task_status(
    _user: Caller<need::User>,
    service: web::Data<TasksService>,
    task_id: web::Path<String>,
) -> Result<web::Json<TaskStatusResponse>, ApiError> {
    Ok(web::Json(service.status(&task_id).await?.into()))
}
