//! An SQLite pool's checkpoints (the WAL copied back into the database file) on a database
//! thread, instead of on the thread of whichever write filled the WAL.
//!
//! By default SQLite checkpoints inside the commit that takes the WAL past 1,000 pages: the
//! committing thread reads those pages back, writes them into the file and waits for two
//! `fsync`s. In keel that thread is often an HTTP worker (a log batch of email sends commits
//! there), which meanwhile serves none of its connections: with email sends at full load the
//! machine sat idle a sixth of the time, its workers waiting on the disk (docs/performance.md).
//! So the pool's connections leave checkpoints to the pool (`wal_autocheckpoint=0`), and the
//! pool's checkpointer, a task of the unit runtime ([`spawn_unit`](super::spawn_unit)), makes
//! them:
//!
//! - after the pool's writes: each write transaction's turn ([`SqlitePool::write_turn`])
//!   wakes it, and it checkpoints at most every [`PAUSE`], so that a checkpoint copies what the
//!   writes of that time added (under the email-send bench a few thousand pages, where SQLite
//!   checkpoints every 1,000);
//! - and at least every [`IDLE`] while the pool lives, for writes that take no turn (single
//!   statements run on their own, other processes).
//!
//! A checkpoint runs twice: once beside the pool's writes, copying the bulk, then holding the
//! pool's turn to write, as the commit that ran it did, copying what those writes added
//! meanwhile. No write of the pool lands during the second, so it reaches the WAL's end, and
//! the next write starts the WAL over from its beginning. Without the turn, writes landing
//! during every checkpoint would keep the WAL from ever starting over, and it would grow for as
//! long as they came. The writes that wait for the turn wait without blocking a thread.
//!
//! The checkpoint is SQLite's `PASSIVE` one: it takes no lock that a reader or a writer of
//! another process would wait for, and it never waits itself. Durability is unchanged: with
//! `synchronous=NORMAL` a commit is durable once a later checkpoint syncs it, whichever thread
//! runs it. When the pool is dropped, the checkpointer ends (within [`PAUSE`]).
//!
//! [`SqlitePool::write_turn`]: super::SqlitePool::write_turn

use std::sync::Arc;
use std::time::Duration;

use diesel_async::SimpleAsyncConnection;
use tokio::sync::{Semaphore, mpsc};

use super::SqliteConn;

/// The shortest time between two checkpoints.
const PAUSE: Duration = Duration::from_millis(100);

/// The longest time between two checkpoints while the pool lives.
const IDLE: Duration = Duration::from_secs(1);

/// What the pool's connections run once opened, after the common pragmas.
pub(super) const POOLED_PRAGMAS: &str = "PRAGMA wal_autocheckpoint=0;";

/// The pool's handle on its checkpointer: [`wrote`](Self::wrote) wakes it; dropping the last
/// clone ends it.
#[derive(Clone)]
pub(super) struct Checkpoints {
    wake: mpsc::Sender<()>,
}

impl Checkpoints {
    /// Starts the checkpointer of the database at `path` on `runtime`; it takes `writer`, the
    /// pool's turn to write, for each checkpoint.
    pub(super) fn start(
        runtime: &tokio::runtime::Handle,
        path: String,
        writer: Arc<Semaphore>,
    ) -> Self {
        // One wake-up held: the writes made while one waits ask for the same checkpoint.
        let (wake, woken) = mpsc::channel(1);
        runtime.spawn(run(path, writer, woken));
        Checkpoints { wake }
    }

    /// A write is under way: the checkpointer runs once it is done (and [`PAUSE`] has passed).
    pub(super) fn wrote(&self) {
        let _ = self.wake.try_send(());
    }
}

async fn run(path: String, writer: Arc<Semaphore>, mut woken: mpsc::Receiver<()>) {
    loop {
        // Woken by a write, or a second without one; `None`: the pool is gone.
        if let Ok(None) = tokio::time::timeout(IDLE, woken.recv()).await {
            return;
        }
        // The bulk beside the pool's writes, then what they added meanwhile, holding the turn.
        checkpoint(&path).await;
        let Ok(turn) = writer.clone().acquire_owned().await else {
            return;
        };
        checkpoint(&path).await;
        drop(turn);
        tokio::time::sleep(PAUSE).await;
    }
}

/// One `PASSIVE` checkpoint, on a connection opened for it. Between checkpoints the
/// checkpointer holds no connection, so when the pool's connections close the last of them
/// still checkpoints what is left and removes the WAL, as SQLite does. It runs on a unit
/// thread: the statement runs inline, in this poll.
async fn checkpoint(path: &str) {
    let failed = match SqliteConn::open(path) {
        Ok(mut conn) => conn
            .batch_execute("PRAGMA wal_checkpoint(PASSIVE)")
            .await
            .err()
            .map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    };
    if let Some(error) = failed {
        tracing::warn!(%error, "an SQLite checkpoint failed; the next one tries again");
    }
}
