//! Group commit: writes handed in one at a time by many tasks, made a batch at a time. Under load
//! most of a small write's cost is its commit (on SQLite a WAL append and now and then a
//! checkpoint; on PostgreSQL a WAL flush, which waits for the disk), so the items go to one
//! task, which hands whatever has queued meanwhile to the module's `write` (typically one
//! transaction for the batch), and each caller gets its own item's outcome once that batch is
//! done. Alone, an item is written at once.
//!
//! Nothing here is specific to a database: any work whose cost is mostly per call rather than
//! per item batches the same way (comms hands it the emails sent at the same time, which go in
//! one provider call).
//!
//! Up to `writers` batches run at a time: on PostgreSQL a batch's statements are round trips
//! made one after another, and a few batches in flight keep both the database and the disk busy;
//! SQLite writes one transaction at a time, so more than one would only wait for its lock.
//!
//! The batches run as units of work, not as part of their callers: a caller dropped at any
//! `.await` does not take its item back, and a batch is never cut off between two statements.
//! What a batch does when one item fails is the module's choice (see its `write`): each item's
//! outcome is its own.
//!
//! A batch runs on one runtime with the task that gathers it, and the owner chooses where:
//!
//! - [`GroupCommit::new`]: one queue for the process, on the unit runtime on SQLite (whose
//!   statements block their thread), else on its first caller's runtime. The largest batches:
//!   for writes whose cost is mostly their commit.
//! - [`GroupCommit::beside_callers`]: a queue per caller's runtime, its batches there. A process
//!   serves HTTP on several single-threaded runtimes (one per worker), so an item, its batch and
//!   its outcome stay on one thread. Handed to another thread, an item cost two wake-ups of a
//!   sleeping thread (its hand-over and its outcome), each a system call and a trip through that
//!   thread's event loop.
//!
//! The `writers` limit holds for all queues together.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Semaphore, mpsc, oneshot};

/// A module's batch writer: the items in the order they queued, to their outcomes in that order.
type Write<T, R> = dyn Fn(Vec<T>) -> Pin<Box<dyn Future<Output = Vec<R>> + Send>> + Send + Sync;

/// An item and where its outcome goes.
type Pending<T, R> = (T, oneshot::Sender<R>);

/// Where a group commit's items queue and its batches run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// One queue for the process, its batches units of work ([`spawn_unit`](super::spawn_unit)):
    /// on the unit runtime once the process has one, else on the first caller's runtime.
    Together,
    /// One queue per caller's runtime, its batches there: short work on a hot path.
    Callers,
}

/// A queue's batch task, on the runtime it serves.
type Queue<T, R> = (
    Option<tokio::runtime::Id>,
    mpsc::UnboundedSender<Pending<T, R>>,
);

pub struct GroupCommit<T, R> {
    /// One batch task per runtime the batches run on, started on its first item (and again if
    /// its runtime ended). Unbounded: each caller waits for its item, so no more items queue
    /// than callers run.
    queues: Mutex<Vec<Queue<T, R>>>,
    write: Arc<Write<T, R>>,
    /// The most items one batch takes.
    batch: usize,
    /// Shared by every queue: the most batches written at a time.
    slots: Arc<Semaphore>,
    place: Place,
}

impl<T: Send + 'static, R: Send + 'static> GroupCommit<T, R> {
    /// All callers' items in one queue, the batches units of work: for writes whose cost is
    /// mostly their commit, which the larger batches of one queue share best (payment's
    /// webhook events). `write` must return one outcome per item, in their order; an item
    /// without one (a shorter list, or a `write` that panicked) gets `None` from
    /// [`submit`](Self::submit).
    pub fn new<F, Fut>(batch: usize, writers: usize, write: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        Self::placed(Place::Together, batch, writers, write)
    }

    /// Batches that run on their callers' runtime, those of each runtime apart: for work made on
    /// every request of a hot path, where a hand-off to another thread costs more than a smaller
    /// batch (a provider call, a lookup, comms' message log). On SQLite such a batch runs its
    /// statements on the caller's thread (an HTTP worker), so it must be short: a lookup
    /// through an index, or a write of a few rows, which waits for its turn without blocking
    /// ([`SqlitePool`](super::SqlitePool)). Otherwise as [`new`](Self::new).
    pub fn beside_callers<F, Fut>(batch: usize, writers: usize, write: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        Self::placed(Place::Callers, batch, writers, write)
    }

    fn placed<F, Fut>(place: Place, batch: usize, writers: usize, write: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        GroupCommit {
            queues: Mutex::new(Vec::new()),
            write: Arc::new(move |items| Box::pin(write(items))),
            batch: batch.max(1),
            slots: Arc::new(Semaphore::new(writers.max(1))),
            place,
        }
    }

