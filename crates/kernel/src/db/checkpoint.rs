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
//! Between its checkpoints the checkpointer also keeps a read transaction open ([`HeldRead`]),
//! for the lock that comes with it. A read transaction takes a shared lock on one of the WAL
//! index's read marks, the mark of the snapshot it reads; while every frame of the WAL is in the
//! database file, that is mark 0 ("read the file alone") for every reader. SQLite asks the kernel
//! for the lock (an `fcntl` on the `-shm` file, and another to let it go) only when no other
//! connection of the process holds it, and it does so under a mutex that all of them share. So
//! each read of the pool paid two system calls, and the HTTP workers' reads waited for each
//! other's on that mutex; while the checkpointer holds mark 0, a read of a checkpointed database
//! only counts itself in and out (a page of payment transactions with the read cache off: about
//! 13 % more requests a second, docs/performance.md). Reads of a WAL with frames yet to copy take
//! a later mark, as before. The transaction is begun right after the checkpoint that reached the
//! WAL's end, while the checkpointer holds the turn to write, so it reads the file alone and
//! keeps no frame of the WAL in use: the next write still starts the WAL over. A checkpoint
//! cannot copy frames while a reader holds mark 0, so the checkpointer ends the transaction
//! before each one: it lives for at most [`PAUSE`] and [`IDLE`] (about a second). Had another
//! process written in between, the transaction takes a later mark and keeps that process's
//! frames in the WAL until the next checkpoint, no longer.
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
    let mut held = HeldRead::default();
    loop {
        // Woken by a write, or a second without one; `None`: the pool is gone.
        if let Ok(None) = tokio::time::timeout(IDLE, woken.recv()).await {
            held.end().await;
            return;
        }
        // The bulk beside the pool's writes, then what they added meanwhile, holding the turn.
        held.end().await;
        checkpoint(&path).await;
        let Ok(turn) = writer.clone().acquire_owned().await else {
            return;
        };
        checkpoint(&path).await;
        held.begin(&path).await;
        drop(turn);
        tokio::time::sleep(PAUSE).await;
    }
}

/// The read transaction the checkpointer keeps open between its checkpoints (see the module
/// documentation), on a connection of its own. When one cannot be begun, the reads of the pool
/// take their own locks, as without it; the next checkpoint tries again.
#[derive(Default)]
struct HeldRead(Option<SqliteConn>);

impl HeldRead {
    /// Begins the transaction: a read of the schema, so that it takes its locks now.
    async fn begin(&mut self, path: &str) {
        match opened(path, "BEGIN; SELECT count(*) FROM sqlite_schema;").await {
            Ok(conn) => self.0 = Some(conn),
            Err(error) => tracing::debug!(%error, "no read transaction held between checkpoints"),
        }
    }

    /// Ends the transaction and closes its connection: closing the last connection of the file
    /// checkpoints what is left and removes the WAL, as SQLite does.
    async fn end(&mut self) {
        if let Some(mut conn) = self.0.take() {
            // A read transaction has nothing to keep; closing the connection ends it anyway.
            let _ = conn.batch_execute("COMMIT").await;
        }
    }
}

/// One `PASSIVE` checkpoint, on a connection opened for it. Between checkpoints the
/// checkpointer holds no other connection than [`HeldRead`]'s, which it closes before it
/// ends, so when the pool's connections close the last of them still checkpoints what is left
/// and removes the WAL, as SQLite does. It runs on a unit thread: the statement runs inline,
/// in this poll.
async fn checkpoint(path: &str) {
    if let Err(error) = opened(path, "PRAGMA wal_checkpoint(PASSIVE)").await {
        tracing::warn!(%error, "an SQLite checkpoint failed; the next one tries again");
    }
}

/// A new connection to `path`, once it has run `sql`.
async fn opened(path: &str, sql: &str) -> Result<SqliteConn, String> {
    let mut conn = SqliteConn::open(path).map_err(|e| e.to_string())?;
    conn.batch_execute(sql).await.map_err(|e| e.to_string())?;
    Ok(conn)
}
