//! How a worker takes jobs from Redis.
//!
//! While a queue has jobs, one script call (`take.lua`) does a whole look: it moves the delayed
//! jobs that are due to the stream, takes over entries of workers not heard of for the visibility
//! timeout, reads new entries and starts their jobs. Only when that finds nothing does the worker
//! block on the stream (`XREADGROUP BLOCK`, on a connection of its own), at most until the next
//! delayed job is due, and then start what the read delivered in one more call (`start.lua`).
//!
//! A future dropped during either call leaves delivered entries pending for this consumer: nobody
//! renews them, so another worker takes them over after the visibility timeout (a job whose start
//! had already run counts that attempt, as when a worker dies).

use std::time::Duration;

use deadpool_redis::redis::{self, Value};
use serde_json::Map;

use super::codec::{entries_of, integer, millis, parse_json_or, streams_of, text};
use super::{GROUP, RedisBackend};
use crate::domain::{ClaimPolicy, Lease};
use crate::error::TasksError;

/// How many delayed jobs one look moves to the stream.
const PROMOTE_BATCH: usize = 1000;

/// What one call of `take.lua` or `start.lua` did.
#[derive(Debug, Default, PartialEq)]
struct Taken {
    /// Milliseconds until the next delayed job is due; `None` when there is none.
    next_due: Option<u64>,
    /// Entries found, started or not.
    seen: i64,
    leases: Vec<Lease>,
    /// Entries that could not be started (they stay pending).
    errors: Vec<String>,
}