    /// Writes `item` with the items queued beside it; its outcome once its batch is done, or
    /// `None` when the batch ended without one. Dropping the future does not take the item
    /// back: it is written all the same.
    pub async fn submit(&self, item: T) -> Option<R> {
        let (done, outcome) = oneshot::channel();
        self.enqueue((item, done));
        outcome.await.ok()
    }

    fn enqueue(&self, pending: Pending<T, R>) {
        let here = || {
            let here = tokio::runtime::Handle::current();
            let id = here.id();
            (Some(here), Some(id))
        };
        // Where the queue's task runs (`None`: the caller's runtime), and which queue it is.
        let (home, id) = match self.place {
            Place::Together => (super::unit_runtime(), None),
            Place::Callers => here(),
        };
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let pending = match queues.iter().find(|(queue, _)| *queue == id) {
            Some((_, sender)) => match sender.send(pending) {
                Ok(()) => return,
                // The task ended with the runtime it ran on: start another.
                Err(mpsc::error::SendError(pending)) => pending,
            },
            None => pending,
        };
        // Forget the queues of runtimes that ended (this one's, if it did).
        queues.retain(|(_, sender)| !sender.is_closed());
        let (sender, items) = mpsc::unbounded_channel();
        // Cannot fail: `items` is alive.
        let _ = sender.send(pending);
        let task = run(items, self.write.clone(), self.batch, self.slots.clone());
        // Its batches start where it runs: a batch task is a unit of work too.
        let home = home.unwrap_or_else(tokio::runtime::Handle::current);
        drop(home.spawn(crate::unit::mark(task)));
        queues.push((id, sender));
    }
}

