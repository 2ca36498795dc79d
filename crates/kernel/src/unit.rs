//! Units of work at the service boundary: [`Detached`] wraps a module's service once, when the
//! module is built, so that every call made through it is a unit of work (see
//! [`crate::db::spawn_unit`]) and no handler has to remember to start one.
//!
//! Why: any future can be dropped at any `.await` (the client went away, a timeout fired, a
//! sibling extractor failed), and a request's future dropped in the middle of a service call
//! would cut its work in half: a transaction between two statements, a provider called but its
//! answer not recorded. A unit is not tied to its caller: dropped callers leave it to complete,
//! or roll back, where it runs.
//!
//! A module implements its service trait for `Detached<dyn ItsService>`, forwarding each method
//! through [`Detached::run`] with owned arguments, and hands that wrapper (as its
//! `Arc<dyn ItsService>`) to its handlers, its CLI and the capabilities it lends. Since the
//! wrapper implements the trait itself, a trait method added without forwarding it does not
//! compile.
//!
//! A call made from inside a unit (a service method calling another service, a read-cache
//! loader already running as a unit, an authenticator looked up by the identity extractor) runs
//! inline: there is one hand-off per unit, never two.

use std::future::Future;
use std::sync::Arc;

use crate::db::{DbError, spawn_unit};

tokio::task_local! {
    /// Set for the whole of a unit of work's future (by [`spawn_unit`]).
    static IN_UNIT: ();
}

/// `work`, marked as a unit of work for as long as it runs (see [`in_unit`]).
pub(crate) fn mark<F: Future>(work: F) -> impl Future<Output = F::Output> {
    IN_UNIT.scope((), work)
}

/// Whether the current task is a unit of work started by [`spawn_unit`].
pub fn in_unit() -> bool {
    IN_UNIT.try_with(|_| ()).is_ok()
}

/// Runs `work` as a unit of work and waits for it: inline when the caller already is one, else
/// started with [`spawn_unit`]. A unit that fails (it panicked, or its runtime shut down) is
/// [`DbError::Unit`], a 500, converted into the caller's error type.
pub async fn run<T, E, Fut>(work: Fut) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: From<DbError> + Send + 'static,
{
    if in_unit() {
        return work.await;
    }
    joined(spawn_unit(work)).await
}

/// Runs `work` as a unit of work started on the caller's own runtime rather than the unit
/// runtime (see [`Detached::run_here`]): inline when the caller already is one.
pub async fn run_here<T, E, Fut>(work: Fut) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: From<DbError> + Send + 'static,
{
    if in_unit() {
        return work.await;
    }
    joined(tokio::spawn(mark(work))).await
}

/// The outcome of a unit: a unit that failed (it panicked, or its runtime shut down) is
/// [`DbError::Unit`].
async fn joined<T, E: From<DbError>>(unit: tokio::task::JoinHandle<Result<T, E>>) -> Result<T, E> {
    match unit.await {
        Ok(result) => result,
        Err(e) => Err(E::from(DbError::Unit(e.to_string()))),
    }
}

/// A service whose every call runs as a unit of work (see the module documentation).
pub struct Detached<S: ?Sized>(Arc<S>);

impl<S: ?Sized> Detached<S> {
    /// Wraps `inner`, the service that does the work.
    pub fn new(inner: Arc<S>) -> Self {
        Detached(inner)
    }

    /// The wrapped service, for what needs no unit: methods that do no I/O (a setting, a lookup
    /// in memory).
    pub fn inner(&self) -> &S {
        &self.0
    }

    /// Runs `work` on the wrapped service as a unit of work (see [`run`]): inline when the caller
    /// already runs in one. Move owned copies of borrowed arguments into `work`.
    pub async fn run<T, E, F, Fut>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(Arc<S>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        run(work(self.0.clone())).await
    }

