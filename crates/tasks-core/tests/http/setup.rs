//! Backend choice, Redis down, auth, OpenAPI and the CLI.

use super::*;

/// A local port with nothing listening.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn down_config(backend: BackendChoice) -> TasksConfig {
    TasksConfig {
        backend,
        redis_url: format!("redis://127.0.0.1:{}", closed_port()),
        redis_connect_timeout: Duration::from_millis(500),
        ..TasksConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_configured_but_down_answers_503() {
    let module = TasksModule::connect(down_config(BackendChoice::Redis))
        .await
        .unwrap();
    assert_eq!(module.backend_kind(), BackendKind::Redis);
    let server = serve(&module);

    let (status, body) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "io_simulation_task"}),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.starts_with("Task queue unavailable: "), "{detail}");
    for path in [
        "/api/v1/tasks/result/x",
        "/api/v1/tasks/status/x",
        "/api/v1/tasks",
    ] {
        let (status, body) = get(&server, path).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .starts_with("Task queue unavailable: ")
        );
    }
    // Validation still answers first.
    let (status, _) = post(
        &server,
        "/api/v1/tasks/enqueue",
        json!({"task_name": "nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let health = module.health().await;
    assert_eq!(health.status, kernel::health::HealthStatus::Unhealthy);

    // A worker on a Redis that is down keeps trying and stops cleanly.
    let worker = module.start_worker(&[]).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_memory_when_redis_is_down() {
    let module = TasksModule::connect(down_config(BackendChoice::Auto))
        .await
        .unwrap();
    assert_eq!(module.backend_kind(), BackendKind::Memory);
    assert_eq!(
        module.health().await.status,
        kernel::health::HealthStatus::Degraded
    );
    // Other processes cannot see an in-memory queue: the CLI and `keel worker` refuse it.
    let refused = module
        .cli_enqueue("system_health_check", None, None, 0)
        .await;
    match refused {
        Err(tasks_core::TasksError::Unavailable(why)) => {
            // The refusal says why there is no Redis, what needs it, and where tasks do run.
            assert!(why.contains("REDIS_URL) did not answer"), "{why}");
            assert!(why.contains("need Redis"), "{why}");
            assert!(why.contains("POST /api/v1/tasks/enqueue"), "{why}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(module.run_worker_until_signal(&[]).await.is_err());
    assert!(module.cli_list().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_uses_redis_when_it_answers() {
    let Some(h) = Harness::redis() else {
        eprintln!("TEST_REDIS_URL is not set: Redis run skipped");
        return;
    };
    let config = TasksConfig {
        backend: BackendChoice::Auto,
        ..h.config()
    };
    let module = TasksModule::connect(config).await.unwrap();
    assert_eq!(module.backend_kind(), BackendKind::Redis);
    assert_eq!(
        module.health().await.status,
        kernel::health::HealthStatus::Healthy
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_enqueues_and_waits_for_results() {
    let Some(h) = Harness::redis() else {
        eprintln!("TEST_REDIS_URL is not set: Redis run skipped");
        return;
    };
    let module = TasksModule::connect(h.config()).await.unwrap();
    let worker = module.start_worker(&["load_test"]).unwrap();
    // Another process (here: another module instance) enqueues and reads.
    let cli = TasksModule::connect(h.config()).await.unwrap();
    let list = cli.cli_list().await.unwrap();
    assert_eq!(list.backend, "redis");
    let queued = cli
        .cli_enqueue(
            "cpu_intensive_task",
            Some("load_test"),
            Some("{\"limit\": 100}"),
            0,
        )
        .await
        .unwrap();
    let result = cli
        .cli_result(&queued.task_id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(result.status, tasks_core::TaskStatus::Completed);
    assert_eq!(result.result.unwrap()["primes_found"], 25);
    assert!(matches!(
        cli.cli_enqueue("nope", None, None, 0).await,
        Err(tasks_core::TasksError::UnknownTask { .. })
    ));
    assert!(matches!(
        cli.cli_result("missing", None).await,
        Err(tasks_core::TasksError::NotFound(_))
    ));
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_cancels_tasks_and_manages_failed_ones() {
    let Some(h) = Harness::redis() else {
        eprintln!("TEST_REDIS_URL is not set: Redis run skipped");
        return;
    };
    let config = TasksConfig {
        max_tries: 1,
        ..h.config()
    };
    let module = TasksModule::connect(config.clone()).await.unwrap();
    let worker = module.start_worker(&["load_test"]).unwrap();
    let cli = TasksModule::connect(config).await.unwrap();

    // A delayed task is cancelled before it runs; cancelling it again says the same.
    let later = cli
        .cli_enqueue("io_simulation_task", None, None, 3600)
        .await
        .unwrap();
    for _ in 0..2 {
        let cancelled = cli.cli_cancel(&later.task_id).await.unwrap();
        assert_eq!(cancelled.status, tasks_core::TaskStatus::Cancelled);
    }
    assert!(matches!(
        cli.cli_cancel("no-such-task").await,
        Err(tasks_core::TasksError::NotFound(_))
    ));

    // A task that fails its only try is a dead letter: listed, retried (and failing again),
    // then dropped.
    let doomed = cli
        .cli_enqueue(
            "failure_testing_task",
            None,
            Some("{\"failure_rate\": 1.0}"),
            0,
        )
        .await
        .unwrap();
    let wait = Some(Duration::from_secs(60));
    let failed = cli.cli_result(&doomed.task_id, wait).await.unwrap();
    assert_eq!(failed.status, tasks_core::TaskStatus::Failed);
    let listed = cli.cli_failed(1, 20).await.unwrap();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.tasks[0].task_id, doomed.task_id);
    // No worker runs while the retry is checked: one would fail the task again at once.
    worker.shutdown(Duration::from_secs(5)).await;
    let retried = cli.cli_retry_failed(&doomed.task_id).await.unwrap();
    assert_eq!(retried.task_id, doomed.task_id);
    assert_eq!(cli.cli_failed(1, 20).await.unwrap().total, 0);
    let worker = module.start_worker(&["load_test"]).unwrap();
    let again = cli.cli_result(&doomed.task_id, wait).await.unwrap();
    assert_eq!(again.status, tasks_core::TaskStatus::Failed);
    assert_eq!(cli.cli_failed(1, 20).await.unwrap().total, 1);
    cli.cli_drop_failed(&doomed.task_id).await.unwrap();
    assert_eq!(cli.cli_failed(1, 20).await.unwrap().total, 0);
    assert!(matches!(
        cli.cli_retry_failed(&doomed.task_id).await,
        Err(tasks_core::TasksError::DeadLetterNotFound(_))
    ));
    worker.shutdown(Duration::from_secs(5)).await;
}

struct TokenAuth;

#[async_trait::async_trait]
impl Authenticator for TokenAuth {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        match token {
            "good" => Ok(Principal {
                user_id: 1,
                email: "a@example.com".into(),
                full_name: None,
                role: Role::User,
                is_active: true,
            }),
            "inactive" => Err(AuthFailure::Inactive),
            _ => Err(AuthFailure::InvalidCredentials),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_need_an_active_user_when_auth_is_mounted() {
    let h = Harness::memory();
    let module = h.module(h.config());
    let server = serve_with_auth(&module, Some(Arc::new(TokenAuth)));

    let response = server
        .client
        .get(server.url("/api/v1/tasks"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers().get("www-authenticate").unwrap(),
        "Bearer"
    );
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"detail": "Not authenticated"})
    );

    for (token, detail) in [
        ("bad", "Could not validate credentials"),
        ("inactive", "Inactive user"),
    ] {
        let response = server
            .client
            .post(server.url("/api/v1/tasks/enqueue"))
            .bearer_auth(token)
            .json(&json!({"task_name": "system_health_check"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.json::<Value>().await.unwrap()["detail"], detail);
    }

    let response = server
        .client
        .post(server.url("/api/v1/tasks/enqueue"))
        .bearer_auth("good")
        .json(&json!({"task_name": "system_health_check"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let id = response.json::<Value>().await.unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for path in [
        format!("/api/v1/tasks/result/{id}"),
        format!("/api/v1/tasks/status/{id}"),
    ] {
        let response = server.client.get(server.url(&path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        let response = server
            .client
            .get(server.url(&path))
            .bearer_auth("good")
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{path}");
    }
}

#[tokio::test]
async fn openapi_describes_every_route() {
    use utoipa_actix_web::AppExt;
    let h = Harness::memory();
    let module = h.module(h.config());
    let module: Arc<dyn Module> = Arc::new(module);
    let (_, api) =
        kernel::module::mount(actix_web::App::new().into_utoipa_app(), &module).split_for_parts();
    let paths: Vec<&String> = api.paths.paths.keys().collect();
    for expected in [
        "/api/v1/tasks",
        "/api/v1/tasks/enqueue",
        "/api/v1/tasks/result/{task_id}",
        "/api/v1/tasks/status/{task_id}",
    ] {
        assert!(
            paths.iter().any(|p| p.as_str() == expected),
            "{expected} missing from {paths:?}"
        );
    }
    let schemas = api.components.map(|c| c.schemas).unwrap_or_default();
    for schema in [
        "tasks.EnqueueBody",
        "tasks.EnqueueResponse",
        "tasks.TaskStatusResponse",
        "tasks.TaskListResponse",
    ] {
        assert!(schemas.contains_key(schema), "{schema} missing");
    }
}
