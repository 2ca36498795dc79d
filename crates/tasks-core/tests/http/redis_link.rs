//! What only the Redis backend has: its shared connection, its scripts, entries that are not jobs.

use super::*;

/// A Redis harness, or `None` (the test is skipped with a note) without `TEST_REDIS_URL`.
fn redis_harness() -> Option<Harness> {
    let harness = Harness::redis();
    if harness.is_none() {
        eprintln!("TEST_REDIS_URL is not set: Redis test skipped");
    }
    harness
}

/// A connection of the test's own to the same Redis.
async fn direct(h: &Harness) -> redis::aio::MultiplexedConnection {
    redis::Client::open(h.redis_url.as_deref().unwrap())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn io_task(server: &TestServer) -> String {
    enqueue(
        server,
        json!({"task_name": "io_simulation_task", "kwargs": {"latency_scale": 0}}),
    )
    .await
}

/// The ids of the connections named `name` in `CLIENT LIST`.
async fn connections_named(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> Vec<String> {
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .unwrap();
    let wanted = format!("name={name}");
    clients
        .lines()
        .filter(|line| line.split(' ').any(|field| field == wanted))
        .filter_map(|line| {
            line.split(' ')
                .find_map(|field| field.strip_prefix("id="))
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_loaded_again_after_redis_forgets_them() {
    let Some(h) = redis_harness() else { return };
    let module = h.module(h.config());
    let worker = module.start_worker(&[]).unwrap();
    let server = serve(&module);
    let id = io_task(&server).await;
    assert_eq!(finished(&server, &id).await["status"], "completed");

    // As after a restart of Redis: every script it had is gone.
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut direct(&h).await)
        .await
        .unwrap();
    let id = io_task(&server).await;
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["attempts"], 1);
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_connection_is_opened_again_after_it_breaks() {
    let Some(h) = redis_harness() else { return };
    let module = h.module(h.config());
    let server = serve(&module);
    let id = io_task(&server).await;
    let name = format!("keel:tasks:{}:link", h.namespace);
    let mut direct = direct(&h).await;
    let before = connections_named(&mut direct, &name).await;
    assert_eq!(before.len(), 1, "one shared connection named {name}");

    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&before[0])
        .query_async(&mut direct)
        .await
        .unwrap();
    // The request that meets the broken connection may fail; the next one reconnects.
    let path = format!("/api/v1/tasks/status/{id}");
    let (first, body) = get(&server, &path).await;
    assert!(
        first == StatusCode::OK || first == StatusCode::SERVICE_UNAVAILABLE,
        "{first}: {body}"
    );
    let (status, body) = get(&server, &path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "queued", "{body}");
    let after = connections_named(&mut direct, &name).await;
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_that_is_not_a_job_does_not_hold_up_the_others() {
    let Some(h) = redis_harness() else { return };
    let module = h.module(h.config());
    let prefix = format!("keel:tasks:{}:", h.namespace);
    let stream = format!("{prefix}stream:load_test");
    let mut direct = direct(&h).await;
    // A key that is not a job hash, queued first.
    let () = redis::cmd("SET")
        .arg(format!("{prefix}job:not-a-job"))
        .arg("x")
        .query_async(&mut direct)
        .await
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("task_id")
        .arg("not-a-job")
        .query_async(&mut direct)
        .await
        .unwrap();
    let server = serve(&module);
    let id = io_task(&server).await;

    let worker = module.start_worker(&[]).unwrap();
    let result = finished(&server, &id).await;
    assert_eq!(result["status"], "completed", "{result}");
    // The bad entry stays delivered and pending (tried again after the visibility timeout).
    let (_, list) = get(&server, "/api/v1/tasks").await;
    assert_eq!(
        list["queue_depths"]["load_test"],
        json!({"queued": 0, "scheduled": 0, "in_progress": 1}),
        "{list}"
    );
    worker.shutdown(Duration::from_secs(5)).await;
}
