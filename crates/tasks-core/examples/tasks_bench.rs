//! Enqueue-to-result throughput and latency of the task queue.
//!
//! ```text
//! cargo run --release -p tasks-core --example tasks_bench -- \
//!     --backend redis --redis-url redis://127.0.0.1:6379 --processes 2 --task noop --count 2000
//! ```
//!
//! With `--backend redis` the program starts `--processes` worker processes (copies of itself in
//! `worker` mode) on a fresh key namespace, which it deletes at the end. With `--backend memory`
//! the worker runs inside the program (one process). Two measurements per run:
//!
//! - burst: `--count` tasks enqueued at once by 16 concurrent producers; throughput is
//!   count / (last finished_at - first queued_at);
//! - latency: 4 closed-loop clients, each enqueueing one task and waiting for its result;
//!   latency is finished_at - queued_at of each task (stored times, so polling does not skew it).

use std::error::Error;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use deadpool_redis::redis;
use futures_util::StreamExt;
use kernel::jobs::{EnqueueRequest, TaskFn};
use serde_json::Value;
use tasks_core::{BackendChoice, TaskStatus, TasksConfig, TasksModule};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const NOOP: &str = "noop_task";

#[derive(Clone)]
struct Args {
    worker: bool,
    backend: BackendChoice,
    redis_url: String,
    namespace: String,
    processes: usize,
    threads: usize,
    task: String,
    count: usize,
    latency_count: usize,
}

fn parse_args() -> Res<Args> {
    let mut args = Args {
        worker: false,
        backend: BackendChoice::Memory,
        redis_url: "redis://127.0.0.1:6379".to_owned(),
        namespace: format!("bench-{}", uuid::Uuid::new_v4().simple()),
        processes: 1,
        threads: 8,
        task: "noop".to_owned(),
        count: 2000,
        latency_count: 400,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "worker" => args.worker = true,
            "--backend" => {
                args.backend = BackendChoice::parse(&value()?).ok_or("--backend redis|memory")?
            }
            "--redis-url" => args.redis_url = value()?,
            "--namespace" => args.namespace = value()?,
            "--processes" => args.processes = value()?.parse()?,
            "--threads" => args.threads = value()?.parse()?,
            "--task" => args.task = value()?,
            "--count" => args.count = value()?.parse()?,
            "--latency-count" => args.latency_count = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(args)
}

fn config(args: &Args) -> TasksConfig {
    TasksConfig {
        backend: args.backend,
        redis_url: args.redis_url.clone(),
        namespace: Some(args.namespace.clone()),
        worker_threads: args.threads,
        embedded_worker: false,
        ..TasksConfig::default()
    }
}

async fn module(args: &Args) -> Res<TasksModule> {
    let module = TasksModule::connect(config(args)).await?;
    let noop: TaskFn = Arc::new(|_| Box::pin(async { Ok(Value::Null) }));
    module.register(NOOP, "load_test", noop)?;
    Ok(module)
}

fn task_name(args: &Args) -> &'static str {
    match args.task.as_str() {
        "io" | "io_simulation" | "io_simulation_task" => "io_simulation_task",
        _ => NOOP,
    }
}

async fn enqueue(module: &TasksModule, name: &str) -> Res<String> {
    let queued = module
        .service()
        .enqueue(EnqueueRequest {
            task_name: name.to_owned(),
            ..EnqueueRequest::default()
        })
        .await?;
    Ok(queued.record.task_id)
}

/// Waits until the task is finished; returns (queued_at, finished_at).
async fn wait(module: &TasksModule, id: &str) -> Res<(NaiveDateTime, NaiveDateTime)> {
    loop {
        let record = module.service().status(id).await?;
        if let (TaskStatus::Completed, Some(finished)) = (record.status, record.finished_at) {
            return Ok((record.queued_at, finished));
        }
        if record.status == TaskStatus::Failed {
            return Err(format!("task {id} failed: {:?}", record.error).into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn ms(d: chrono::Duration) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn burst(module: &TasksModule, name: &str, count: usize) -> Res<(f64, f64, f64)> {
    let ids: Vec<String> = futures_util::stream::iter(0..count)
        .map(|_| enqueue(module, name))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Res<_>>()?;
    let times: Vec<(NaiveDateTime, NaiveDateTime)> = futures_util::stream::iter(ids.iter())
        .map(|id| wait(module, id))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Res<_>>()?;
    let first = times.iter().map(|t| t.0).min().ok_or("no tasks")?;
    let last = times.iter().map(|t| t.1).max().ok_or("no tasks")?;
    let mut latencies: Vec<f64> = times.iter().map(|(q, f)| ms(*f - *q)).collect();
    latencies.sort_by(f64::total_cmp);
    let throughput = count as f64 / (ms(last - first) / 1000.0);
    Ok((
        throughput,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
    ))
}

async fn closed_loop(module: &TasksModule, name: &str, count: usize) -> Res<(f64, f64)> {
    let clients = 4;
    let per_client = count.div_ceil(clients);
    let mut handles = Vec::new();
    for _ in 0..clients {
        let module = module.clone();
        let name = name.to_owned();
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                let id = enqueue(&module, &name).await?;
                let (queued, finished) = wait(&module, &id).await?;
                latencies.push(ms(finished - queued));
            }
            Res::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.await??);
    }
    latencies.sort_by(f64::total_cmp);
    Ok((percentile(&latencies, 50.0), percentile(&latencies, 99.0)))
}

fn spawn_workers(args: &Args) -> Res<Vec<Child>> {
    let exe = std::env::current_exe()?;
    (0..args.processes)
        .map(|_| {
            Command::new(&exe)
                .args(["worker", "--backend", "redis", "--redis-url"])
                .arg(&args.redis_url)
                .args(["--namespace", &args.namespace, "--threads"])
                .arg(args.threads.to_string())
                .spawn()
                .map_err(Into::into)
        })
        .collect()
}

async fn delete_namespace(args: &Args) -> Res<()> {
    let client = redis::Client::open(args.redis_url.as_str())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let pattern = format!("keel:tasks:{}:*", args.namespace);
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            let _: i64 = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

#[tokio::main]
async fn main() -> Res<()> {
    let args = parse_args()?;
    if args.worker {
        let module = module(&args).await?;
        module.run_worker_until_signal(&["load_test"]).await?;
        return Ok(());
    }

    let module = module(&args).await?;
    let (mut children, in_process) = match args.backend {
        BackendChoice::Memory => (Vec::new(), Some(module.start_worker(&["load_test"])?)),
        _ => (spawn_workers(&args)?, None),
    };
    let name = task_name(&args);
    // Warm-up: connections, worker start.
    burst(&module, name, 100).await?;

    let (throughput, burst_p50, burst_p99) = burst(&module, name, args.count).await?;
    let (p50, p99) = closed_loop(&module, name, args.latency_count).await?;
    println!(
        "backend={} processes={} threads={} task={} count={} | burst: {:.0} tasks/s, latency p50 {:.2} ms p99 {:.2} ms | 4 clients one at a time: p50 {:.2} ms p99 {:.2} ms",
        match args.backend {
            BackendChoice::Memory => "memory",
            _ => "redis",
        },
        if in_process.is_some() {
            1
        } else {
            args.processes
        },
        args.threads,
        name,
        args.count,
        throughput,
        burst_p50,
        burst_p99,
        p50,
        p99
    );

    if let Some(worker) = in_process {
        worker.shutdown(Duration::from_secs(5)).await;
    }
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    if args.backend != BackendChoice::Memory {
        delete_namespace(&args).await?;
    }
    Ok(())
}