impl RedisBackend {
    /// [`super::TaskBackend::fetch`] on Redis.
    pub(super) async fn take_jobs(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        wait: Duration,
        policy: &ClaimPolicy,
    ) -> Result<Vec<Lease>, TasksError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut call = self.scripts.take.call(3);
        self.start_arguments(&mut call, queue, policy);
        call.arg(consumer)
            .arg(max)
            .arg(millis(policy.visibility_timeout).max(1))
            .arg(PROMOTE_BATCH);
        let taken = match self.link.eval(&self.scripts.take, &call).await {
            Ok(reply) => parse_taken(reply, queue, consumer)?,
            Err(e) if no_group(&e) => {
                self.create_group(queue).await?;
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        if taken.seen > 0 {
            // Jobs were there: the caller comes back at once for more.
            return taken.into_leases(queue);
        }

        let mut block = wait.min(self.max_block);
        if let Some(due) = taken.next_due {
            block = block.min(Duration::from_millis(due));
        }
        let mut conn = self.conn().await?;
        let read: Result<Value, _> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(max)
            .arg("BLOCK")
            .arg(millis(block).max(1))
            .arg("STREAMS")
            .arg(self.stream_key(queue))
            .arg(">")
            .query_async(&mut conn)
            .await;
        drop(conn);
        let entries: Vec<(String, String)> = match read {
            Ok(read) => streams_of(read).into_iter().flat_map(entries_of).collect(),
            Err(e) if no_group(&e) => {
                self.create_group(queue).await?;
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = self.scripts.start.call(3);
        self.start_arguments(&mut call, queue, policy);
        for (entry, task_id) in entries {
            call.arg(entry).arg(task_id);
        }
        let reply = self.link.eval(&self.scripts.start, &call).await?;
        parse_taken(reply, queue, consumer)?.into_leases(queue)
    }

    /// The keys and leading arguments that `take.lua` and `start.lua` share.
    fn start_arguments(&self, call: &mut redis::Cmd, queue: &str, policy: &ClaimPolicy) {
        call.arg(self.stream_key(queue))
            .arg(self.delayed_key(queue))
            .arg(self.dead_key())
            .arg(GROUP)
            .arg(self.job_prefix())
            .arg(uuid::Uuid::new_v4().simple().to_string())
            .arg(kernel::time::format(&kernel::time::now()))
            .arg(policy.max_tries)
            .arg(millis(policy.keep_result).max(1))
            .arg(self.finished_channel());
    }
}

fn no_group(e: &redis::RedisError) -> bool {
    e.code() == Some("NOGROUP")
}

impl Taken {
    /// The leases; an error only when entries failed to start and none started.
    fn into_leases(self, queue: &str) -> Result<Vec<Lease>, TasksError> {
        for error in &self.errors {
            tracing::warn!(%queue, %error, "cannot start a job; it is tried again after the visibility timeout");
        }
        match self.errors.into_iter().next() {
            Some(error) if self.leases.is_empty() => Err(TasksError::Corrupt(error)),
            _ => Ok(self.leases),
        }
    }
}

/// `{next due ms (-1: none), entries seen, leases, errors}`, each lease `{entry, task id, token,
/// attempt, task name, args, kwargs}`.
fn parse_taken(reply: Value, queue: &str, consumer: &str) -> Result<Taken, TasksError> {
    let corrupt = || TasksError::Corrupt("the reply of a job take".to_owned());
    let Value::Array(parts) = reply else {
        return Err(corrupt());
    };
    let mut parts = parts.into_iter();
    let next_due = parts
        .next()
        .as_ref()
        .and_then(integer)
        .ok_or_else(corrupt)?;
    let seen = parts
        .next()
        .as_ref()
        .and_then(integer)
        .ok_or_else(corrupt)?;
    let leases = match parts.next() {
        Some(Value::Array(leases)) => leases,
        _ => Vec::new(),
    };
    let errors = match parts.next() {
        Some(Value::Array(errors)) => errors.iter().filter_map(text).collect(),
        _ => Vec::new(),
    };
    let leases = leases
        .into_iter()
        .map(|lease| {
            let Value::Array(fields) = lease else {
                return Err(corrupt());
            };
            let mut fields = fields.iter().map(text);
            let (Some(Some(delivery)), Some(Some(task_id)), Some(Some(token))) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(corrupt());
            };
            let (Some(Some(attempt)), Some(Some(task_name)), Some(args), Some(kwargs)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(TasksError::Corrupt(format!("job {task_id} lacks fields")));
            };
            Ok(Lease {
                task_id,
                task_name,
                queue: queue.to_owned(),
                args: parse_json_or(args.as_deref(), Vec::new()),
                kwargs: parse_json_or(kwargs.as_deref(), Map::new()),
                attempt: attempt.parse().unwrap_or(1),
                token,
                consumer: consumer.to_owned(),
                delivery,
            })
        })
        .collect::<Result<Vec<Lease>, TasksError>>()?;
    Ok(Taken {
        next_due: u64::try_from(next_due).ok(),
        seen,
        leases,
        errors,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_take_reply_becomes_leases() {
        let reply = Value::Array(vec![
            Value::Int(-1),
            Value::Int(2),
            Value::Array(vec![Value::Array(vec![
                bulk("1-0"),
                bulk("job-a"),
                bulk("tok:1"),
                bulk("2"),
                bulk("io_simulation_task"),
                bulk("[1]"),
                bulk("{\"x\":true}"),
            ])]),
            Value::Array(vec![bulk("entry 2-0 (task job-b): WRONGTYPE")]),
        ]);
        let taken = parse_taken(reply, "load_test", "w1").unwrap();
        assert_eq!(taken.next_due, None);
        assert_eq!(taken.seen, 2);
        assert_eq!(taken.errors, vec!["entry 2-0 (task job-b): WRONGTYPE"]);
        let lease = &taken.leases[0];
        assert_eq!(
            (lease.delivery.as_str(), lease.task_id.as_str()),
            ("1-0", "job-a")
        );
        assert_eq!((lease.token.as_str(), lease.attempt), ("tok:1", 2));
        assert_eq!(lease.args, vec![serde_json::json!(1)]);
        assert_eq!(lease.kwargs.get("x"), Some(&serde_json::json!(true)));
        assert_eq!(
            (lease.queue.as_str(), lease.consumer.as_str()),
            ("load_test", "w1")
        );
        // One job started: the failed entry is only logged.
        assert_eq!(taken.into_leases("load_test").unwrap().len(), 1);
    }

    #[test]
    fn entries_that_all_fail_to_start_are_an_error() {
        let reply = Value::Array(vec![
            Value::Int(250),
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![bulk("entry 2-0 (task job-b): WRONGTYPE")]),
        ]);
        let taken = parse_taken(reply, "system", "w1").unwrap();
        assert_eq!(taken.next_due, Some(250));
        assert!(taken.into_leases("system").is_err());
    }
}
