//! Scheduled publishing: `POST /posts/{id}/publish` with a future `at` keeps a draft with
//! `scheduled_at` and enqueues a delayed task; the task publishes it once, at that time, unless
//! the schedule was changed or cancelled; the sweep publishes what is overdue.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use kernel::jobs::{EnqueueRequest, JobError, JobQueue, TaskInput};

use super::*;

kernel::backend_tests! {
    a_future_at_schedules_a_draft_and_its_task_publishes_it_once,
    edits_archive_delete_and_new_times_cancel_a_schedule,
    an_at_that_has_come_publishes_now_and_bad_ones_are_refused,
    without_a_job_queue_a_future_at_is_a_conflict,
    overdue_posts_are_published_at_start_and_by_the_sweep,
    a_queue_that_refuses_leaves_the_post_alone,
    concurrent_runs_of_the_task_publish_once,
}

/// A job queue that keeps what it is asked to run (and refuses while `down`).
#[derive(Default)]
struct RecordingQueue {
    requests: Mutex<Vec<EnqueueRequest>>,
    down: AtomicBool,
}

#[async_trait::async_trait]
impl JobQueue for RecordingQueue {
    async fn enqueue(&self, request: EnqueueRequest) -> Result<String, JobError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(JobError::Unavailable("the queue is down".into()));
        }
        let mut requests = self.requests.lock().unwrap();
        requests.push(request);
        Ok(format!("job-{}", requests.len()))
    }
}

impl RecordingQueue {
    fn taken(&self) -> Vec<EnqueueRequest> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

struct Sched {
    c: Ctx,
    queue: Arc<RecordingQueue>,
}

async fn sched(db: TestDb, sweep_seconds: u64) -> Sched {
    let queue = Arc::new(RecordingQueue::default());
    let config = BlogConfig {
        schedule_sweep_seconds: sweep_seconds,
        ..BlogConfig::default()
    };
    let c = start_with(db, config, true, Some(queue.clone() as Arc<dyn JobQueue>)).await;
    Sched { c, queue }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn in_ms(ms: i64) -> DateTime<Utc> {
    (Utc::now() + chrono::Duration::milliseconds(ms)).trunc_subsecs(6)
}

impl Sched {
    async fn schedule(&self, id: &Value, at: &str) -> reqwest::Response {
        self.c
            .post(
                &format!("/posts/{id}/publish"),
                Some(ADMIN),
                json!({"at": at}),
            )
            .await
    }

    /// Runs the task of `request` as the worker would; its result.
    async fn run(&self, request: &EnqueueRequest) -> Value {
        let tasks = self.c.module.tasks();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].name, request.task_name);
        let input = TaskInput {
            args: request.args.clone(),
            kwargs: request.kwargs.clone(),
            attempt: 1,
        };
        if let Some(check) = &tasks[0].check {
            check(&input).unwrap();
        }
        (tasks[0].handler)(input).await.unwrap()
    }

    async fn post(&self, id: &Value) -> Value {
        let r = self.c.get("/admin/posts?page_size=100", Some(ADMIN)).await;
        let body: Value = r.json().await.unwrap();
        body["posts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == *id)
            .cloned()
            .unwrap_or(Value::Null)
    }
}

async fn sleep_until(t: DateTime<Utc>) {
    let left = (t - Utc::now()).num_milliseconds() + 50;
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
}

async fn a_future_at_schedules_a_draft_and_its_task_publishes_it_once(db: TestDb) {
    let s = sched(db, 0).await;
    let post = s.c.create_titled("Later").await;
    let id = post["id"].clone();
    assert_eq!(post["scheduled_at"], Value::Null);
    let at = in_ms(2500);
    // Any offset is accepted and kept in UTC.
    let with_offset = at
        .with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap())
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
    let r = s.schedule(&id, &with_offset).await;
    assert_eq!(r.status(), StatusCode::OK);
    let scheduled: Value = r.json().await.unwrap();
    assert_eq!(scheduled["status"], "draft");
    assert_eq!(scheduled["published_at"], Value::Null);
    assert_eq!(scheduled["scheduled_at"], rfc3339(at));
    assert_eq!(s.post(&id).await["scheduled_at"], rfc3339(at));
    assert_eq!(
        s.c.get("/posts/later", None).await.status(),
        StatusCode::NOT_FOUND
    );
    // One delayed task, with the seconds left (rounded up).
    let jobs = s.queue.taken();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].task_name, "blog_publish_scheduled");
    assert!(
        (2..=3).contains(&jobs[0].delay_seconds),
        "{}",
        jobs[0].delay_seconds
    );
    assert_eq!(jobs[0].kwargs["post_id"], id);
    // Run early (a worker's clock, or a step of a long delay): nothing yet, the next step queued.
    let early = s.run(&jobs[0]).await;
    assert_eq!(early["published"], false, "{early}");
    let next = s.queue.taken();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].kwargs, jobs[0].kwargs);
    assert_eq!(s.post(&id).await["status"], "draft");
    sleep_until(at).await;
    let done = s.run(&next[0]).await;
    assert_eq!(done["published"], true, "{done}");
    let published = s.post(&id).await;
    assert_eq!(published["status"], "published");
    assert_eq!(published["scheduled_at"], Value::Null);
    // published_at is the time asked for.
    assert_eq!(published["published_at"], rfc3339(at));
    let r = s.c.get("/posts/later", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let public: Value = r.json().await.unwrap();
    assert_eq!(public["scheduled_at"], Value::Null);
    // Run again (a retry, a second worker): nothing more.
    let again = s.run(&jobs[0]).await;
    assert_eq!(again["published"], false);
    assert_eq!(s.post(&id).await["updated_at"], published["updated_at"]);
    assert!(s.queue.taken().is_empty());
}

