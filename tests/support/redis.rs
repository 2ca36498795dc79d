//! A Redis server of the test's own, on a free port, that the test may kill and restart: never the
//! shared one. It writes every change to its append-only file before answering
//! (`appendfsync always`), so what it acknowledged survives a kill.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts `redis-server` on a free port with an empty data folder; `None` when there is no
    /// `redis-server` on the `PATH`.
    pub async fn start() -> Option<RedisServer> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return None;
        }
        let mut server = RedisServer {
            port: 0,
            dir: tempfile::tempdir().expect("a folder for Redis"),
            child: None,
        };
        // A port found free may be taken before Redis binds it: try a few.
        for _ in 0..5 {
            server.port = super::free_port();
            if server.launch().await {
                return Some(server);
            }
        }
        panic!("redis-server did not start");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL: no shutdown save) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data folder.
    pub async fn restart(&mut self) {
        self.kill();
        assert!(self.launch().await, "redis-server did not restart");
    }

    /// Starts redis-server and waits (bounded) until it answers PING; false when it exits first.
    async fn launch(&mut self) -> bool {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("redis.log"))
            .expect("the Redis log");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "yes"])
            .args(["--appendfsync", "always"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the Redis log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        for _ in 0..200 {
            if self.ping().await {
                return true;
            }
            if let Some(child) = self.child.as_mut()
                && child.try_wait().ok().flatten().is_some()
            {
                self.child = None;
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }

    /// Whether the server answers PING.
    pub async fn ping(&self) -> bool {
        let answer = async {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
            stream.write_all(b"PING\r\n").await?;
            let mut buf = [0u8; 64];
            let n = stream.read(&mut buf).await?;
            Ok::<_, std::io::Error>(buf[..n].starts_with(b"+PONG"))
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(1), answer).await,
            Ok(Ok(true))
        )
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
