//! Scheduled publishing: a draft given a time in the future keeps its status with `scheduled_at`
//! set, and a task of the job queue publishes it then. The task's publish acts only on a post
//! that is still a draft scheduled for that very time, so a task that runs twice, a task of a
//! schedule that was changed or cancelled since, and the module's sweep of overdue posts on
//! several instances publish each post once at most. The sitemap's read is here too.

use std::sync::Arc;

use chrono::{DateTime, NaiveDateTime, Utc};
use kernel::jobs::{EnqueueRequest, JobError, JobQueue, QUEUE_SYSTEM, TaskInput};
use serde_json::{Map, Value, json};

use super::*;
use crate::domain::feed::SitemapEntry;
use crate::store::schedule;

/// The task that publishes a scheduled post: kwargs `post_id` and `at` (RFC 3339).
pub const PUBLISH_TASK: &str = "blog_publish_scheduled";

/// The longest delay asked of the queue; a later publication waits in several steps (each run
/// before the time enqueues the next).
const STEP_MAX_SECONDS: u64 = 7 * 24 * 3600;

/// Overdue posts published per statement of the sweep.
const SWEEP_BATCH: i64 = 100;

/// What the scheduled publish of a post did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduled {
    /// Published now.
    Published(Box<Post>),
    /// Still scheduled for that time, which has not come.
    NotDue,
    /// Nothing to do: the post is gone, not a draft, or scheduled for another time (or not).
    Unchanged,
}

/// The task's arguments for the publication of post `id` at `at`.
fn task_kwargs(id: i64, at: NaiveDateTime) -> Map<String, Value> {
    let mut kwargs = Map::new();
    kwargs.insert("post_id".to_owned(), json!(id));
    kwargs.insert("at".to_owned(), json!(kernel::time::format(&at)));
    kwargs
}

/// The post id and time of a task's arguments, or what is wrong with them.
pub fn task_args(input: &TaskInput) -> Result<(i64, NaiveDateTime), String> {
    let id = input
        .kwargs
        .get("post_id")
        .and_then(Value::as_i64)
        .ok_or("post_id must be an integer (a post's id)")?;
    let at = input
        .kwargs
        .get("at")
        .and_then(Value::as_str)
        .and_then(|raw| DateTime::parse_from_rfc3339(raw).ok())
        .map(|t| t.with_timezone(&Utc).naive_utc())
        .ok_or("at must be an RFC 3339 date-time")?;
    Ok((id, at))
}

/// Enqueues the publication of post `id` at `at`, seen from `now`: after the seconds left
/// (rounded up; at most [`STEP_MAX_SECONDS`]).
pub async fn enqueue_publication(
    jobs: &dyn JobQueue,
    id: i64,
    at: NaiveDateTime,
    now: NaiveDateTime,
) -> Result<(), BlogError> {
    let millis = (at - now).num_milliseconds().max(0);
    let seconds = u64::try_from(millis.div_euclid(1000) + i64::from(millis % 1000 != 0))
        .unwrap_or(0)
        .clamp(1, STEP_MAX_SECONDS);
    let request = EnqueueRequest {
        task_name: PUBLISH_TASK.to_owned(),
        queue: Some(QUEUE_SYSTEM.to_owned()),
        args: Vec::new(),
        kwargs: task_kwargs(id, at),
        delay_seconds: seconds,
    };
    match jobs.enqueue(request).await {
        Ok(_) => Ok(()),
        Err(e @ JobError::Unavailable(_)) => Err(BlogError::QueueUnavailable(e.to_string())),
        Err(e) => Err(BlogError::Internal(format!(
            "enqueuing the scheduled publication: {e}"
        ))),
    }
}

/// Runs the task: publishes the post when its time has come, enqueues the next step when it
/// has not (a publication further ahead than one step).
pub async fn run_task(
    service: Arc<dyn BlogService>,
    jobs: Arc<dyn JobQueue>,
    input: TaskInput,
) -> Result<Value, String> {
    let (id, at) = task_args(&input)?;
    match service
        .publish_scheduled(id, at)
        .await
        .map_err(|e| e.to_string())?
    {
        Scheduled::Published(post) => Ok(json!({
            "post_id": id,
            "published": true,
            "published_at": post.published_at.map(|t| kernel::time::format(&t)),
        })),
        Scheduled::NotDue => {
            enqueue_publication(&*jobs, id, at, kernel::time::now())
                .await
                .map_err(|e| e.to_string())?;
            Ok(
                json!({"post_id": id, "published": false, "waiting_until": kernel::time::format(&at)}),
            )
        }
        Scheduled::Unchanged => Ok(json!({"post_id": id, "published": false})),
    }
}