    /// Runs `work` on the wrapped service as a unit of work, like [`run`](Self::run), but started
    /// on the caller's own runtime: not tied to its caller either, and not handed to a database
    /// thread and back. Only for a call that runs no SQLite statement itself: one whose database
    /// work all goes through [`GroupCommit`](crate::db::GroupCommit)s (each batch a unit of its
    /// own on the unit runtime) and which otherwise awaits the network. A comms email send is
    /// such a call: its suppression check, its provider call and its log row each go with those
    /// of the sends made at the same time, and the hand-off cost it about a tenth of its rate on
    /// SQLite (docs/performance.md).
    pub async fn run_here<T, E, F, Fut>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(Arc<S>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        run_here(work(self.0.clone())).await
    }

    /// Runs `work` on the wrapped service on the caller's own task, *not* as a unit of work: for
    /// a read of small, bounded cost (a page found through an index, a row by its key) and
    /// nothing else. A read leaves nothing half-done when its caller is dropped (a read snapshot
    /// dropped between two statements is rolled back as its connection returns to the pool),
    /// and handing it to a thread kept for database work and back cost more than the read: the
    /// SQLite page of transactions answered about 15 % more requests a second read here
    /// (docs/performance.md). On SQLite its statements then run inline on the caller's thread,
    /// an HTTP worker, which serves nothing else meanwhile: never use it for a scan, an export,
    /// or a deep `OFFSET` (whose statement walks every row before the page).
    pub async fn read<T, E, F, Fut>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(Arc<S>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        work(self.0.clone()).await
    }

    /// [`read`](Self::read) when `bounded` (the caller checked that this call's read is of
    /// small cost, such as a page ending near the start of its index), else [`run`](Self::run).
    pub async fn read_when<T, E, F, Fut>(&self, bounded: bool, work: F) -> Result<T, E>
    where
        F: FnOnce(Arc<S>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        if bounded {
            self.read(work).await
        } else {
            self.run(work).await
        }
    }
}

