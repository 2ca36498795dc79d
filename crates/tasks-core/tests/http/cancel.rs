//! Cancelling tasks: queued and delayed ones never run, running ones stop at their next await
//! point, only the enqueuer or an administrator may cancel.

use super::*;

use std::sync::atomic::AtomicBool;

backend_suite! {
    queued_and_delayed_tasks_never_run_once_cancelled,
    a_running_task_stops_at_its_next_await,
    a_task_cancelled_after_its_worker_died_is_not_run_again,
    only_the_enqueuer_or_an_administrator_may_cancel,
}

/// Counts the runs of `name`.
fn register_counted(module: &TasksModule, name: &str, runs: Arc<AtomicU32>) {
    module
        .register(
            name.to_owned(),
            "system",
            task(move |_| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(Value::Null)
                }
            }),
        )
        .unwrap();
}

async fn queued_and_delayed_tasks_never_run_once_cancelled(h: Harness) {
    let module = h.module(h.config());
    let runs = Arc::new(AtomicU32::new(0));
    register_counted(&module, "counted", runs.clone());
    let server = serve(&module);

    // No worker yet: one queued, one delayed.
    let queued = enqueue(&server, json!({"task_name": "counted"})).await;
    let delayed = enqueue(&server, json!({"task_name": "counted", "delay_seconds": 1})).await;
    let kept = enqueue(&server, json!({"task_name": "counted"})).await;
    for id in [&queued, &delayed] {
        let (status, body) = delete(&server, &format!("/api/v1/tasks/{id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "cancelled");
        assert_eq!(body["error"], "Task cancelled");
        assert!(body["finished_at"].is_string());
        // The result endpoint says so, as a finished task.
        let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "cancelled");
        // Cancelling again answers the same.
        let (status, body) = delete(&server, &format!("/api/v1/tasks/{id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "cancelled");
    }
    let depths = module.service().overview().await.unwrap().depths;
    assert_eq!(depths["system"].scheduled, 0, "{depths:?}");

    let worker = module.start_worker(&[]).unwrap();
    assert_eq!(finished(&server, &kept).await["status"], "completed");
    // Past the delay: neither cancelled task ran.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    for id in [&queued, &delayed] {
        assert_eq!(status_of(&server, id).await["status"], "cancelled");
    }
    // A finished task cannot be cancelled.
    let (status, body) = delete(&server, &format!("/api/v1/tasks/{kept}"), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("has already finished (completed)"),
        "{body}"
    );
    let (status, body) = delete(&server, "/api/v1/tasks/unknown-id", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["detail"], "Task not found: unknown-id");
    worker.shutdown(Duration::from_secs(5)).await;
}

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn a_running_task_stops_at_its_next_await(h: Harness) {
    // A long visibility timeout: the stop must come from the announcement, not the renewal.
    let module = h.module(TasksConfig {
        visibility_timeout: Duration::from_secs(60),
        ..h.config()
    });
    let started = Arc::new(Notify::new());
    let dropped = Arc::new(AtomicBool::new(false));
    let finished_work = Arc::new(AtomicBool::new(false));
    {
        let (started, dropped, finished_work) =
            (started.clone(), dropped.clone(), finished_work.clone());
        module
            .register(
                "long_job",
                "system",
                task(move |_| {
                    let (started, dropped, finished_work) =
                        (started.clone(), dropped.clone(), finished_work.clone());
                    async move {
                        let _guard = DropFlag(dropped);
                        started.notify_one();
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        finished_work.store(true, Ordering::SeqCst);
                        Ok(Value::Null)
                    }
                }),
            )
            .unwrap();
    }
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = enqueue(&server, json!({"task_name": "long_job"})).await;
    tokio::time::timeout(Duration::from_secs(30), started.notified())
        .await
        .unwrap();
    // Let the worker's listener be subscribed (it is, long before a job starts; this only
    // guards a slow machine).
    tokio::time::sleep(Duration::from_millis(100)).await;

    let asked = tokio::time::Instant::now();
    let (status, body) = delete(&server, &format!("/api/v1/tasks/{id}"), None).await;
    // Asked to stop (202), or already stopped by the time the answer was written (200).
    match status {
        StatusCode::ACCEPTED => assert_eq!(body["status"], "in_progress", "{body}"),
        StatusCode::OK => assert_eq!(body["status"], "cancelled", "{body}"),
        other => panic!("{other}: {body}"),
    }
    let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}?wait=20")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "cancelled", "{body}");
    assert_eq!(body["error"], "Task cancelled");
    assert_eq!(body["attempts"], 1);
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler was not dropped"
    );
    assert!(!finished_work.load(Ordering::SeqCst));
    // It is not retried.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(status_of(&server, &id).await["status"], "cancelled");
    let (_, failed) = get(&server, "/api/v1/tasks/failed").await;
    assert_eq!(failed["total"], 0);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn a_task_cancelled_after_its_worker_died_is_not_run_again(h: Harness) {
    let module = h.module(TasksConfig {
        visibility_timeout: Duration::from_millis(500),
        ..h.config()
    });
    let runs = Arc::new(AtomicU32::new(0));
    let started = Arc::new(Notify::new());
    {
        let (runs, started) = (runs.clone(), started.clone());
        module
            .register(
                "hanging_job",
                "system",
                task(move |_| {
                    let (runs, started) = (runs.clone(), started.clone());
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        started.notify_one();
                        std::future::pending::<()>().await;
                        Ok(Value::Null)
                    }
                }),
            )
            .unwrap();
    }
    let server = serve(&module);
    let first = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "hanging_job"})).await;
    started.notified().await;
    // The worker dies: nobody hears the request to stop.
    first.abort();
    let (status, body) = delete(&server, &format!("/api/v1/tasks/{id}"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "in_progress", "{body}");

    // The worker that takes the job over ends it as cancelled instead of running it.
    let second = module.start_worker(&["system"]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "cancelled", "{result}");
    assert_eq!(result["error"], "Task cancelled");
    assert_eq!(result["attempts"], 1);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(
        list["queue_depths"]["system"],
        json!({"queued": 0, "scheduled": 0, "in_progress": 0})
    );
    second.shutdown(Duration::from_secs(5)).await;
}

