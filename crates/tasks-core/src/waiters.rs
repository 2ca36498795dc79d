//! Requests waiting for a job to end (`GET /result/{id}?wait=`), woken by the backend's
//! announcements ([`TaskBackend::finished`]) instead of polling.
//!
//! One listener per process reads the announcements and wakes the waiters of each job. It starts
//! with the first waiter, and again whenever it stops (its Redis connection was lost, or the
//! runtime it ran on ended); while it was away announcements may have been missed, so every
//! waiter looks at its job again when it starts and when it is told it fell behind. A waiter
//! leaves the registry when its request ends, however it ends (answered, timed out, or dropped
//! because the client went away).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::backend::{Finished, TaskBackend};

/// How long the listener waits before listening again after its connection failed.
const RELISTEN_DELAY: Duration = Duration::from_millis(500);

/// The jobs being waited for, each with its count of waiters and the [`Notify`] they share.
#[derive(Default)]
pub(crate) struct Waiters {
    jobs: Mutex<HashMap<String, (usize, Arc<Notify>)>>,
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl Waiters {
    fn jobs(&self) -> MutexGuard<'_, HashMap<String, (usize, Arc<Notify>)>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a waiter for `task_id` (and makes sure the listener runs); the waiter leaves
    /// when the returned guard is dropped.
    pub(crate) fn wait_for(
        self: &Arc<Self>,
        backend: &Arc<dyn TaskBackend>,
        task_id: &str,
    ) -> Waiter {
        self.listen(backend);
        let notify = {
            let mut jobs = self.jobs();
            let entry = jobs
                .entry(task_id.to_owned())
                .or_insert_with(|| (0, Arc::new(Notify::new())));
            entry.0 += 1;
            entry.1.clone()
        };
        Waiter {
            waiters: self.clone(),
            task_id: task_id.to_owned(),
            notify,
        }
    }

    /// How many requests wait now.
    pub(crate) fn count(&self) -> usize {
        self.jobs().values().map(|(n, _)| n).sum()
    }

    /// Wakes the waiters of `task_id`.
    fn wake(&self, task_id: &str) {
        if let Some((_, notify)) = self.jobs().get(task_id) {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter, to look again (announcements may have been missed).
    fn wake_all(&self) {
        for (_, notify) in self.jobs().values() {
            notify.notify_waiters();
        }
    }

    /// Starts the listener unless it runs.
    fn listen(self: &Arc<Self>, backend: &Arc<dyn TaskBackend>) {
        let mut listener = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
        if listener.as_ref().is_some_and(|l| !l.is_finished()) {
            return;
        }
        // The listener holds the registry weakly: it ends with the module.
        let waiters = Arc::downgrade(self);
        let backend = backend.clone();
        *listener = Some(tokio::spawn(async move {
            loop {
                match backend.finished().await {
                    Ok(mut announced) => {
                        // Whatever ended before the listener was there.
                        match waiters.upgrade() {
                            Some(w) => w.wake_all(),
                            None => return,
                        }
                        while let Some(event) = announced.next().await {
                            let Some(w) = waiters.upgrade() else { return };
                            match event {
                                Finished::Job(id) => w.wake(&id),
                                Finished::Missed => w.wake_all(),
                            }
                        }
                        tracing::debug!("the task result listener lost its connection");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for finished tasks; waiting requests answer at their deadline");
                    }
                }
                if waiters.upgrade().is_none() {
                    return;
                }
                tokio::time::sleep(RELISTEN_DELAY).await;
            }
        }));
    }
}

impl Drop for Waiters {
    fn drop(&mut self) {
        if let Some(listener) = self
            .listener
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            listener.abort();
        }
    }
}

/// One waiting request; leaves the registry when dropped.
pub(crate) struct Waiter {
    waiters: Arc<Waiters>,
    task_id: String,
    notify: Arc<Notify>,
}

impl Waiter {
    /// The notification this waiter is woken by.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut jobs = self.waiters.jobs();
        if let Some(entry) = jobs.get_mut(&self.task_id) {
            entry.0 -= 1;
            if entry.0 == 0 {
                jobs.remove(&self.task_id);
            }
        }
    }
}