impl<S: ?Sized> Clone for Detached<S> {
    fn clone(&self) -> Self {
        Detached(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Notify;

    use super::*;

    /// A service whose one write waits for a go-ahead after its first await.
    #[derive(Default)]
    struct Counter {
        go: Notify,
        writes: AtomicUsize,
    }

    impl Counter {
        async fn write(&self) -> Result<Option<tokio::task::Id>, DbError> {
            self.go.notified().await;
            self.writes.fetch_add(1, Ordering::SeqCst);
            Ok(tokio::task::try_id())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_from_outside_survives_its_caller() {
        let counter = Arc::new(Counter::default());
        let service = Detached::new(counter.clone());
        survives_giving_up(&counter, service.run(|s| async move { s.write().await })).await;
        // Without the unit, the dropped call never writes.
        let inline = counter.write();
        let gave_up = tokio::time::timeout(Duration::from_millis(50), inline).await;
        assert!(gave_up.is_err());
        counter.go.notify_one();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(counter.writes.load(Ordering::SeqCst), 1);
    }

    /// `run` hands a call to the unit runtime's threads once it exists (the first SQLite pool
    /// starts it); `run_here` keeps it on the caller's runtime, as a task of its own that
    /// outlives a caller that gave up.
    #[cfg(feature = "sqlite")]
    #[tokio::test(flavor = "current_thread")]
    async fn a_unit_here_runs_on_the_callers_runtime_and_survives_its_caller() {
        assert!(crate::db::start_unit_runtime(1).is_ok());
        let thread = || std::thread::current().name().map(str::to_owned);
        let counter = Arc::new(Counter::default());
        let service = Detached::new(counter.clone());
        let there = service
            .run(|_| async move { Ok::<_, DbError>((thread(), in_unit())) })
            .await;
        assert_eq!(there.ok(), Some((Some("keel-db".to_owned()), true)));
        let caller = tokio::task::try_id();
        let here = service
            .run_here(
                |_| async move { Ok::<_, DbError>((thread(), in_unit(), tokio::task::try_id())) },
            )
            .await;
        let Ok((here_thread, marked, task)) = here else {
            panic!("the call failed");
        };
        assert_eq!((here_thread, marked), (thread(), true));
        assert_ne!(task, caller);
        survives_giving_up(
            &counter,
            service.run_here(|s| async move { s.write().await }),
        )
        .await;
    }

    /// `call`, a write of `counter` made as a unit, dropped by its caller after its first await
    /// (the unit is under way, waiting for its go-ahead), writes all the same once let go.
    async fn survives_giving_up<F: Future>(counter: &Counter, call: F) {
        let gave_up = tokio::time::timeout(Duration::from_millis(50), call).await;
        assert!(gave_up.is_err(), "the call did not wait for its go-ahead");
        counter.go.notify_one();
        for _ in 0..200 {
            if counter.writes.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(counter.writes.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_read_runs_on_the_callers_task() {
        let service = Detached::new(Arc::new(Counter::default()));
        let ran = service
            .read(|_| async { Ok::<_, DbError>((tokio::task::try_id(), in_unit())) })
            .await;
        assert_eq!(ran.ok(), Some((tokio::task::try_id(), false)));
        // `read_when` reads there only when told the read is bounded, else it starts a unit.
        for bounded in [true, false] {
            let ran = service
                .read_when(bounded, |_| async { Ok::<_, DbError>(in_unit()) })
                .await;
            assert_eq!(ran.ok(), Some(!bounded));
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_from_outside_runs_on_a_task_of_its_own() {
        let counter = Arc::new(Counter::default());
        counter.go.notify_one();
        let service = Detached::new(counter.clone());
        let caller = tokio::task::try_id();
        assert!(!in_unit());
        let ran_on = service.run(|s| async move { s.write().await }).await;
        let ran_on = ran_on.ok().flatten();
        assert!(ran_on.is_some());
        assert_ne!(ran_on, caller);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_from_inside_a_unit_does_not_spawn_again() {
        let counter = Arc::new(Counter::default());
        counter.go.notify_one();
        counter.go.notify_one();
        let service = Detached::new(counter.clone());
        let unit = spawn_unit(async move {
            let unit = tokio::task::try_id();
            let first = service.run(|s| async move { s.write().await }).await;
            // A nested call through `run` as well: still the same task.
            let nested = run(async move { Ok::<_, DbError>(tokio::task::try_id()) }).await;
            (in_unit(), unit, first.ok().flatten(), nested.ok().flatten())
        });
        let Ok((marked, unit, first, nested)) = unit.await else {
            panic!("the unit failed");
        };
        assert!(marked);
        assert!(unit.is_some());
        assert_eq!(first, unit);
        assert_eq!(nested, unit);
        assert_eq!(counter.writes.load(Ordering::SeqCst), 1);
    }

    /// The blog's cached public reads: the loader is one unit, and the service call it makes
    /// runs inline in it (no second hand-off on the hot path).
    #[tokio::test(flavor = "current_thread")]
    async fn a_read_cache_loader_is_one_unit_with_its_calls_inline() -> Result<(), DbError> {
        type Ids = (Option<tokio::task::Id>, Option<tokio::task::Id>);
        for enabled in [true, false] {
            let cache: crate::cache::ReadCache<&str, Ids> =
                crate::cache::ReadCache::new(enabled, 4);
            let counter = Arc::new(Counter::default());
            counter.go.notify_one();
            let service = Detached::new(counter.clone());
            let (loader, inner) = cache
                .get_or_load_unit("page", async move {
                    let loader = tokio::task::try_id();
                    let inner = service.run(|s| async move { s.write().await }).await?;
                    Ok::<_, DbError>((loader, inner))
                })
                .await?;
            assert!(loader.is_some());
            assert_ne!(loader, tokio::task::try_id());
            assert_eq!(inner, loader);
            assert_eq!(counter.writes.load(Ordering::SeqCst), 1);
        }
        Ok(())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_panicking_unit_is_a_unit_error() {
        let service = Detached::new(Arc::new(()));
        let failed: Result<(), DbError> = service
            .run(|_| async move {
                if in_unit() {
                    panic!("a bug in the service");
                }
                Ok(())
            })
            .await;
        match failed {
            Err(e @ DbError::Unit(_)) => {
                assert!(!e.is_connection_lost());
                let answer = crate::ApiError::from(e);
                assert_eq!(
                    answer.status(),
                    actix_web::http::StatusCode::INTERNAL_SERVER_ERROR
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
