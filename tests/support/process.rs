//! Real `keel` processes: started with a clean environment in a folder of their own, their
//! stdout and stderr captured in a log file, stopped with SIGTERM or killed (with every process
//! they started) when dropped.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// How long a process may take to start answering.
const START_BOUND: Duration = Duration::from_secs(60);

/// A `keel` command to start: arguments and environment. Nothing is inherited from the test's
/// environment; the defaults are JSON logs at `info`, `BCRYPT_COST=4`, two HTTP workers, the
/// in-memory task queue and port 0 (the port is read from the log).
pub struct Keel {
    exe: PathBuf,
    name: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
}

impl Keel {
    /// `keel serve`. `exe` is [`keel_bin!()`](crate::keel_bin).
    pub fn serve(exe: &str) -> Keel {
        Keel::new(exe, &["serve"])
    }

    /// `keel worker`.
    pub fn worker(exe: &str) -> Keel {
        Keel::new(exe, &["worker"])
    }

    /// `keel <args>`.
    pub fn new(exe: &str, args: &[&str]) -> Keel {
        let env = [
            ("HOST", "127.0.0.1"),
            ("PORT", "0"),
            ("LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
            ("BCRYPT_COST", "4"),
            ("HTTP_WORKERS", "2"),
            ("TASKS_BACKEND", "memory"),
            ("SHUTDOWN_TIMEOUT_SECONDS", "10"),
            ("WORKER_SHUTDOWN_TIMEOUT_SECONDS", "5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Keel {
            exe: PathBuf::from(exe),
            name: args.join(" "),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env,
        }
    }

    /// Sets an environment variable (the last value given wins).
    pub fn env(mut self, key: &str, value: impl std::fmt::Display) -> Keel {
        self.env.insert(key.to_owned(), value.to_string());
        self
    }

    /// Sets every pair.
    pub fn envs<K: AsRef<str>, V: std::fmt::Display>(
        mut self,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Keel {
        for (k, v) in pairs {
            self.env.insert(k.as_ref().to_owned(), v.to_string());
        }
        self
    }

    /// A name for messages and log dumps (default: the arguments).
    pub fn named(mut self, name: &str) -> Keel {
        self.name = name.to_owned();
        self
    }

    /// Starts the process in a new folder and process group.
    pub fn spawn(self) -> Running {
        let dir = tempfile::tempdir().expect("a folder for the process");
        let log_path = dir.path().join("keel.log");
        let log = File::create(&log_path).expect("the log file");
        let out = log.try_clone().expect("the log file, twice");
        let child = Command::new(&self.exe)
            .args(&self.args)
            .current_dir(dir.path())
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.exe.display()));
        Running {
            child,
            name: self.name,
            log: log_path,
            port: None,
            exited: None,
            _dir: dir,
        }
    }

    /// Runs the command to its end (bounded), returning whether it succeeded and its output.
    pub async fn run(self) -> (bool, String) {
        let name = self.name.clone();
        let mut process = self.spawn();
        let status = process.wait_exit(START_BOUND).await;
        let output = process.logs();
        assert!(status.is_some(), "{name} did not finish: {output}");
        (status.is_some_and(|s| s.success()), output)
    }
}

/// A started process. Dropping it kills it and everything it started.
pub struct Running {
    child: Child,
    name: String,
    log: PathBuf,
    port: Option<u16>,
    exited: Option<ExitStatus>,
    _dir: tempfile::TempDir,
}

impl Running {
    /// Waits until the server listens and answers `GET /health/live` (bounded); returns self.
    pub async fn ready(mut self) -> Running {
        self.wait_ready().await;
        self
    }

    /// Waits until the server listens and answers `GET /health/live` (bounded).
    pub async fn wait_ready(&mut self) {
        let client = super::client(Duration::from_secs(2));
        let deadline = tokio::time::Instant::now() + START_BOUND;
        loop {
            if let Some(status) = self.try_exit() {
                panic!(
                    "{} exited ({status}) before answering: {}",
                    self.name,
                    self.logs()
                );
            }
            if self.port.is_none() {
                self.port = listening_port(&self.logs());
            }
            if let Some(port) = self.port {
                let live = client
                    .get(format!("http://127.0.0.1:{port}/health/live"))
                    .send()
                    .await;
                if live.is_ok_and(|r| r.status().is_success()) {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} did not answer within {START_BOUND:?}: {}",
                self.name,
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until `needle` appears in the log (bounded).
    pub async fn wait_for_log(&mut self, needle: &str) {
        let deadline = tokio::time::Instant::now() + START_BOUND;
        while !self.logs().contains(needle) {
            if let Some(status) = self.try_exit() {
                panic!(
                    "{} exited ({status}) before logging {needle:?}: {}",
                    self.name,
                    self.logs()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} did not log {needle:?}: {}",
                self.name,
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The port the server listens on (after [`Self::ready`]).
    pub fn port(&self) -> u16 {
        self.port
            .unwrap_or_else(|| panic!("{} has not reported its port", self.name))
    }

    /// The absolute URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the process wrote to stdout and stderr so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Log lines that report a panic or a 500 answer: what no fault may cause.
    pub fn failures_in_log(&self) -> Vec<String> {
        self.logs()
            .lines()
            .filter(|l| l.contains("panicked") || l.contains("\"status\":500"))
            .map(str::to_owned)
            .collect()
    }

    /// Sends SIGTERM (to the process only; a supervisor forwards it).
    pub fn sigterm(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// Sends `signal` to the process only.
    pub fn signal(&self, signal: Signal) {
        if self.exited.is_none() {
            let _ = kill(pid(self.child.id()), signal);
        }
    }

    /// The exit status, if the process has ended.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Waits for the process to end, for at most `bound`; `None` when it is still running.
    pub async fn wait_exit(&mut self, bound: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The whole group: a `keel worker` supervisor's children too.
        let _ = killpg(pid(self.child.id()), Signal::SIGKILL);
        let _ = self.child.wait();
        if std::thread::panicking() {
            let logs = self.logs();
            let tail: Vec<&str> = logs.lines().rev().take(80).collect();
            eprintln!("--- last lines of {} ---", self.name);
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

fn pid(id: u32) -> Pid {
    Pid::from_raw(i32::try_from(id).unwrap_or(i32::MAX))
}

/// The port of the `Keel listening on http://host:PORT` line.
fn listening_port(logs: &str) -> Option<u16> {
    let rest = logs.split("Keel listening on http://").nth(1)?;
    let after_host = rest.split_once(':')?.1;
    let digits: String = after_host
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_port_is_read_from_the_log() {
        let line =
            r#"{"fields":{"message":"Keel listening on http://127.0.0.1:41234 (modules: auth)"}}"#;
        assert_eq!(super::listening_port(line), Some(41234));
        assert_eq!(super::listening_port("starting"), None);
    }
}
