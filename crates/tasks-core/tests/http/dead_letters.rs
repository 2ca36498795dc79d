//! Dead letters: failed jobs kept with their error, attempts and arguments; listed, retried and
//! dropped by administrators, forgotten after WORKER_KEEP_RESULT_SECONDS.

use super::*;

use std::sync::atomic::AtomicBool;

backend_suite! {
    failed_jobs_are_listed_retried_and_dropped,
    dead_letters_expire_with_the_results,
    a_job_whose_worker_died_on_its_last_attempt_is_a_dead_letter,
}

/// A task on `system` that fails while `failing` is set.
fn register_fragile(module: &TasksModule, failing: Arc<AtomicBool>) {
    module
        .register(
            "fragile",
            "system",
            task(move |input| {
                let failing = failing.load(Ordering::SeqCst);
                async move {
                    if failing {
                        Err(format!("down on attempt {}", input.attempt))
                    } else {
                        Ok(json!({"args": input.args}))
                    }
                }
            }),
        )
        .unwrap();
}

async fn failed_jobs_are_listed_retried_and_dropped(h: Harness) {
    let module = h.module(TasksConfig {
        max_tries: 2,
        ..h.config()
    });
    let failing = Arc::new(AtomicBool::new(true));
    register_fragile(&module, failing.clone());
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);

    let (status, body) = get(&server, "/api/v1/tasks/failed").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"tasks": [], "total": 0, "page": 1, "page_size": 20})
    );

    let mut ids = Vec::new();
    for n in 0..3 {
        let id = enqueue(
            &server,
            json!({"task_name": "fragile", "args": [n], "kwargs": {"n": n}}),
        )
        .await;
        assert_eq!(finished(&server, &id).await["status"], "failed");
        ids.push(id);
    }
    // A completed job is no dead letter.
    let ok = enqueue(&server, json!({"task_name": "system_health_check"})).await;
    assert_eq!(finished(&server, &ok).await["status"], "completed");

    let (status, body) = get(&server, "/api/v1/tasks/failed?page_size=2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["total"], 3);
    assert_eq!(body["page_size"], 2);
    let page = body["tasks"].as_array().unwrap();
    assert_eq!(page.len(), 2);
    // Most recent failure first.
    assert_eq!(page[0]["task_id"], ids[2].as_str());
    assert_eq!(page[1]["task_id"], ids[1].as_str());
    let first = &page[0];
    assert_eq!(first["task_name"], "fragile");
    assert_eq!(first["queue_type"], "system");
    assert_eq!(first["args"], json!([2]));
    assert_eq!(first["kwargs"], json!({"n": 2}));
    assert_eq!(first["error"], "down on attempt 2");
    assert_eq!(first["attempts"], 2);
    assert!(first["failed_at"].as_str().unwrap().ends_with('Z'));
    let (_, body) = get(&server, "/api/v1/tasks/failed?page=2&page_size=2").await;
    assert_eq!(body["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(body["tasks"][0]["task_id"], ids[0].as_str());
    for bad in ["page=0", "page_size=0", "page_size=101", "page=x"] {
        let (status, body) = get(&server, &format!("/api/v1/tasks/failed?{bad}")).await;
        assert!(status.is_client_error(), "{bad}: {status}");
        assert!(body["detail"].is_string(), "{bad}: {body}");
    }

    // Retry: queued again under the same id with fresh attempts, and off the list.
    failing.store(false, Ordering::SeqCst);
    let (status, body) = post(
        &server,
        &format!("/api/v1/tasks/failed/{}/retry", ids[0]),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["task_id"], ids[0].as_str());
    assert_eq!(body["status"], "queued", "{body}");
    assert_eq!(body["attempts"], 0, "{body}");
    assert_eq!(body["error"], Value::Null, "{body}");
    let done = finished(&server, &ids[0]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["attempts"], 1);
    assert_eq!(done["result"], json!({"args": [0]}));
    let (status, body) = post(
        &server,
        &format!("/api/v1/tasks/failed/{}/retry", ids[0]),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["detail"], format!("Failed task not found: {}", ids[0]));

    // Drop: gone for good.
    let (status, _) = delete(&server, &format!("/api/v1/tasks/failed/{}", ids[1]), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = get(&server, &format!("/api/v1/tasks/result/{}", ids[1])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = delete(&server, &format!("/api/v1/tasks/failed/{}", ids[1]), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Neither a finished job that did not fail, nor an unknown one, is a dead letter.
    for id in [ok.as_str(), "nope", "a%00b"] {
        let (status, body) = delete(&server, &format!("/api/v1/tasks/failed/{id}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}: {body}");
        let (status, _) = post(
            &server,
            &format!("/api/v1/tasks/failed/{id}/retry"),
            json!({}),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}");
    }
    let (_, body) = get(&server, "/api/v1/tasks/failed").await;
    assert_eq!(body["total"], 1, "{body}");
    assert_eq!(body["tasks"][0]["task_id"], ids[2].as_str());

    // The same through the command line's calls (Redis only: the CLI needs a shared queue).
    if h.kind == BackendKind::Redis {
        let listed = module.cli_failed(1, 20).await.unwrap();
        assert_eq!(listed.total, 1);
        let retried = module.cli_retry_failed(&ids[2]).await.unwrap();
        assert_eq!(retried.task_id, ids[2]);
        assert!(module.cli_drop_failed(&ids[2]).await.is_err());
        assert!(module.cli_failed(0, 20).await.is_err());
    }
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn dead_letters_expire_with_the_results(h: Harness) {
    let module = h.module(TasksConfig {
        max_tries: 1,
        keep_result: Duration::from_millis(1500),
        ..h.config()
    });
    register_fragile(&module, Arc::new(AtomicBool::new(true)));
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = enqueue(&server, json!({"task_name": "fragile"})).await;
    assert_eq!(finished(&server, &id).await["status"], "failed");
    let (_, body) = get(&server, "/api/v1/tasks/failed").await;
    assert_eq!(body["total"], 1, "{body}");
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let (_, body) = get(&server, "/api/v1/tasks/failed").await;
    assert_eq!(body["total"], 0, "{body}");
    assert_eq!(body["tasks"], json!([]));
    let (status, _) = post(
        &server,
        &format!("/api/v1/tasks/failed/{id}/retry"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn a_job_whose_worker_died_on_its_last_attempt_is_a_dead_letter(h: Harness) {
    let config = TasksConfig {
        max_tries: 1,
        visibility_timeout: Duration::from_millis(300),
        ..h.config()
    };
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    let first = h.module(config.clone());
    first
        .register("stuck", "system", gated(gate.clone(), started.clone()))
        .unwrap();
    let worker = first.start_worker(&[]).unwrap();
    let server = serve(&first);
    let id = enqueue(&server, json!({"task_name": "stuck"})).await;
    eventually("the first run", || async {
        (started.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    worker.abort();
    // Another worker finds the job of the dead one and fails it: its only attempt was spent.
    let second = h.module(config);
    second
        .register("stuck", "system", gated(gate, started))
        .unwrap();
    let worker = second.start_worker(&[]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "failed", "{result}");
    let (_, body) = get(&server, "/api/v1/tasks/failed").await;
    assert_eq!(body["total"], 1, "{body}");
    assert_eq!(body["tasks"][0]["task_id"], id.as_str());
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn dead_letters_are_for_administrators() {
    let h = Harness::memory();
    let module = h.module(h.config());
    let server = serve_with_auth(&module, Some(Arc::new(Users)));
    for (method, path) in [
        (reqwest::Method::GET, "/api/v1/tasks/failed"),
        (reqwest::Method::POST, "/api/v1/tasks/failed/x/retry"),
        (reqwest::Method::DELETE, "/api/v1/tasks/failed/x"),
    ] {
        let (status, body) = call_as(&server, "alice", method.clone(), path, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        let (status, body) = call_as(&server, "admin", method, path, None).await;
        assert!(
            status == StatusCode::OK || status == StatusCode::NOT_FOUND,
            "{path}: {status} {body}"
        );
    }
}