/// Starts batches until every sender is gone (the owner was dropped), each a task of the
/// runtime this runs on.
async fn run<T: Send + 'static, R: Send + 'static>(
    mut queue: mpsc::UnboundedReceiver<Pending<T, R>>,
    write: Arc<Write<T, R>>,
    batch: usize,
    slots: Arc<Semaphore>,
) {
    loop {
        let mut pending = Vec::with_capacity(batch);
        if queue.recv_many(&mut pending, batch).await == 0 {
            return;
        }
        // Never closed, so never an error.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        // Callers that were woken meanwhile queue their items first, and the batch takes what
        // queued while it waited for a slot: it grows instead of an item going alone just
        // behind a large batch.
        tokio::task::yield_now().await;
        while pending.len() < batch {
            match queue.try_recv() {
                Ok(item) => pending.push(item),
                Err(_) => break,
            }
        }
        let write = write.clone();
        drop(tokio::spawn(crate::unit::mark(async move {
            let (items, done): (Vec<T>, Vec<_>) = pending.into_iter().unzip();
            for (done, outcome) in done.into_iter().zip(write(items).await) {
                // The caller may have gone: its item is written all the same.
                let _ = done.send(outcome);
            }
            drop(slot);
        })));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A group commit whose writer records its batches' sizes and the most batches that ran at
    /// once, holds each batch until `gate` lets it go, and answers each item with itself doubled.
    struct Doubler {
        group: Arc<GroupCommit<u32, u32>>,
        gate: Arc<Semaphore>,
        sizes: Arc<Mutex<Vec<usize>>>,
        most: Arc<AtomicUsize>,
    }

    fn doubler(place: Place, batch: usize, writers: usize) -> Doubler {
        let gate = Arc::new(Semaphore::new(0));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (held, recorded, peak) = (gate.clone(), sizes.clone(), most.clone());
        let group = GroupCommit::placed(place, batch, writers, move |items: Vec<u32>| {
            let (gate, sizes) = (held.clone(), recorded.clone());
            let (running, most) = (running.clone(), peak.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                sizes.lock().unwrap().push(items.len());
                gate.acquire().await.unwrap().forget();
                running.fetch_sub(1, Ordering::SeqCst);
                items.into_iter().map(|i| i * 2).collect()
            }
        });
        Doubler {
            group: Arc::new(group),
            gate,
            sizes,
            most,
        }
    }

    impl Doubler {
        /// Waits until the first batch is running.
        fn first_batch_running(&self) {
            while self.sizes.lock().unwrap().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    #[tokio::test]
    async fn items_queued_behind_a_batch_go_together_and_each_gets_its_own_outcome() {
        let Doubler {
            group,
            gate,
            sizes,
            most,
        } = doubler(Place::Together, 64, 2);
        let submit = |i: u32| {
            let group = group.clone();
            tokio::spawn(async move { group.submit(i).await })
        };
        // Two alone fill both writers; the next 100 queue behind them.
        let mut first = Vec::new();
        for i in 0..2 {
            first.push(submit(i));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rest: Vec<_> = (2..102).map(submit).collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        gate.add_permits(1000);
        for (i, call) in first.into_iter().chain(rest).enumerate() {
            assert_eq!(call.await.unwrap(), Some(i as u32 * 2));
        }
        let sizes = sizes.lock().unwrap().clone();
        assert_eq!(sizes[..2], [1, 1], "{sizes:?}");
        assert_eq!(sizes[2..], [64, 36], "{sizes:?}");
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_dropped_caller_leaves_its_item_written() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let group = {
            let written = written.clone();
            GroupCommit::new(8, 1, move |items: Vec<u32>| {
                let written = written.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    written.lock().unwrap().extend(items.iter().copied());
                    items
                }
            })
        };
        // Dropped at its first wait, after the item was handed over.
        assert!(
            tokio::time::timeout(Duration::from_millis(1), group.submit(7))
                .await
                .is_err()
        );
        assert_eq!(group.submit(8).await, Some(8));
        assert_eq!(*written.lock().unwrap(), [7, 8]);
    }

    #[tokio::test]
    async fn a_write_that_panics_answers_none_and_the_next_batch_runs() {
        let group = GroupCommit::new(8, 1, |items: Vec<u32>| async move {
            assert!(!items.contains(&13), "unlucky");
            items
        });
        assert_eq!(group.submit(13).await, None);
        assert_eq!(group.submit(14).await, Some(14));
    }

    #[test]
    fn a_runtime_that_ended_gets_a_new_task() {
        let group = GroupCommit::new(8, 1, |items: Vec<u32>| async move { items });
        for i in 0..2 {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            assert_eq!(runtime.block_on(group.submit(i)), Some(i));
        }
    }

    /// Runs `work` on a single-threaded runtime of a thread of its own, as an HTTP worker does.
    fn on_a_worker<T: Send + 'static>(
        work: impl Future<Output = T> + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(work)
        })
    }

    #[test]
    fn batches_beside_their_callers_run_on_each_callers_thread() {
        // Each item comes back with the thread its batch ran on.
        let group = Arc::new(GroupCommit::beside_callers(
            8,
            2,
            |items: Vec<u32>| async move {
                tokio::task::yield_now().await;
                let here = std::thread::current().id();
                items.into_iter().map(|i| (i, here)).collect::<Vec<_>>()
            },
        ));
        let workers: Vec<_> = (0..2)
            .map(|worker| {
                let group = group.clone();
                on_a_worker(async move {
                    let sends = (0..20).map(|i| group.submit(worker * 100 + i));
                    let outcomes = futures_util::future::join_all(sends).await;
                    (std::thread::current().id(), outcomes)
                })
            })
            .collect();
        for (worker, thread) in workers.into_iter().enumerate() {
            let (caller, outcomes) = thread.join().unwrap();
            for (i, outcome) in outcomes.into_iter().enumerate() {
                assert_eq!(outcome, Some((worker as u32 * 100 + i as u32, caller)));
            }
        }
    }

    #[test]
    fn the_writers_limit_holds_for_all_runtimes_together() {
        let doubler = doubler(Place::Callers, 8, 1);
        let workers: Vec<_> = (0..3u32)
            .map(|worker| {
                let group = doubler.group.clone();
                on_a_worker(async move { group.submit(worker).await })
            })
            .collect();
        // Every worker's item queued, one batch running, the others waiting for its slot.
        doubler.first_batch_running();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(doubler.sizes.lock().unwrap().len(), 1);
        doubler.gate.add_permits(3);
        for (worker, thread) in workers.into_iter().enumerate() {
            assert_eq!(thread.join().unwrap(), Some(worker as u32 * 2));
        }
        assert_eq!(doubler.most.load(Ordering::SeqCst), 1);
        assert_eq!(*doubler.sizes.lock().unwrap(), [1, 1, 1]);
    }

    #[test]
    fn items_of_every_runtime_share_one_queue_with_new() {
        let doubler = doubler(Place::Together, 8, 1);
        let submit = |item: u32| {
            let group = doubler.group.clone();
            on_a_worker(async move { group.submit(item).await })
        };
        // The first item's batch is held; the next two, from two other threads, queue behind it.
        // The first comes from a runtime that outlives the test: the queue's task runs there.
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let first = {
            let group = doubler.group.clone();
            runtime.spawn(async move { group.submit(0).await })
        };
        doubler.first_batch_running();
        let rest = [submit(1), submit(2)];
        std::thread::sleep(Duration::from_millis(50));
        doubler.gate.add_permits(2);
        assert_eq!(runtime.block_on(first).unwrap(), Some(0));
        for (i, thread) in rest.into_iter().enumerate() {
            assert_eq!(thread.join().unwrap(), Some(i as u32 * 2 + 2));
        }
        assert_eq!(*doubler.sizes.lock().unwrap(), [1, 2]);
    }
}
