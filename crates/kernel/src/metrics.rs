//! Metrics: their names and the small functions modules record them with.
//!
//! Recording goes through the `metrics` facade. The server installs a Prometheus recorder when
//! `METRICS_ENABLED` is true and serves it at `GET /metrics`; without a recorder every call here is
//! a no-op. Gauges that are read rather than counted (pool connections, queue depths) are set just
//! before each scrape: the server samples the pool ([`sample_db_pool`]) and asks every module
//! ([`crate::Module::sample_metrics`]).
//!
//! Without the kernel's `metrics` feature the same functions exist and record nothing, so that
//! modules call them unconditionally.
//!
//! The list of metrics, with their labels, is in docs/configuration.md ("Metrics"); keep both in
//! step.

use std::time::Duration;

use crate::DbPool;

/// Its statements when the kernel records metrics (the `metrics` feature), nothing otherwise.
macro_rules! record {
    ($($t:tt)*) => {
        #[cfg(feature = "metrics")]
        {
            $($t)*
        }
    };
}

/// Counter: answered HTTP requests, by `route` (template), `method` and `status`.
pub const HTTP_REQUESTS: &str = "keel_http_requests_total";
/// Histogram: seconds until the answer's head was ready, same labels as [`HTTP_REQUESTS`].
pub const HTTP_REQUEST_DURATION: &str = "keel_http_request_duration_seconds";
/// Gauge: database connections lent out.
pub const DB_POOL_IN_USE: &str = "keel_db_pool_connections_in_use";
/// Gauge: database connections open and idle in the pool.
pub const DB_POOL_IDLE: &str = "keel_db_pool_connections_idle";
/// Gauge: the pool's size limit (`DATABASE_POOL_SIZE`).
pub const DB_POOL_MAX: &str = "keel_db_pool_connections_max";
/// Gauge: callers waiting for a database connection.
pub const DB_POOL_WAITING: &str = "keel_db_pool_waiting";
/// Gauge: jobs in a task queue, by `queue` and `state` (`queued`, `scheduled`, `in_progress`).
pub const TASK_QUEUE_DEPTH: &str = "keel_task_queue_depth";
/// Counter: settled job attempts, by `queue` and `outcome` ([`JobOutcome`]).
pub const TASK_JOBS: &str = "keel_task_jobs_total";
/// Gauge: AI replies being streamed to clients.
pub const AI_OPEN_STREAMS: &str = "keel_ai_open_streams";
/// Counter: calls to outside providers, by `provider` and `outcome` ([`CallOutcome`]).
pub const PROVIDER_CALLS: &str = "keel_provider_calls_total";

/// The `route` label of a request no route matched (so that unknown paths add no series).
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Registers the help text of every metric with the installed recorder.
pub fn describe() {
    record! {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route template, method and status"
    );
    describe_histogram!(
        HTTP_REQUEST_DURATION,
        metrics::Unit::Seconds,
        "Time until the answer's head was ready, by route template, method and status"
    );
    describe_gauge!(DB_POOL_IN_USE, "Database connections lent out");
    describe_gauge!(DB_POOL_IDLE, "Database connections open and idle");
    describe_gauge!(DB_POOL_MAX, "Largest number of database connections");
    describe_gauge!(DB_POOL_WAITING, "Callers waiting for a database connection");
    describe_gauge!(
        TASK_QUEUE_DEPTH,
        "Jobs in a task queue, by queue and state (queued, scheduled, in_progress)"
    );
    describe_counter!(
        TASK_JOBS,
        "Job attempts settled by this process's workers, by queue and outcome"
    );
    describe_gauge!(AI_OPEN_STREAMS, "AI replies being streamed to clients");
    describe_counter!(
        PROVIDER_CALLS,
        "Calls to outside providers (Stripe, Resend, Twilio, AI), by provider and outcome"
    );
    }
}

