//! Scripted faults: each provider has a queue; every request to it takes the next fault, if any.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::journal::Provider;

/// What a fault does to the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// Answer normally (after `delay_ms`), or with `status` and the provider's error body when
    /// `status` is set.
    #[default]
    Respond,
    /// Close the connection without sending a response.
    Drop,
    /// Send the first half of the body (or stream) and end it cleanly: no terminal event.
    Truncate,
    /// Put a malformed chunk into the stream (or send a body that is not JSON).
    Malformed,
    /// Send the first half, then abort the connection.
    Disconnect,
    /// Send the first half, then hold the connection open without sending anything more.
    Stall,
}

/// A scripted fault for the next `times` requests to one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fault {
    pub action: FaultAction,
    /// HTTP status answered with the provider's error body (only with `action: respond`).
    pub status: Option<u16>,
    /// Overrides the provider's error code (Stripe `code`, Resend `name`, Twilio `code`,
    /// OpenAI `code`, Anthropic `error.type`, Gemini `status`).
    pub code: Option<String>,
    /// Overrides the error message.
    pub message: Option<String>,
    /// Adds a `Retry-After` header (seconds).
    pub retry_after: Option<u64>,
    /// Waits this long before answering.
    pub delay_ms: Option<u64>,
    /// How many requests this fault applies to (at least 1).
    pub times: u32,
}

impl Default for Fault {
    fn default() -> Self {
        Fault {
            action: FaultAction::Respond,
            status: None,
            code: None,
            message: None,
            retry_after: None,
            delay_ms: None,
            times: 1,
        }
    }
}

impl Fault {
    /// An error status with the provider's error body.
    pub fn status(status: u16) -> Fault {
        Fault {
            status: Some(status),
            ..Fault::default()
        }
    }

    /// A fault of the given kind.
    pub fn action(action: FaultAction) -> Fault {
        Fault {
            action,
            ..Fault::default()
        }
    }

    pub fn times(mut self, times: u32) -> Fault {
        self.times = times;
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> Fault {
        self.retry_after = Some(seconds);
        self
    }

    pub fn delay_ms(mut self, ms: u64) -> Fault {
        self.delay_ms = Some(ms);
        self
    }

    pub fn code(mut self, code: &str) -> Fault {
        self.code = Some(code.to_owned());
        self
    }

    pub fn message(mut self, message: &str) -> Fault {
        self.message = Some(message.to_owned());
        self
    }
}

/// The fault queues of every provider.
#[derive(Debug, Default)]
pub struct Faults {
    queues: HashMap<Provider, VecDeque<Fault>>,
}

impl Faults {
    pub fn push(&mut self, provider: Provider, fault: Fault) {
        if fault.times > 0 {
            self.queues.entry(provider).or_default().push_back(fault);
        }
    }

    /// Takes the next fault of `provider`, counting one use of it.
    pub fn take(&mut self, provider: Provider) -> Option<Fault> {
        let queue = self.queues.get_mut(&provider)?;
        let front = queue.front_mut()?;
        if front.times > 1 {
            front.times -= 1;
            Some(Fault {
                times: 1,
                ..front.clone()
            })
        } else {
            queue.pop_front()
        }
    }

    /// The faults still queued, per provider.
    pub fn pending(&self) -> HashMap<Provider, Vec<Fault>> {
        self.queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(p, q)| (*p, q.iter().cloned().collect()))
            .collect()
    }

    pub fn clear(&mut self) {
        self.queues.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_taken_in_order_and_counted() {
        let mut faults = Faults::default();
        faults.push(Provider::Stripe, Fault::status(500).times(2));
        faults.push(Provider::Stripe, Fault::action(FaultAction::Drop));
        assert_eq!(faults.take(Provider::Resend), None);
        assert_eq!(
            faults.take(Provider::Stripe).and_then(|f| f.status),
            Some(500)
        );
        assert_eq!(faults.pending()[&Provider::Stripe].len(), 2);
        assert_eq!(
            faults.take(Provider::Stripe).and_then(|f| f.status),
            Some(500)
        );
        assert_eq!(
            faults.take(Provider::Stripe).map(|f| f.action),
            Some(FaultAction::Drop)
        );
        assert_eq!(faults.take(Provider::Stripe), None);
    }
}
