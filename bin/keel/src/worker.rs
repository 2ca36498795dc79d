//! `keel worker`: the task runner's workers with every enabled module's tasks registered, in this
//! process, or with `WORKER_PROCESSES` > 1 in that many child processes (each `keel worker` with
//! one process), stopped together on SIGTERM/SIGINT.

use crate::app;
use crate::cli::CliError;
use crate::config::Config;

pub async fn run(config: Config, queues: Option<String>) -> Result<(), CliError> {
    let composed = app::build_modules(&config).await?;
    let runner = composed.runner.clone().ok_or_else(|| {
        CliError::Failed(
            "no enabled module runs background tasks: mount the tasks module (KEEL_MODULES)"
                .to_owned(),
        )
    })?;
    let processes = runner.worker_processes();
    if processes > 1 {
        return supervise(processes, queues).await;
    }
    let queues: Vec<String> = queues
        .as_deref()
        .map(|raw| {
            raw.split(',')
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    tracing::info!(queues = ?queues, "worker started");
    runner.run_worker(&queues).await.map_err(CliError::Failed)
}

/// Starts `processes` single-process workers and forwards SIGTERM to them when stopped.
async fn supervise(processes: usize, queues: Option<String>) -> Result<(), CliError> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let exe = std::env::current_exe()?;
    let mut children = Vec::with_capacity(processes);
    for _ in 0..processes {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.arg("worker").env("WORKER_PROCESSES", "1");
        if let Some(q) = &queues {
            cmd.args(["--queues", q]);
        }
        children.push(cmd.spawn()?);
    }
    tracing::info!(processes, "worker processes started");
    kernel::signals::stop_requested().await;
    for child in &children {
        if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }
    let mut failed = 0;
    for mut child in children {
        if !child.wait().await.is_ok_and(|s| s.success()) {
            failed += 1;
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(CliError::Failed(format!(
            "{n} worker processes did not stop cleanly"
        ))),
    }
}
