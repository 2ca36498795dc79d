//! Periodic tasks: one queued run per due time however many schedulers race, the listing, and the
//! checks of schedules at start.

use super::*;

use chrono::{DateTime, Utc};
use kernel::jobs::{TaskDef, TaskRunner};
use tasks_core::{Schedule, parse_overrides};

backend_suite! {
    two_schedulers_race_for_one_due_run,
    periodic_runs_are_queued_once_by_many_workers,
}

/// A due time in whole seconds, `offset` seconds from a fixed point of this test run.
fn due(base: i64, offset: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(base + offset, 0).unwrap()
}

async fn two_schedulers_race_for_one_due_run(h: Harness) {
    let config = TasksConfig {
        schedules: parse_overrides("system_health_check=@every 1h").unwrap(),
        ..h.config()
    };
    // Two processes' modules on the same queue (one shared backend in memory; two connections
    // to the same Redis keys).
    let a = h.module(config.clone());
    let b = h.module(config);
    let base = Utc::now().timestamp() - 100_000;
    let mut claimed = 0;
    for i in 0..20 {
        let at = due(base, i * 3600);
        // Two tasks on the runtime's two threads, started together.
        let (sa, sb) = (a.service(), b.service());
        let x = tokio::spawn(async move { sa.run_schedule("system_health_check", at).await });
        let y = tokio::spawn(async move { sb.run_schedule("system_health_check", at).await });
        let (x, y) = (x.await.unwrap().unwrap(), y.await.unwrap().unwrap());
        assert!(x.is_some() != y.is_some(), "run {i}: {x:?} and {y:?}");
        claimed += 1;
        // The same due time again, later: still claimed.
        assert_eq!(
            a.service()
                .run_schedule("system_health_check", at)
                .await
                .unwrap(),
            None
        );
    }
    assert_eq!(claimed, 20);
    // Exactly one job per due run is queued.
    let overview = a.service().overview().await.unwrap();
    assert_eq!(overview.depths["system"].queued, 20, "{overview:?}");

    let server = serve(&a);
    let (status, body) = get(&server, "/api/v1/tasks/schedules").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let schedules = body["schedules"].as_array().unwrap();
    let health = schedules
        .iter()
        .find(|s| s["task_name"] == "system_health_check")
        .unwrap();
    assert_eq!(health["schedule"], "@every 1h");
    assert_eq!(health["source"], "setting");
    assert_eq!(health["queue_type"], "system");
    let last = due(base, 19 * 3600);
    assert_eq!(
        health["last_run"],
        json!(kernel::time::format(&last.naive_utc()))
    );
    let last_id = health["last_task_id"].as_str().unwrap();
    assert_eq!(status_of(&server, last_id).await["status"], "queued");
    let next: DateTime<Utc> = health["next_run"].as_str().unwrap().parse().unwrap();
    assert!(next > Utc::now() && next <= Utc::now() + chrono::Duration::hours(1));
    let cleanup = schedules
        .iter()
        .find(|s| s["task_name"] == "cleanup_expired_data")
        .unwrap();
    assert_eq!(cleanup["schedule"], "@daily");
    assert_eq!(cleanup["source"], "task");
    assert_eq!(cleanup["last_run"], Value::Null);
    // Every day at midnight UTC.
    let next: DateTime<Utc> = cleanup["next_run"].as_str().unwrap().parse().unwrap();
    assert_eq!(next.timestamp() % 86_400, 0);

    // A task without a schedule is not one.
    assert!(matches!(
        a.service()
            .run_schedule("io_simulation_task", Utc::now())
            .await,
        Err(tasks_core::TasksError::NotFound(_))
    ));
}

