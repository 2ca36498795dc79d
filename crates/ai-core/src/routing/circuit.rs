//! A circuit breaker per provider, kept in this process: after `threshold` consecutive failures
//! the provider is skipped for `cooldown`; then one request tries it (half-open). That trial's
//! success closes the circuit, its failure opens it for another `cooldown`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;

/// Where a circuit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Requests go to the provider.
    Closed,
    /// The provider is skipped until `until`.
    Open { until: Instant },
    /// The cool-down is over and one request is trying the provider; others skip it meanwhile.
    HalfOpen,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open { .. } => "open",
            Phase::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Failures since the last success.
    failures: u32,
    /// The last failure's message.
    last_error: Option<String>,
}

/// A provider's circuit. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Circuit {
    /// 0: never opens.
    threshold: u32,
    cooldown: Duration,
    state: Arc<Mutex<State>>,
}

/// What the health answer shows of a circuit.
#[derive(Debug, Clone, PartialEq)]
pub struct CircuitView {
    pub phase: &'static str,
    pub consecutive_failures: u32,
    /// When an open circuit lets a request try the provider again.
    pub retry_at: Option<NaiveDateTime>,
    pub last_error: Option<String>,
}

/// Leave to ask the provider. Dropping a half-open trial's permit without its outcome (the caller
/// went away) lets the next request try instead.
#[derive(Debug)]
pub struct Permit {
    circuit: Circuit,
    trial: bool,
    settled: bool,
}

impl Circuit {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Circuit {
            threshold,
            cooldown,
            state: Arc::new(Mutex::new(State {
                phase: Phase::Closed,
                failures: 0,
                last_error: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A permit to ask the provider, or the time the circuit lets one through again.
    pub fn acquire(&self) -> Result<Permit, Instant> {
        let now = Instant::now();
        let mut state = self.lock();
        let trial = match state.phase {
            Phase::Closed => false,
            Phase::Open { until } if now < until => return Err(until),
            Phase::Open { .. } => {
                state.phase = Phase::HalfOpen;
                true
            }
            // Another request is trying it: it decides within a timeout.
            Phase::HalfOpen => return Err(now + self.cooldown.min(Duration::from_secs(1))),
        };
        Ok(Permit {
            circuit: self.clone(),
            trial,
            settled: false,
        })
    }

    /// A success: the circuit closes and the count starts again.
    pub fn succeeded(&self) {
        let mut state = self.lock();
        state.failures = 0;
        state.phase = Phase::Closed;
    }

    /// A failure; the circuit opens at the threshold, or at once after a failed trial.
    pub fn failed(&self, message: &str, trial: bool) {
        let mut state = self.lock();
        state.failures = state.failures.saturating_add(1);
        state.last_error = Some(message.to_owned());
        let opens = self.threshold > 0 && (trial || state.failures >= self.threshold);
        if opens {
            state.phase = Phase::Open {
                until: Instant::now() + self.cooldown,
            };
        }
    }

    pub fn view(&self) -> CircuitView {
        let state = self.lock();
        let retry_at = match state.phase {
            Phase::Open { until } => {
                let left = until.saturating_duration_since(Instant::now());
                Some(kernel::time::now() + chrono::Duration::from_std(left).unwrap_or_default())
            }
            _ => None,
        };
        CircuitView {
            phase: state.phase.name(),
            consecutive_failures: state.failures,
            retry_at,
            last_error: state.last_error.clone(),
        }
    }
}

impl Permit {
    /// The provider answered.
    pub fn succeed(mut self) {
        self.settled = true;
        self.circuit.succeeded();
    }

    /// The provider failed.
    pub fn fail(mut self, message: &str) {
        self.settled = true;
        self.circuit.failed(message, self.trial);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.trial && !self.settled {
            let mut state = self.circuit.lock();
            if state.phase == Phase::HalfOpen {
                state.phase = Phase::Open {
                    until: Instant::now(),
                };
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn it_opens_after_the_threshold_and_lets_one_trial_through_after_the_cooldown() {
        let circuit = Circuit::new(2, Duration::from_millis(300));
        circuit.acquire().unwrap().fail("one");
        assert_eq!(circuit.view().phase, "closed");
        circuit.acquire().unwrap().fail("two");
        let view = circuit.view();
        assert_eq!((view.phase, view.consecutive_failures), ("open", 2));
        assert_eq!(view.last_error.as_deref(), Some("two"));
        assert!(view.retry_at.is_some());
        assert!(circuit.acquire().is_err());
        std::thread::sleep(Duration::from_millis(320));
        let trial = circuit.acquire().unwrap();
        assert_eq!(circuit.view().phase, "half_open");
        // Only one trial at a time.
        assert!(circuit.acquire().is_err());
        // A failed trial opens it again at once.
        trial.fail("three");
        assert_eq!(circuit.view().phase, "open");
        std::thread::sleep(Duration::from_millis(320));
        circuit.acquire().unwrap().succeed();
        let view = circuit.view();
        assert_eq!((view.phase, view.consecutive_failures), ("closed", 0));
    }

    #[test]
    fn a_trial_given_up_lets_the_next_request_try() {
        let circuit = Circuit::new(1, Duration::from_millis(10));
        circuit.acquire().unwrap().fail("down");
        std::thread::sleep(Duration::from_millis(20));
        drop(circuit.acquire().unwrap());
        assert!(circuit.acquire().is_ok());
    }

    #[test]
    fn a_success_resets_the_count_and_zero_never_opens() {
        let circuit = Circuit::new(2, Duration::from_secs(60));
        circuit.acquire().unwrap().fail("one");
        circuit.acquire().unwrap().succeed();
        circuit.acquire().unwrap().fail("two");
        assert_eq!(circuit.view().phase, "closed");
        let never = Circuit::new(0, Duration::from_secs(60));
        for _ in 0..10 {
            never.acquire().unwrap().fail("down");
        }
        assert_eq!(never.view().phase, "closed");
    }
}