/// Records one answered request. Every label is static: the caller interns the route template.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn http_request(
    route: &'static str,
    method: &'static str,
    status: &'static str,
    elapsed: Duration,
) {
    record! {
        let labels = [("route", route), ("method", method), ("status", status)];
        metrics::counter!(HTTP_REQUESTS, &labels).increment(1);
        metrics::histogram!(HTTP_REQUEST_DURATION, &labels).record(elapsed.as_secs_f64());
    }
}

/// Sets the pool gauges from the pool's current state.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn sample_db_pool(pool: &DbPool) {
    record! {
        let status = pool.status();
        metrics::gauge!(DB_POOL_IN_USE).set(status.in_use as f64);
        metrics::gauge!(DB_POOL_IDLE).set(status.idle as f64);
        metrics::gauge!(DB_POOL_MAX).set(status.max_size as f64);
        metrics::gauge!(DB_POOL_WAITING).set(status.waiting as f64);
    }
}

/// Sets the depth gauges of one task queue.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn task_queue_depth(queue: &str, queued: u64, scheduled: u64, in_progress: u64) {
    record! {
    for (state, value) in [
        ("queued", queued),
        ("scheduled", scheduled),
        ("in_progress", in_progress),
    ] {
        metrics::gauge!(TASK_QUEUE_DEPTH, "queue" => queue.to_owned(), "state" => state)
            .set(value as f64);
    }
    }
}

/// How a job attempt was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// The task returned a result.
    Succeeded,
    /// The attempt failed and the job runs again later.
    Retried,
    /// The last allowed attempt failed: the job is finished with an error.
    Failed,
}

impl JobOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            JobOutcome::Succeeded => "succeeded",
            JobOutcome::Retried => "retried",
            JobOutcome::Failed => "failed",
        }
    }
}

/// Counts one settled job attempt on `queue`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn task_job(queue: &str, outcome: JobOutcome) {
    record! {
        metrics::counter!(TASK_JOBS, "queue" => queue.to_owned(), "outcome" => outcome.as_str())
            .increment(1);
    }
}

/// One AI reply being streamed: counted in [`AI_OPEN_STREAMS`] from [`OpenStream::start`] until
/// the guard is dropped (the reply ended, failed, or the client went away).
#[must_use = "the stream counts as open until the guard is dropped"]
pub struct OpenStream(());

impl OpenStream {
    pub fn start() -> OpenStream {
        record! { metrics::gauge!(AI_OPEN_STREAMS).increment(1.0); }
        OpenStream(())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        record! { metrics::gauge!(AI_OPEN_STREAMS).decrement(1.0); }
    }
}

/// How a call to an outside provider ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// A success answer the client could read.
    Ok,
    /// The provider answered with an error status (or, in a stream, an error event).
    HttpError,
    /// No answer (or no next chunk) within the time limit.
    Timeout,
    /// The provider's host could not be reached.
    Unreachable,
    /// The connection failed otherwise (reset, TLS, a stream cut short).
    TransportError,
    /// An answer that could not be read.
    InvalidResponse,
    /// Given up by the caller before the end (a client that left a streamed reply).
    Cancelled,
}

impl CallOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::HttpError => "http_error",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Unreachable => "unreachable",
            CallOutcome::TransportError => "transport_error",
            CallOutcome::InvalidResponse => "invalid_response",
            CallOutcome::Cancelled => "cancelled",
        }
    }

    /// The outcome of a call that failed before an answer was read.
    #[cfg(feature = "http-client")]
    pub fn of_transport(error: &reqwest::Error) -> CallOutcome {
        if error.is_timeout() {
            CallOutcome::Timeout
        } else if error.is_connect() {
            CallOutcome::Unreachable
        } else {
            CallOutcome::TransportError
        }
    }
}

/// Counts one call to `provider` (`stripe`, `resend`, `twilio`, or the AI provider's name).
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub fn provider_call(provider: &'static str, outcome: CallOutcome) {
    record! {
        metrics::counter!(PROVIDER_CALLS, "provider" => provider, "outcome" => outcome.as_str())
            .increment(1);
    }
}