impl BlogServiceImpl {
    pub(super) async fn schedule_post(
        &self,
        id: i64,
        at: NaiveDateTime,
    ) -> Result<Post, BlogError> {
        let now = kernel::time::now();
        if at <= now {
            return self.publish_post(id).await;
        }
        let Some(jobs) = self.jobs.clone() else {
            return Err(BlogError::SchedulingUnavailable);
        };
        write_tx!(&self.pool, BlogError, |tx| {
            let current = store::find_post(tx, id)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            let status = PostStatus::parse(&current.status).unwrap_or(PostStatus::Draft);
            if status != PostStatus::Draft {
                return Err(BlogError::NotSchedulable(status));
            }
            let changes = PostChanges {
                scheduled_at: Some(Some(at)),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            // In the transaction: a queue that refuses leaves the post as it was. A task whose
            // transaction then fails to commit finds no such schedule and does nothing.
            enqueue_publication(&*jobs, id, at, now).await?;
            Self::load_post(tx, row).await
        })
    }

    /// Publishes post `id` if it is still a draft scheduled for `at` and `at` has come.
    pub(super) async fn publish_scheduled(
        &self,
        id: i64,
        at: NaiveDateTime,
    ) -> Result<Scheduled, BlogError> {
        let now = kernel::time::now();
        write_tx!(&self.pool, BlogError, |tx| {
            let Some(current) = schedule::claim_draft(tx, id).await? else {
                return Ok(Scheduled::Unchanged);
            };
            if current.scheduled_at != Some(at) {
                return Ok(Scheduled::Unchanged);
            }
            if at > now {
                return Ok(Scheduled::NotDue);
            }
            let changes = PostChanges {
                status: Some(PostStatus::Published.as_str()),
                // The time asked for, even when the publication runs late.
                published_at: Some(Some(current.published_at.unwrap_or(at))),
                scheduled_at: Some(None),
                updated_at: Some(now),
                ..PostChanges::default()
            };
            let row = store::update_post(tx, id, &changes)
                .await?
                .ok_or(BlogError::PostNotFound)?;
            Ok(Scheduled::Published(Box::new(
                Self::load_post(tx, row).await?,
            )))
        })
    }

    /// Publishes every scheduled draft whose time has passed; how many it published.
    pub(super) async fn publish_overdue(&self) -> Result<usize, BlogError> {
        let mut published = 0;
        loop {
            let due = {
                let mut pooled = self.pool.read().await?;
                schedule::overdue(&mut pooled.conn(), kernel::time::now(), SWEEP_BATCH).await?
            };
            let mut acted = 0;
            for &(id, at) in &due {
                if let Scheduled::Published(_) = self.publish_scheduled(id, at).await? {
                    published += 1;
                    acted += 1;
                }
            }
            // A batch in which nothing changed (another instance took them all) ends the sweep.
            if (due.len() as i64) < SWEEP_BATCH || acted == 0 {
                return Ok(published);
            }
        }
    }

    pub(super) async fn sitemap_entries(&self, limit: i64) -> Result<Vec<SitemapEntry>, BlogError> {
        let mut pooled = self.pool.read().await?;
        Ok(schedule::sitemap(&mut pooled.conn(), limit).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_arguments_round_trip_to_the_microsecond() {
        let at = kernel::time::now();
        let input = TaskInput {
            kwargs: task_kwargs(42, at),
            ..TaskInput::default()
        };
        assert_eq!(task_args(&input), Ok((42, at)));
        for bad in [
            json!({}),
            json!({"post_id": "1", "at": "x"}),
            json!({"post_id": 1, "at": "soon"}),
        ] {
            let input = TaskInput {
                kwargs: bad.as_object().cloned().unwrap_or_default(),
                ..TaskInput::default()
            };
            assert!(task_args(&input).is_err(), "{bad}");
        }
    }
}
