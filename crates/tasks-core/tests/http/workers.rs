//! Workers: retries, take-overs, isolation, shutdown, delays, the built-in tasks, on both backends.

use super::*;

backend_suite! {
    retries_until_success,
    retries_until_exhaustion,
    dead_worker_job_is_taken_over_once,
    dead_worker_on_the_last_attempt_fails_the_job,
    load_test_saturation_does_not_delay_system,
    two_modules_share_results,
    graceful_shutdown_finishes_or_hands_back,
    delayed_jobs_wait_their_turn,
    orchestrator_reports_throughput,
    cleanup_runs_module_hooks,
}

async fn retries_until_success(h: Harness) {
    // failure_testing_task fails on the first roll (0.05 < 0.2) and passes on the second.
    let module = h.module_with_random(h.config(), Arc::new(SequenceRandom::new(vec![0.05, 0.9])));
    module
        .register(
            "flaky_task",
            "system",
            task(|input| async move {
                if input.attempt < 3 {
                    Err(format!("not yet (attempt {})", input.attempt))
                } else {
                    Ok(json!({"succeeded_on": input.attempt}))
                }
            }),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let id = enqueue(&server, json!({"task_name": "flaky_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 3);
    assert_eq!(result["result"], json!({"succeeded_on": 3}));
    assert_eq!(result["error"], Value::Null);

    let id = enqueue(&server, json!({"task_name": "failure_testing_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 2);
    assert_eq!(result["result"]["roll"], 0.9);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn retries_until_exhaustion(h: Harness) {
    let module = h.module(h.config());
    module
        .register(
            "broken_task",
            "system",
            task(|input| async move { Err(format!("boom on attempt {}", input.attempt)) }),
        )
        .unwrap();
    module
        .register_task(
            TaskDefinition::new(
                "slow_task",
                "system",
                task(|_| async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Value::Null)
                }),
            )
            .with_timeout(Duration::from_millis(50)),
        )
        .unwrap();
    module
        .register(
            "panicking_task",
            "system",
            task(|input| async move {
                if input.attempt > 0 {
                    panic!("kaboom");
                }
                Ok(Value::Null)
            }),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let id = enqueue(&server, json!({"task_name": "broken_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["attempts"], 3);
    assert_eq!(result["error"], "boom on attempt 3");
    assert_eq!(result["result"], Value::Null);
    assert!(result["finished_at"].is_string());

    let id = enqueue(&server, json!({"task_name": "slow_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["attempts"], 3);
    assert_eq!(result["error"], "Task timed out after 50ms");

    let id = enqueue(&server, json!({"task_name": "panicking_task"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"], "Task panicked: kaboom");
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn dead_worker_job_is_taken_over_once(h: Harness) {
    let config = TasksConfig {
        visibility_timeout: Duration::from_secs(1),
        ..h.config()
    };
    let module = h.module(config);
    let runs = Arc::new(AtomicU32::new(0));
    let completions = Arc::new(AtomicU32::new(0));
    let started = Arc::new(Notify::new());
    {
        let (runs, completions, started) = (runs.clone(), completions.clone(), started.clone());
        module
            .register(
                "fragile_task",
                "system",
                task(move |input| {
                    let (runs, completions, started) =
                        (runs.clone(), completions.clone(), started.clone());
                    async move {
                        let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                        if run == 1 {
                            started.notify_one();
                            // The first run hangs until its worker is killed.
                            std::future::pending::<()>().await;
                        }
                        completions.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"run": run, "attempt": input.attempt}))
                    }
                }),
            )
            .unwrap();
    }
    let server = serve(&module);

    let first = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "fragile_task"})).await;
    started.notified().await;
    first.abort();

    let second = module.start_worker(&["system"]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 2);
    assert_eq!(result["result"], json!({"run": 2, "attempt": 2}));

    // Let more than a visibility timeout pass: nobody takes the settled job again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(completions.load(Ordering::SeqCst), 1);
    assert_eq!(finished(&server, &id).await, result);
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(
        list["queue_depths"]["system"],
        json!({"queued": 0, "scheduled": 0, "in_progress": 0})
    );
    second.shutdown(Duration::from_secs(5)).await;
}

async fn dead_worker_on_the_last_attempt_fails_the_job(h: Harness) {
    let config = TasksConfig {
        visibility_timeout: Duration::from_millis(500),
        max_tries: 1,
        ..h.config()
    };
    let module = h.module(config);
    let started = Arc::new(Notify::new());
    {
        let started = started.clone();
        module
            .register(
                "hanging_task",
                "system",
                task(move |_| {
                    let started = started.clone();
                    async move {
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
    let id = enqueue(&server, json!({"task_name": "hanging_task"})).await;
    started.notified().await;
    first.abort();

    let second = module.start_worker(&["system"]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["attempts"], 1);
    assert_eq!(
        result["error"],
        "The worker running the task stopped before it finished (attempt 1 of 1)"
    );
    second.shutdown(Duration::from_secs(5)).await;
}

async fn load_test_saturation_does_not_delay_system(h: Harness) {
    let config = TasksConfig {
        worker_threads: 2,
        ..h.config()
    };
    let module = h.module(config);
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    module
        .register(
            "load_gate_task",
            "load_test",
            gated(gate.clone(), started.clone()),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let mut load_ids = Vec::new();
    for _ in 0..10 {
        load_ids.push(enqueue(&server, json!({"task_name": "load_gate_task"})).await);
    }
    eventually("load_test slots to fill", || async {
        (started.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await;

    // load_test is saturated (2 of 2 slots blocked, 8 waiting); system jobs still run.
    for _ in 0..3 {
        let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
        assert_eq!(finished(&server, &id).await["status"], "completed");
    }
    assert_eq!(started.load(Ordering::SeqCst), 2);
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(
        list["queue_depths"]["load_test"],
        json!({"queued": 8, "scheduled": 0, "in_progress": 2})
    );
    for id in &load_ids {
        assert_ne!(status_of(&server, id).await["status"], "completed");
    }

    gate.add_permits(100);
    for id in &load_ids {
        assert_eq!(finished(&server, id).await["status"], "completed");
    }
    assert_eq!(started.load(Ordering::SeqCst), 10);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn two_modules_share_results(h: Harness) {
    // Two servers on the same queue: `a` only serves the API, `b` also runs the worker.
    let a = h.module(h.config());
    let b = h.module(h.config());
    let worker = b.start_worker(&[]).unwrap();
    let (server_a, server_b) = (serve(&a), serve(&b));

    let id = enqueue(&server_a, json!({"task_name": "system_health_check"})).await;
    let on_b = finished(&server_b, &id).await;
    let on_a = finished(&server_a, &id).await;
    assert_eq!(on_a["status"], "completed");
    assert_eq!(on_a, on_b);

    let id = enqueue(
        &server_b,
        json!({"task_name": "memory_operations_task", "kwargs": {"size": 1000}}),
    )
    .await;
    let on_a = finished(&server_a, &id).await;
    assert_eq!(on_a["result"]["elements"], 1000);
    assert_eq!(on_a, finished(&server_b, &id).await);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn graceful_shutdown_finishes_or_hands_back(h: Harness) {
    let module = h.module(h.config());
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    module
        .register("gate_task", "system", gated(gate.clone(), started.clone()))
        .unwrap();
    let server = serve(&module);

    // A running job finishes within the shutdown window.
    let worker = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    wait_status(&server, &id, "in_progress").await;
    let stopping = tokio::spawn(worker.shutdown(Duration::from_secs(30)));
    gate.add_permits(1);
    stopping.await.unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    assert_eq!(result["attempts"], 1);

    // A job still running when the window closes goes back to the queue, uncounted.
    let worker = module.start_worker(&["system"]).unwrap();
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    wait_status(&server, &id, "in_progress").await;
    worker.shutdown(Duration::from_millis(100)).await;
    let body = status_of(&server, &id).await;
    assert_eq!(body["status"], "queued", "{body}");
    assert_eq!(body["attempts"], 0);

    let worker = module.start_worker(&["system"]).unwrap();
    gate.add_permits(10);
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    assert_eq!(result["attempts"], 1);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn delayed_jobs_wait_their_turn(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    let (status, body) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "system_health_check", "delay_seconds": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = body["task_id"].as_str().unwrap().to_owned();
    let queued_at =
        chrono::DateTime::parse_from_rfc3339(body["queued_at"].as_str().unwrap()).unwrap();
    let estimated =
        chrono::DateTime::parse_from_rfc3339(body["estimated_start"].as_str().unwrap()).unwrap();
    assert_eq!(estimated - queued_at, chrono::Duration::seconds(1));
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(list["queue_depths"]["system"]["scheduled"], 1);

    let worker = module.start_worker(&[]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    let started =
        chrono::DateTime::parse_from_rfc3339(result["started_at"].as_str().unwrap()).unwrap();
    // Never before it is due (a little slack for clock reads in different places).
    assert!(started >= estimated - chrono::Duration::milliseconds(100));
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn orchestrator_reports_throughput(h: Harness) {
    let module = h.module(h.config());
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = enqueue(
        &server,
        json!({
            "task_name": "load_test_orchestrator",
            "kwargs": {"num_tasks": 6, "task_type": "io_simulation", "batch_size": 4},
        }),
    )
    .await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    let report = &result["result"];
    assert_eq!(report["target_task"], "io_simulation_task");
    assert_eq!(report["enqueued"], 6);
    assert_eq!(report["completed"], 6);
    assert_eq!(report["pending"], 0);
    assert_eq!(report["status"], "completed");
    assert!(report["tasks_per_second"].is_number());
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn cleanup_runs_module_hooks(h: Harness) {
    let module = h.module(h.config());
    module.register_cleanup(
        "webhook_events",
        task(|_| async { Ok(json!({"removed": 3})) }),
    );
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = enqueue(&server, json!({"task_name": "cleanup_expired_data"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"]["hooks"]["webhook_events"]["removed"], 3);
    assert!(result["result"]["expired_items_removed"].is_number());
    worker.shutdown(Duration::from_secs(5)).await;
}
