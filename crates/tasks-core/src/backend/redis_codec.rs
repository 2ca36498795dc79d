//! Reading Redis replies and the job hash's fields: no I/O here.

use std::time::Duration;

use chrono::NaiveDateTime;
use deadpool_redis::redis::Value;
use serde_json::{Map, Value as Json};

use crate::domain::{TaskRecord, TaskStatus};
use crate::error::TasksError;

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A string reply as text.
pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

pub(super) fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        other => text(other)?.parse().ok(),
    }
}

/// A flat `[k, v, k, v]` array or a map as pairs.
pub(super) fn pairs_of(v: Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(pairs) => pairs,
        Value::Array(items) => {
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            pairs
        }
        _ => Vec::new(),
    }
}

/// The entries of each stream of an XREADGROUP reply: `[[name, entries], ...]` (RESP2) or
/// `{name: entries}` (RESP3); nil when the read timed out.
pub(super) fn streams_of(v: Value) -> Vec<Value> {
    match v {
        Value::Map(pairs) => pairs.into_iter().map(|(_, entries)| entries).collect(),
        Value::Array(streams) => streams
            .into_iter()
            .filter_map(|s| match s {
                Value::Array(parts) => parts.into_iter().nth(1),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Stream entries `[[id, [field, value, ...]], ...]` as (entry id, task id).
pub(super) fn entries_of(v: Value) -> Vec<(String, String)> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter_map(|entry| {
            let Value::Array(parts) = entry else {
                return None;
            };
            let mut parts = parts.into_iter();
            let id = text(&parts.next()?)?;
            let task_id = pairs_of(parts.next()?)
                .into_iter()
                .find(|(k, _)| text(k).as_deref() == Some("task_id"))
                .and_then(|(_, v)| text(&v))?;
            Some((id, task_id))
        })
        .collect()
}

pub(super) fn parse_json_or<T: serde::de::DeserializeOwned>(raw: Option<&str>, default: T) -> T {
    raw.and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or(default)
}

pub(super) fn record_fields(job: &TaskRecord) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("task_id", job.task_id.clone()),
        ("task_name", job.task_name.clone()),
        ("queue", job.queue.clone()),
        (
            "args",
            serde_json::to_string(&job.args).unwrap_or_else(|_| "[]".into()),
        ),
        (
            "kwargs",
            serde_json::to_string(&job.kwargs).unwrap_or_else(|_| "{}".into()),
        ),
        ("status", job.status.as_str().to_owned()),
        ("attempts", job.attempts.to_string()),
        ("queued_at", kernel::time::format(&job.queued_at)),
    ];
    if let Some(t) = &job.started_at {
        fields.push(("started_at", kernel::time::format(t)));
    }
    if let Some(t) = &job.finished_at {
        fields.push(("finished_at", kernel::time::format(t)));
    }
    if let Some(e) = &job.error {
        fields.push(("error", e.clone()));
    }
    if let Some(r) = &job.result {
        fields.push(("result", r.to_string()));
    }
    if let Some(user) = job.enqueued_by {
        fields.push(("enqueued_by", user.to_string()));
    }
    fields
}

pub(super) fn parse_time(raw: &str) -> Option<NaiveDateTime> {
    chrono::DateTime::parse_from_rfc3339(raw)
        .ok()
        .map(|t| t.naive_utc())
}

pub(super) fn record_from_fields(
    task_id: &str,
    fields: Vec<(String, Option<String>)>,
) -> Result<TaskRecord, TasksError> {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    };
    let corrupt = |what: &str| TasksError::Corrupt(format!("job {task_id}: {what}"));
    let status = get("status")
        .and_then(TaskStatus::parse)
        .ok_or_else(|| corrupt("no status"))?;
    let queued_at = get("queued_at")
        .and_then(parse_time)
        .ok_or_else(|| corrupt("no queued_at"))?;
    Ok(TaskRecord {
        task_id: task_id.to_owned(),
        task_name: get("task_name")
            .ok_or_else(|| corrupt("no task_name"))?
            .to_owned(),
        queue: get("queue").unwrap_or_default().to_owned(),
        args: parse_json_or(get("args"), Vec::new()),
        kwargs: parse_json_or(get("kwargs"), Map::new()),
        status,
        result: get("result").map(|r| serde_json::from_str(r).unwrap_or(Json::Null)),
        error: get("error").map(str::to_owned),
        attempts: get("attempts").and_then(|a| a.parse().ok()).unwrap_or(0),
        queued_at,
        started_at: get("started_at").and_then(parse_time),
        finished_at: get("finished_at").and_then(parse_time),
        enqueued_by: get("enqueued_by").and_then(|u| u.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn stream_replies_are_parsed() {
        let entries = Value::Array(vec![
            Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("task_id"), bulk("abc")]),
            ]),
            Value::Nil,
        ]);
        assert_eq!(
            entries_of(entries.clone()),
            vec![("1-0".to_owned(), "abc".to_owned())]
        );
        let read = Value::Array(vec![Value::Array(vec![bulk("stream"), entries])]);
        let parsed: Vec<_> = streams_of(read).into_iter().flat_map(entries_of).collect();
        assert_eq!(parsed, vec![("1-0".to_owned(), "abc".to_owned())]);
        assert!(streams_of(Value::Nil).is_empty());
    }

    #[test]
    fn records_round_trip_through_hash_fields() {
        let mut job = TaskRecord::new(
            "t".into(),
            "system".into(),
            vec![serde_json::json!(1)],
            Map::new(),
        );
        job.result = Some(serde_json::json!({"a": 12345678901234567u64}));
        job.error = Some("boom".into());
        job.enqueued_by = Some(7);
        let fields = record_fields(&job)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Some(v)))
            .collect();
        let back = record_from_fields(&job.task_id, fields).ok();
        assert_eq!(back, Some(job));
    }
}
