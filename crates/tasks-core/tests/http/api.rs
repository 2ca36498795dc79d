//! The HTTP API and the JobQueue trait, on both backends.

use super::*;

backend_suite! {
    enqueue_then_result,
    pending_answers_202,
    results_expire_to_404,
    request_errors_follow_the_contract,
    list_shows_tasks_and_depths,
    job_queue_trait_enqueues,
}

async fn enqueue_then_result(h: Harness) {
    let module = h.module(h.config());
    module
        .register(
            "echo_task",
            "system",
            task(|input| async move { Ok(json!({"args": input.args, "kwargs": input.kwargs})) }),
        )
        .unwrap();
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let (status, body) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "io_simulation_task", "queue_type": "load_test"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["task_id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok());
    assert_eq!(body["task_name"], "io_simulation_task");
    assert_eq!(body["queue_type"], "load_test");
    assert_eq!(body["status"], "queued");
    assert_eq!(
        body["message"],
        "Task 'io_simulation_task' enqueued to load_test queue"
    );
    assert!(body["queued_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(body["estimated_start"], body["queued_at"]);

    let result = finished(&server, id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["task_id"], id);
    assert_eq!(result["attempts"], 1);
    assert_eq!(result["error"], Value::Null);
    assert_eq!(result["result"]["total_concurrent_operations"], 7);
    assert_eq!(result["result"]["operations"].as_array().unwrap().len(), 7);
    assert!(result["result"]["total_duration_ms"].is_number());
    assert!(result["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(result["finished_at"].as_str().unwrap().ends_with('Z'));

    // Arguments reach the task unchanged (the reference's `task_kwargs` spelling too).
    let id = enqueue(
        &server,
        json!({
            "task_name": "echo_task",
            "args": [1, "two", {"three": [3]}, 12345678901234567890u64, 0.1],
            "task_kwargs": {"flag": true, "nested": {"x": null}},
        }),
    )
    .await;
    let result = finished(&server, &id).await;
    assert_eq!(
        result["result"],
        json!({
            "args": [1, "two", {"three": [3]}, 12345678901234567890u64, 0.1],
            "kwargs": {"flag": true, "nested": {"x": null}},
        })
    );
    let id = enqueue(
        &server,
        json!({"task_name": "echo_task", "args": null, "kwargs": null}),
    )
    .await;
    assert_eq!(
        finished(&server, &id).await["result"],
        json!({"args": [], "kwargs": {}})
    );

    // The queue is taken by default from the task.
    let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["queue_type"], "system");
    assert_eq!(result["result"]["status"], "healthy");
    assert_eq!(status_of(&server, &id).await["status"], "completed");

    worker.shutdown(Duration::from_secs(5)).await;
}

async fn pending_answers_202(h: Harness) {
    let module = h.module(h.config());
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    module
        .register("held_task", "system", gated(gate.clone(), started.clone()))
        .unwrap();
    let server = serve(&module);

    // No worker yet: queued.
    let id = enqueue(&server, json!({"task_name": "held_task"})).await;
    let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "queued");
    assert_eq!(body["attempts"], 0);
    assert_eq!(body["result"], Value::Null);
    assert_eq!(body["started_at"], Value::Null);
    assert_eq!(status_of(&server, &id).await["status"], "queued");

    // Running: in_progress, still 202.
    let worker = module.start_worker(&["system"]).unwrap();
    wait_status(&server, &id, "in_progress").await;
    let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "in_progress");
    assert_eq!(body["attempts"], 1);

    gate.add_permits(1);
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed");
    assert_eq!(result["result"], json!({"attempt": 1}));
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn results_expire_to_404(h: Harness) {
    let config = TasksConfig {
        keep_result: Duration::from_secs(1),
        ..h.config()
    };
    let module = h.module(config);
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
    assert_eq!(finished(&server, &id).await["status"], "completed");
    let body = eventually("the result to expire", || async {
        let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}")).await;
        (status == StatusCode::NOT_FOUND).then_some(body)
    })
    .await;
    assert_eq!(body, json!({"detail": format!("Task not found: {id}")}));
    let (status, _) = get(&server, &format!("/api/v1/tasks/status/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn request_errors_follow_the_contract(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    let path = "/api/v1/tasks/enqueue";

    let (status, body) = post(&server, path, json!({"task_name": "nope"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Unknown task: nope");
    let available = body["available_tasks"].as_array().unwrap();
    assert!(available.contains(&json!("io_simulation_task")));
    assert!(available.contains(&json!("cleanup_expired_data")));

    // A huge name is not echoed whole.
    let huge = "x".repeat(100_000);
    let (status, body) = post(&server, path, json!({"task_name": huge})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.len() < 200 && detail.ends_with('…'), "{detail}");

    // Arguments are checked at enqueue, naming the argument; nothing is queued.
    for (task, kwargs, argument) in [
        (
            "io_simulation_task",
            json!({"latency_scale": "fast"}),
            "latency_scale",
        ),
        ("cpu_intensive_task", json!({"limit": -1}), "limit"),
        (
            "load_test_orchestrator",
            json!({"task_type": "nope"}),
            "task_type",
        ),
        (
            "load_test_orchestrator",
            json!({"num_tasks": 0}),
            "num_tasks",
        ),
    ] {
        let (status, body) =
            post(&server, path, json!({"task_name": task, "kwargs": kwargs})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{task} {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("Invalid arguments for {task}: {argument}")),
            "{detail}"
        );
    }

    let (status, body) = post(
        &server,
        path,
        json!({"task_name": "io_simulation_task", "queue_type": "system"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["detail"],
        "Task io_simulation_task runs on queue load_test, not system"
    );

    let (status, body) = post(
        &server,
        path,
        json!({"task_name": "io_simulation_task", "queue_type": "media"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Unknown queue: media");
    assert_eq!(body["available_queues"], json!(["load_test", "system"]));

    let (status, body) = post(
        &server,
        path,
        json!({"task_name": "io_simulation_task", "delay_seconds": 99_999_999}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        "delay_seconds must be between 0 and 2592000"
    );

    let (status, body) = post(&server, path, json!({"queue_type": "system"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("task_name"));

    let response = server
        .client
        .post(server.url(path))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);

    let (status, body) = get(&server, "/api/v1/tasks/result/no-such-task").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"detail": "Task not found: no-such-task"}));
    let (status, body) = get(&server, "/api/v1/tasks/status/no-such-task").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"detail": "Task not found: no-such-task"}));
}

async fn list_shows_tasks_and_depths(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    for _ in 0..2 {
        enqueue(&server, json!({"task_name": "cpu_intensive_task"})).await;
    }
    enqueue(
        &server,
        json!({"task_name": "system_health_check", "delay_seconds": 3600}),
    )
    .await;

    for path in ["/api/v1/tasks", "/api/v1/tasks/"] {
        let (status, body) = get(&server, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(body["total_count"], 7);
        assert_eq!(body["backend"], h.kind.as_str());
        assert_eq!(
            body["queues"]["load_test"],
            json!([
                "cpu_intensive_task",
                "failure_testing_task",
                "io_simulation_task",
                "load_test_orchestrator",
                "memory_operations_task"
            ])
        );
        assert_eq!(
            body["queues"]["system"],
            json!(["cleanup_expired_data", "system_health_check"])
        );
        assert_eq!(
            body["queue_depths"]["load_test"],
            json!({"queued": 2, "scheduled": 0, "in_progress": 0})
        );
        assert_eq!(
            body["queue_depths"]["system"],
            json!({"queued": 0, "scheduled": 1, "in_progress": 0})
        );
    }
}

async fn job_queue_trait_enqueues(h: Harness) {
    let module = h.module(h.config());
    let queue = module.queue();
    let id = queue
        .enqueue(EnqueueRequest {
            task_name: "system_health_check".into(),
            ..EnqueueRequest::default()
        })
        .await
        .unwrap();
    let record = module.service().status(&id).await.unwrap();
    assert_eq!(record.queue, "system");
    assert_eq!(
        queue
            .enqueue(EnqueueRequest {
                task_name: "nope".into(),
                ..EnqueueRequest::default()
            })
            .await,
        Err(JobError::UnknownTask("nope".into()))
    );
    assert_eq!(
        queue
            .enqueue(EnqueueRequest {
                task_name: "system_health_check".into(),
                queue: Some("load_test".into()),
                ..EnqueueRequest::default()
            })
            .await,
        Err(JobError::WrongQueue {
            task: "system_health_check".into(),
            expected: "system".into(),
            requested: "load_test".into(),
        })
    );
}
