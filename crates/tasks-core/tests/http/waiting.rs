//! `GET /result/{id}?wait=`: the request is held until the job ends, woken by the end's
//! announcement (from a worker of another module on the same queue), or answered 202 at its
//! deadline; a client that goes away leaves no waiter behind.

use super::*;

backend_suite! {
    a_waiting_request_is_answered_when_another_process_finishes_the_job,
    a_wait_ends_with_202_at_its_deadline,
    a_closed_client_frees_its_waiter_at_once,
    wait_values_outside_1_to_30_are_refused,
}

/// A module serving the API only, and one on the same queue whose worker runs a gated task.
fn api_and_worker(h: &Harness) -> (TasksModule, TasksModule, Arc<Semaphore>) {
    let api = h.module(h.config());
    let runner = h.module(h.config());
    let gate = Arc::new(Semaphore::new(0));
    for module in [&api, &runner] {
        module
            .register(
                "gate_task",
                "system",
                gated(gate.clone(), Arc::new(AtomicU32::new(0))),
            )
            .unwrap();
    }
    (api, runner, gate)
}

async fn a_waiting_request_is_answered_when_another_process_finishes_the_job(h: Harness) {
    let (api, runner, gate) = api_and_worker(&h);
    let worker = runner.start_worker(&["system"]).unwrap();
    let server = serve(&api);
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    wait_status(&server, &id, "in_progress").await;

    let path = format!("/api/v1/tasks/result/{id}?wait=30");
    let waiting = tokio::spawn({
        let (client, url) = (server.client.clone(), server.url(&path));
        async move {
            let response = client.get(url).send().await.unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        }
    });
    let service = api.service();
    eventually("the request to wait", || async {
        (service.waiting() == 1).then_some(())
    })
    .await;
    gate.add_permits(1);
    // Answered because the job ended, not because the 30 s passed: the answer is the result.
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["result"], json!({"attempt": 1}));
    assert_eq!(service.waiting(), 0);

    // A finished job answers at once, with or without `wait`; an unknown one is 404.
    assert_eq!(get(&server, &path).await, (StatusCode::OK, body));
    let (status, body) = get(&server, "/api/v1/tasks/result/nope?wait=30").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(service.waiting(), 0);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn a_wait_ends_with_202_at_its_deadline(h: Harness) {
    let (api, runner, gate) = api_and_worker(&h);
    let worker = runner.start_worker(&["system"]).unwrap();
    let server = serve(&api);
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    wait_status(&server, &id, "in_progress").await;
    let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}?wait=1")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "in_progress");
    assert_eq!(api.service().waiting(), 0);
    gate.add_permits(1);
    worker.shutdown(Duration::from_secs(5)).await;
}

async fn a_closed_client_frees_its_waiter_at_once(h: Harness) {
    let (api, _runner, _gate) = api_and_worker(&h);
    let server = serve(&api);
    let id = enqueue(&server, json!({"task_name": "gate_task"})).await;
    let service = api.service();
    for round in 0..3 {
        // The client gives up long before the 30 s wait ends, and closes its connection.
        let client = reqwest::Client::new();
        let request = client
            .get(server.url(&format!("/api/v1/tasks/result/{id}?wait=30")))
            .send();
        let gone = tokio::time::timeout(Duration::from_millis(300), request).await;
        assert!(gone.is_err(), "round {round}: answered before its wait");
        drop(client);
        // Freed when the connection closed: well before the wait would have ended.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while service.waiting() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: the waiter outlived its client"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn wait_values_outside_1_to_30_are_refused(h: Harness) {
    let module = h.module(h.config());
    let server = serve(&module);
    let id = enqueue(&server, json!({"task_name": "system_health_check"})).await;
    for wait in ["0", "31", "-1", "abc", "1.5"] {
        let (status, body) = get(&server, &format!("/api/v1/tasks/result/{id}?wait={wait}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{wait}: {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains("wait"), "{wait}: {detail}");
    }
}