async fn only_the_enqueuer_or_an_administrator_may_cancel(h: Harness) {
    let module = h.module(h.config());
    register_counted(&module, "counted", Arc::new(AtomicU32::new(0)));
    let server = serve_with_auth(&module, Some(Arc::new(Users)));
    let enqueue_as = |token: &'static str| {
        let server = &server;
        async move {
            let (status, body) = call_as(
                server,
                token,
                reqwest::Method::POST,
                "/api/v1/tasks/enqueue",
                Some(json!({"task_name": "counted", "delay_seconds": 60})),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body["task_id"].as_str().unwrap().to_owned()
        }
    };
    let alices = enqueue_as("alice").await;
    let other = enqueue_as("alice").await;
    let path = format!("/api/v1/tasks/{alices}");

    // Bob is told it does not exist, as for an unknown id.
    let (status, body) = delete(&server, &path, Some("bob")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["detail"], format!("Task not found: {alices}"));
    let (status, _) = delete(&server, &path, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Still queued.
    let (_, body) = call_as(
        &server,
        "alice",
        reqwest::Method::GET,
        &format!("/api/v1/tasks/status/{alices}"),
        None,
    )
    .await;
    assert_eq!(body["status"], "queued");

    let (status, body) = delete(&server, &path, Some("alice")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "cancelled");
    let (status, body) = delete(&server, &format!("/api/v1/tasks/{other}"), Some("admin")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "cancelled");

    // A task no user enqueued (a module's, the scheduler's): administrators only.
    let id = module
        .service()
        .enqueue(EnqueueRequest {
            task_name: "counted".into(),
            delay_seconds: 60,
            ..Default::default()
        })
        .await
        .unwrap()
        .record
        .task_id;
    let path = format!("/api/v1/tasks/{id}");
    let (status, _) = delete(&server, &path, Some("alice")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = delete(&server, &path, Some("admin")).await;
    assert_eq!(status, StatusCode::OK);
}
