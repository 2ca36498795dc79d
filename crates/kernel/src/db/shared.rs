//! PostgreSQL connections shared by concurrent requests, their statements pipelined.
//!
//! tokio-postgres sends the statements of all the callers of one connection in the order they
//! came and reads their answers back in that order, and diesel-async's futures need only a
//! shared borrow of the connection, so requests running at once can all have a statement in
//! flight on one connection. Under load the connection's task then writes the statements waiting
//! for it in one system call and reads their answers in one, and PostgreSQL reads them in one:
//! fewer wake-ups of the requests' thread, of the connection's task and of the server's process
//! than a connection checked out per request, which pays each statement a full round of them.
//!
//! A statement on a shared connection waits behind those sent before it, and whatever one caller
//! does to the session every other caller sees. So only reads outside a transaction run here
//! ([`DbPool::read`](super::DbPool::read), [`read_snapshot!`](crate::read_snapshot)), which
//! PostgreSQL never makes wait for a row lock; a write (which may wait for one, holding up every
//! statement queued behind it), a transaction, or anything that changes the session checks a
//! connection out of the pool ([`DbPool::get`](super::DbPool::get),
//! [`write_tx!`](crate::write_tx)). The shared connections are read-only sessions
//! (`default_transaction_read_only`), so a write sent to one by mistake fails in the tests.
//!
//! Each part of the pool (one per core) keeps one shared connection, opened by the first worker
//! thread of that part that asks, so that its task runs where its statements come from (other
//! threads, such as start-up's, share one more, apart). A connection the server closed is seen
//! closed by its task; the next caller opens a new one, and the statements in flight on the old
//! one fail as a lost connection (503, like a pooled one).

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};

use super::DbError;

/// One connection shared by the requests of a part of the pool.
pub struct SharedPg {
    conn: AsyncPgConnection,
    /// Set by the connection's task when it ends (the socket closed or failed).
    closed: Arc<AtomicBool>,
}

impl SharedPg {
    async fn open(url: &str) -> Result<Self, DbError> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| DbError::Connect(e.to_string()))?;
        let closed = Arc::new(AtomicBool::new(false));
        let ended = ClosedOnDrop(Arc::clone(&closed));
        tokio::spawn(async move {
            // Also when the task is dropped unfinished, with the runtime that ran it.
            let _ended = ended;
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "a shared PostgreSQL connection failed");
            }
        });
        let mut conn = AsyncPgConnection::try_from(client)
            .await
            .map_err(|e| DbError::Connect(e.to_string()))?;
        // Reads only: a write sent here by mistake fails at once (SQLSTATE 25006) instead of
        // holding up every read queued behind it while it waits for a row lock.
        conn.batch_execute("SET default_transaction_read_only = on")
            .await
            .map_err(|e| DbError::Connect(e.to_string()))?;
        super::postgres::prefer_generic_plans(&mut conn).await;
        Ok(SharedPg { conn, closed })
    }

    fn is_open(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
    }
}

/// Marks a connection closed when its task ends or is dropped.
struct ClosedOnDrop(Arc<AtomicBool>);

impl Drop for ClosedOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Deref for SharedPg {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        &self.conn
    }
}

/// The shared connection of one part of the pool, opened when first asked for and again after
/// it closed.
#[derive(Default)]
pub(super) struct Slot {
    current: Mutex<Option<Arc<SharedPg>>>,
    /// Held while a connection opens, so that callers arriving meanwhile wait for it instead of
    /// each opening one.
    opening: tokio::sync::Mutex<()>,
}

impl Slot {
    fn open_one(&self) -> Option<Arc<SharedPg>> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().filter(|c| c.is_open()).cloned()
    }

    /// The slot's connection, opened (within `timeout`) if it has none open.
    pub(super) async fn get(&self, url: &str, timeout: Duration) -> Result<Arc<SharedPg>, DbError> {
        if let Some(conn) = self.open_one() {
            return Ok(conn);
        }
        let _opening = self.opening.lock().await;
        if let Some(conn) = self.open_one() {
            return Ok(conn);
        }
        let conn = tokio::time::timeout(timeout, SharedPg::open(url))
            .await
            .map_err(|_| DbError::Connect(format!("timeout waiting for server ({timeout:?})")))??;
        let conn = Arc::new(conn);
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&conn));
        Ok(conn)
    }
}
