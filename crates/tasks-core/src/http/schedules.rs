//! `GET /schedules`: the periodic tasks (administrators).

use actix_web::{get, web};
use kernel::identity::{Caller, need};
use kernel::openapi::ErrorBody;
use kernel::{ApiError, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::scheduler::ScheduleView;
use crate::service::TasksService;

/// A task that runs by itself.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::ScheduleResponse)]
pub struct ScheduleResponse {
    pub task_name: String,
    pub queue_type: String,
    /// A cron expression (UTC) or `@every <n>s|m|h|d`.
    pub schedule: String,
    /// `task` (declared by its module) or `setting` (`TASK_SCHEDULES`).
    pub source: String,
    /// When it is next due.
    pub next_run: Option<Timestamp>,
    /// The due time of the latest run queued.
    pub last_run: Option<Timestamp>,
    /// The job of the latest run (read it with `GET /result/{task_id}`).
    pub last_task_id: Option<String>,
}

impl From<ScheduleView> for ScheduleResponse {
    fn from(v: ScheduleView) -> Self {
        let (last_run, last_task_id) = match v.last_run {
            Some((at, id)) => (Some(Timestamp(at)), Some(id)),
            None => (None, None),
        };
        ScheduleResponse {
            task_name: v.task.task_name,
            queue_type: v.task.queue,
            schedule: v.task.schedule.as_str().to_owned(),
            source: v.task.source.as_str().to_owned(),
            next_run: v.next_run.map(Timestamp),
            last_run,
            last_task_id,
        }
    }
}

/// `GET /schedules` answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = tasks::ScheduleListResponse)]
pub struct ScheduleListResponse {
    pub schedules: Vec<ScheduleResponse>,
}

/// The periodic tasks, with their next and latest runs.
#[utoipa::path(
    tag = "tasks",
    security(("bearer" = [])),
    responses(
        (status = 200, body = ScheduleListResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Insufficient permissions"),
        (status = 503, body = ErrorBody, description = "Task queue unavailable: <why>"),
    )
)]
#[get("/schedules")]
pub(super) async fn list_schedules(
    _admin: Caller<need::Admin>,
    service: web::Data<TasksService>,
) -> Result<web::Json<ScheduleListResponse>, ApiError> {
    let schedules = service.schedule_views().await?;
    Ok(web::Json(ScheduleListResponse {
        schedules: schedules.into_iter().map(ScheduleResponse::from).collect(),
    }))
}