async fn periodic_runs_are_queued_once_by_many_workers(h: Harness) {
    let runs = Arc::new(AtomicU32::new(0));
    let config = h.config();
    let mut workers = Vec::new();
    let mut modules = Vec::new();
    let started = Utc::now();
    // Three worker processes, each with its scheduler, on one queue.
    for _ in 0..3 {
        let module = h.module(config.clone());
        let counter = runs.clone();
        module
            .register_task(
                TaskDefinition::new(
                    "tick",
                    "system",
                    task(move |_| {
                        let counter = counter.clone();
                        async move {
                            counter.fetch_add(1, Ordering::SeqCst);
                            Ok(Value::Null)
                        }
                    }),
                )
                .with_schedule(Schedule::parse("@every 1s").unwrap()),
            )
            .unwrap();
        workers.push(module.start_worker(&["system"]).unwrap());
        modules.push(module);
    }
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for worker in workers {
        worker.shutdown(Duration::from_secs(5)).await;
    }
    let stopped = Utc::now();
    // Seconds that came due while the schedulers ran: each queued (and ran) once at most.
    let due_seconds = u32::try_from(stopped.timestamp() - started.timestamp()).unwrap();
    let ran = runs.load(Ordering::SeqCst);
    assert!(
        (1..=due_seconds).contains(&ran),
        "{ran} runs for {due_seconds} due times"
    );
    let views = modules[0].service().schedule_views().await.unwrap();
    let tick = views.iter().find(|v| v.task.task_name == "tick").unwrap();
    assert!(tick.last_run.is_some(), "{tick:?}");
}

#[test]
fn task_schedules_setting_is_checked_at_start() {
    for (raw, says) in [
        ("cleanup_expired_data=every day", "is not a cron expression"),
        ("cleanup_expired_data", "is not `task_name=schedule`"),
        ("a=@every 0s", "from 1s to 366d"),
        ("a=@daily;a=off", "given twice"),
        ("A B=@daily", "is not a task name"),
    ] {
        let error = parse_overrides(raw).unwrap_err();
        assert!(error.contains(says), "{raw}: {error}");
    }
}

#[tokio::test]
async fn schedules_name_registered_tasks_and_parse() {
    let h = Harness::memory();
    let module = h.module(TasksConfig {
        schedules: parse_overrides("nightly_report=0 3 * * *").unwrap(),
        ..h.config()
    });
    // Another module's task is registered later: the check runs once all are.
    let error = TaskRunner::check_registered(&module).unwrap_err();
    assert!(
        error.to_string().contains("nightly_report")
            && error.to_string().contains("TASK_SCHEDULES"),
        "{error}"
    );
    let noop = task(|_| async { Ok(Value::Null) });
    TaskRunner::register(
        &module,
        TaskDef::new("nightly_report", "system", noop.clone()),
    )
    .unwrap();
    TaskRunner::check_registered(&module).unwrap();
    // The setting wins over the module's own schedule (none here).
    let schedules = module.service().schedules();
    let report = schedules
        .iter()
        .find(|s| s.task_name == "nightly_report")
        .unwrap();
    assert_eq!(report.schedule.as_str(), "0 3 * * *");

    // A module's schedule is checked when it registers the task.
    let error = TaskRunner::register(
        &module,
        TaskDef::new("bad_schedule", "system", noop.clone()).with_schedule("every monday"),
    )
    .unwrap_err();
    assert!(error.to_string().contains("schedule"), "{error}");
    TaskRunner::register(
        &module,
        TaskDef::new("hourly", "system", noop).with_schedule("@hourly"),
    )
    .unwrap();
    assert!(
        module
            .service()
            .schedules()
            .iter()
            .any(|s| s.task_name == "hourly")
    );

    // `off` turns a module's schedule off.
    let off = h.module(TasksConfig {
        schedules: parse_overrides("cleanup_expired_data=off").unwrap(),
        ..h.config()
    });
    assert!(off.service().schedules().is_empty());
}

#[tokio::test]
async fn schedules_are_for_administrators() {
    let h = Harness::memory();
    let module = h.module(h.config());
    let server = serve_with_auth(&module, Some(Arc::new(Users)));
    let (status, body) = call_as(
        &server,
        "alice",
        reqwest::Method::GET,
        "/api/v1/tasks/schedules",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["detail"].is_string());
    let (status, body) = call_as(
        &server,
        "admin",
        reqwest::Method::GET,
        "/api/v1/tasks/schedules",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = get(&server, "/api/v1/tasks/schedules").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