async fn edits_archive_delete_and_new_times_cancel_a_schedule(db: TestDb) {
    let s = sched(db, 0).await;
    let at = in_ms(1500);
    let mut posts = Vec::new();
    for title in [
        "Edited",
        "Archived",
        "Deleted",
        "Moved",
        "Published now",
        "Kept",
    ] {
        let post = s.c.create_titled(title).await;
        assert_eq!(
            s.schedule(&post["id"], &rfc3339(at)).await.status(),
            StatusCode::OK
        );
        posts.push(post["id"].clone());
    }
    let jobs = s.queue.taken();
    assert_eq!(jobs.len(), posts.len());
    // PUT with scheduled_at null cancels; any other value is refused.
    let r =
        s.c.put(
            &format!("/posts/{}", posts[0]),
            Some(ADMIN),
            json!({"scheduled_at": "2030-01-01T00:00:00Z"}),
        )
        .await;
    assert_invalid(r, "scheduled_at").await;
    // An edit that does not name scheduled_at keeps the schedule.
    let r =
        s.c.put(
            &format!("/posts/{}", posts[0]),
            Some(ADMIN),
            json!({"content": "changed"}),
        )
        .await;
    let kept: Value = r.json().await.unwrap();
    assert_eq!(kept["scheduled_at"], rfc3339(at));
    let r =
        s.c.put(
            &format!("/posts/{}", posts[0]),
            Some(ADMIN),
            json!({"scheduled_at": null}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let cancelled: Value = r.json().await.unwrap();
    assert_eq!(
        (cancelled["status"].as_str(), &cancelled["scheduled_at"]),
        (Some("draft"), &Value::Null)
    );
    let archived = s.c.archive(&posts[1]).await;
    assert_eq!(archived["scheduled_at"], Value::Null);
    assert_eq!(
        s.c.delete(&format!("/posts/{}", posts[2]), Some(ADMIN))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
    // A new time replaces the old one: the old task does nothing.
    let later = in_ms(60_000);
    let moved: Value = s
        .schedule(&posts[3], &rfc3339(later))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(moved["scheduled_at"], rfc3339(later));
    assert_eq!(s.queue.taken().len(), 1);
    // Publishing now cancels the schedule.
    let now = s.c.publish(&posts[4]).await;
    assert_eq!(
        (now["status"].as_str(), &now["scheduled_at"]),
        (Some("published"), &Value::Null)
    );
    sleep_until(at).await;
    for job in &jobs {
        s.run(job).await;
    }
    let statuses: Vec<(String, Value)> = {
        let mut out = Vec::new();
        for id in &posts {
            let p = s.post(id).await;
            out.push((
                p["status"].as_str().unwrap_or("deleted").to_owned(),
                p["scheduled_at"].clone(),
            ));
        }
        out
    };
    assert_eq!(
        statuses,
        vec![
            ("draft".to_owned(), Value::Null),
            ("archived".to_owned(), Value::Null),
            ("deleted".to_owned(), Value::Null),
            ("draft".to_owned(), json!(rfc3339(later))),
            ("published".to_owned(), Value::Null),
            ("published".to_owned(), Value::Null),
        ]
    );
    // The published-now post kept its own publication time, not the scheduled one.
    assert_eq!(s.post(&posts[4]).await["published_at"], now["published_at"]);
}

async fn an_at_that_has_come_publishes_now_and_bad_ones_are_refused(db: TestDb) {
    let s = sched(db, 0).await;
    for (title, body) in [
        ("Past", json!({"at": "2001-02-03T04:05:06Z"})),
        ("Null", json!({"at": null})),
        ("Empty", json!({})),
    ] {
        let post = s.c.create_titled(title).await;
        let r =
            s.c.post(&format!("/posts/{}/publish", post["id"]), Some(ADMIN), body)
                .await;
        assert_eq!(r.status(), StatusCode::OK, "{title}");
        let published: Value = r.json().await.unwrap();
        assert_eq!(published["status"], "published", "{title}");
        assert!(
            published["published_at"].as_str() > Some("2026"),
            "{title}: the time of the call"
        );
        assert_eq!(published["scheduled_at"], Value::Null);
    }
    assert!(s.queue.taken().is_empty());
    let post = s.c.create_titled("Bad").await;
    let path = format!("/posts/{}/publish", post["id"]);
    for at in [
        "tomorrow",
        "2030-01-01",
        "2030-01-01T00:00:00",
        "9999-01-01T00:00:00Z",
        "2030-13-01T00:00:00Z",
    ] {
        let r = s.c.post(&path, Some(ADMIN), json!({"at": at})).await;
        assert_invalid(r, "at").await;
    }
    let r = s.c.post(&path, Some(ADMIN), json!({"at": 12})).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r =
        s.c.post(
            &path,
            Some(ADMIN),
            json!({"at": "2030-01-01T00:00:00\u{0}Z"}),
        )
        .await;
    assert_invalid(r, "at").await;
    assert_eq!(s.post(&post["id"]).await["status"], "draft");
    // Only drafts are scheduled.
    let published = s.c.create_titled("Out").await;
    s.c.publish(&published["id"]).await;
    let archived = s.c.create_titled("Away").await;
    s.c.archive(&archived["id"]).await;
    for (id, status) in [
        (&published["id"], "published"),
        (&archived["id"], "archived"),
    ] {
        let r = s.schedule(id, &rfc3339(in_ms(60_000))).await;
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert_eq!(
            detail(r).await,
            format!("Only a draft can be scheduled: this post is {status}")
        );
    }
    let r = s.schedule(&json!(999_999), &rfc3339(in_ms(60_000))).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Authorization as before.
    let r =
        s.c.post(&path, None, json!({"at": rfc3339(in_ms(60_000))}))
            .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(s.queue.taken().is_empty());
}

async fn without_a_job_queue_a_future_at_is_a_conflict(db: TestDb) {
    let c = ctx(db).await;
    assert!(c.module.tasks().is_empty());
    let post = c.create_titled("No queue").await;
    let r = c
        .post(
            &format!("/posts/{}/publish", post["id"]),
            Some(ADMIN),
            json!({"at": rfc3339(in_ms(60_000))}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let detail = detail(r).await;
    assert!(
        detail.as_str().unwrap().contains("tasks module"),
        "{detail}"
    );
    assert_eq!(
        c.post_by_slug("no-queue").await["scheduled_at"],
        Value::Null
    );
    // Now or earlier still publishes.
    let r = c
        .post(
            &format!("/posts/{}/publish", post["id"]),
            Some(ADMIN),
            json!({"at": "2020-01-01T00:00:00+01:00"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
}

async fn overdue_posts_are_published_at_start_and_by_the_sweep(db: TestDb) {
    let s = sched(db, 1).await;
    let at = in_ms(1200);
    let swept = s.c.create_titled("Swept").await;
    s.schedule(&swept["id"], &rfc3339(at)).await;
    // The task is lost (never run): the sweep publishes the post once its time has passed.
    s.queue.taken();
    let published = kernel::testing::eventually(Duration::from_secs(10), || async {
        s.post(&swept["id"]).await["status"] == "published"
    })
    .await;
    assert!(published);
    assert_eq!(s.post(&swept["id"]).await["published_at"], rfc3339(at));
    // A restart: a module built over the same database publishes what is overdue at once
    // (here without a periodic sweep).
    let s = sched(sibling(&s.c.db).await, 0).await;
    let at = in_ms(1000);
    let restarted = s.c.create_titled("Restarted").await;
    s.schedule(&restarted["id"], &rfc3339(at)).await;
    let pool = s.c.pool.clone();
    sleep_until(at).await;
    assert_eq!(s.post(&restarted["id"]).await["status"], "draft");
    let deps = Deps::new(pool.clone()).unwrap();
    let config = BlogConfig {
        schedule_sweep_seconds: 0,
        ..BlogConfig::default()
    };
    let module = BlogModule::build(config, &deps).await.unwrap();
    let post = module
        .service()
        .get_post(restarted["id"].as_i64().unwrap())
        .await
        .unwrap();
    assert_eq!(post.status, blog_core::PostStatus::Published);
    assert_eq!(post.scheduled_at, None);
}

async fn a_queue_that_refuses_leaves_the_post_alone(db: TestDb) {
    let s = sched(db, 0).await;
    let post = s.c.create_titled("Refused").await;
    s.queue.down.store(true, Ordering::SeqCst);
    let r = s.schedule(&post["id"], &rfc3339(in_ms(60_000))).await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(detail(r).await.as_str().unwrap().contains("task queue"));
    let after = s.post(&post["id"]).await;
    assert_eq!(after["scheduled_at"], Value::Null);
    assert_eq!(after["updated_at"], post["updated_at"]);
}

async fn concurrent_runs_of_the_task_publish_once(db: TestDb) {
    let s = sched(db, 0).await;
    let post = s.c.create_titled("Once").await;
    let at = in_ms(800);
    s.schedule(&post["id"], &rfc3339(at)).await;
    let job = s.queue.taken().remove(0);
    sleep_until(at).await;
    let runs: Vec<_> = (0..6).map(|_| s.run(&job)).collect();
    let results = futures_util::future::join_all(runs).await;
    let published = results.iter().filter(|r| r["published"] == true).count();
    assert_eq!(published, 1, "{results:?}");
    assert_eq!(s.post(&post["id"]).await["status"], "published");
}