/// A call to `provider` whose outcome is counted once: at [`settle`](Self::settle), or as
/// [`CallOutcome::Cancelled`] when the guard is dropped first (a streamed reply the caller gave
/// up on).
#[must_use = "the call counts as cancelled when the guard is dropped unsettled"]
pub struct PendingCall {
    provider: &'static str,
    settled: bool,
}

impl PendingCall {
    pub fn new(provider: &'static str) -> PendingCall {
        PendingCall {
            provider,
            settled: false,
        }
    }

    /// Counts the call's outcome; later calls do nothing.
    pub fn settle(&mut self, outcome: CallOutcome) {
        if !self.settled {
            self.settled = true;
            provider_call(self.provider, outcome);
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        self.settle(CallOutcome::Cancelled);
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };

    use super::*;

    /// Every counter increment and gauge change, as `name{labels} value`.
    #[derive(Default)]
    struct Capture(Arc<Mutex<Vec<String>>>);

    struct Entry {
        key: String,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl Entry {
        fn push(&self, value: String) {
            let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.push(format!("{} {value}", self.key));
        }
    }

    impl CounterFn for Entry {
        fn increment(&self, value: u64) {
            self.push(format!("+{value}"));
        }
        fn absolute(&self, value: u64) {
            self.push(format!("={value}"));
        }
    }

    impl GaugeFn for Entry {
        fn increment(&self, value: f64) {
            self.push(format!("+{value}"));
        }
        fn decrement(&self, value: f64) {
            self.push(format!("-{value}"));
        }
        fn set(&self, value: f64) {
            self.push(format!("={value}"));
        }
    }

    impl Capture {
        fn entry(&self, key: &Key) -> Arc<Entry> {
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            Arc::new(Entry {
                key: format!("{}{{{}}}", key.name(), labels.join(",")),
                log: self.0.clone(),
            })
        }

        fn lines(&self) -> Vec<String> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    impl Recorder for Capture {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.entry(key))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.entry(key))
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    #[test]
    fn a_pending_call_counts_once() {
        let capture = Capture::default();
        metrics::with_local_recorder(&capture, || {
            let mut settled = PendingCall::new("stripe");
            settled.settle(CallOutcome::HttpError);
            settled.settle(CallOutcome::Ok);
            drop(settled);
            let _abandoned = PendingCall::new("openai");
        });
        assert_eq!(
            capture.lines(),
            [
                "keel_provider_calls_total{provider=stripe,outcome=http_error} +1",
                "keel_provider_calls_total{provider=openai,outcome=cancelled} +1",
            ]
        );
    }

    #[test]
    fn an_open_stream_counts_until_dropped() {
        let capture = Capture::default();
        metrics::with_local_recorder(&capture, || {
            let stream = OpenStream::start();
            drop(stream);
        });
        assert_eq!(
            capture.lines(),
            ["keel_ai_open_streams{} +1", "keel_ai_open_streams{} -1"]
        );
    }

    #[test]
    fn queue_depths_and_jobs_carry_their_labels() {
        let capture = Capture::default();
        metrics::with_local_recorder(&capture, || {
            task_queue_depth("system", 1, 2, 3);
            task_job("load_test", JobOutcome::Retried);
        });
        assert_eq!(
            capture.lines(),
            [
                "keel_task_queue_depth{queue=system,state=queued} =1",
                "keel_task_queue_depth{queue=system,state=scheduled} =2",
                "keel_task_queue_depth{queue=system,state=in_progress} =3",
                "keel_task_jobs_total{queue=load_test,outcome=retried} +1",
            ]
        );
    }

    #[test]
    fn outcome_labels_are_distinct() {
        let labels = [
            CallOutcome::Ok,
            CallOutcome::HttpError,
            CallOutcome::Timeout,
            CallOutcome::Unreachable,
            CallOutcome::TransportError,
            CallOutcome::InvalidResponse,
            CallOutcome::Cancelled,
        ]
        .map(CallOutcome::as_str);
        let mut unique = labels.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), labels.len());
    }
}
