//! The Redis backend: every Redis command of the crate.
//!
//! Keys (all under the prefix, `keel:tasks:` by default):
//! - `job:<id>`: a hash with the job (name, queue, JSON args and kwargs, status, attempts, times,
//!   JSON result, error, and the token of the lease that holds it). No expiry while the job is
//!   pending; `WORKER_KEEP_RESULT_SECONDS` once it is finished.
//! - `stream:<queue>`: a stream of `task_id` entries, read by the consumer group `workers`. An entry
//!   stays pending (owned by one consumer) while its job runs; running jobs renew it with `XCLAIM`
//!   so that only entries of dead workers go idle and get taken over with `XAUTOCLAIM`. Settled
//!   entries are acknowledged and deleted, so the stream holds only live jobs.
//! - `delayed:<queue>`: a sorted set of task ids scored by due time (Redis server time, ms):
//!   delayed jobs and retries, moved to the stream by whichever worker looks first.
//! - `dead`, `schedule:*`, `schedules:last`: dead letters and periodic runs (see `redis_admin.rs`).
//!
//! Every state change is one Lua script, so a job never ends up half-moved.

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig, IntoConnectionInfo, Value};
use deadpool_redis::{Connection, Manager, Pool, Runtime};
use serde_json::Map;

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;

use std::collections::HashMap;

use super::{BackendKind, Finished, TaskBackend};
use crate::domain::{
    CancelOutcome, ClaimPolicy, Held, LastRun, Lease, Outcome, QueueDepth, TaskRecord,
};
use crate::error::TasksError;

/// Dead letters, periodic runs and cancellation (the scripts beyond the job's life cycle).
#[path = "redis_admin.rs"]
mod admin;
/// Replies and job hash fields.
#[path = "redis_codec.rs"]
mod codec;

use codec::{
    entries_of, integer, millis, pairs_of, parse_json_or, record_fields, record_from_fields,
    streams_of, text,
};

/// The consumer group of every queue's stream.
pub const GROUP: &str = "workers";

/// How many delayed jobs one look moves to the stream.
const PROMOTE_BATCH: usize = 1000;

/// Idle consumers without pending jobs are forgotten after this long.
const CONSUMER_IDLE_FORGET: Duration = Duration::from_secs(3600);

const TIME_MS: &str = include_str!("lua/time_ms.lua");

/// KEYS: job, stream, delayed. ARGV: task id, delay ms, then field/value pairs of the hash.
const ENQUEUE: &str = include_str!("lua/enqueue.lua");

/// KEYS: delayed, stream. ARGV: batch size. Returns ms until the next delayed job (-1: none).
const PROMOTE: &str = include_str!("lua/promote.lua");

/// KEYS: job, stream, dead. ARGV: entry id, group, token, now (RFC 3339), max tries, keep ms,
/// finished channel. Returns {attempt, task_name, args, kwargs}, or nil when the entry has
/// nothing to run.
const START: &str = include_str!("lua/start.lua");

/// KEYS: job, stream. ARGV: entry id, group, consumer, token. Renews a held lease.
const HEARTBEAT: &str = include_str!("lua/heartbeat.lua");

/// KEYS: job, stream, delayed, dead. ARGV: entry id, group, token, mode, payload, now (RFC 3339),
/// keep ms, delay ms, task id, finished channel. Modes: completed, failed, retry, cancelled,
/// release.
const FINISH: &str = include_str!("lua/finish.lua");

/// KEYS: stream. ARGV: group, consumer. Deletes the consumer when it holds nothing.
const FORGET_CONSUMER: &str = include_str!("lua/forget_consumer.lua");

fn script(body: &str) -> String {
    body.replace("__TIME__", TIME_MS)
}

/// Jobs in Redis, shared by every server and worker pointed at the same database and prefix.
pub struct RedisBackend {
    pool: Pool,
    /// For the subscription to finished jobs (a connection of its own, outside the pool).
    client: redis::Client,
    prefix: String,
    /// The longest blocking read: below the connections' response timeout.
    max_block: Duration,
    scripts: Scripts,
}

struct Scripts {
    enqueue: String,
    promote: String,
    start: String,
    finish: String,
    dead_page: String,
}

/// How to reach Redis.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub url: String,
    /// Overrides the database of the URL.
    pub db: Option<i64>,
    /// Key prefix, e.g. `keel:tasks:`.
    pub prefix: String,
    pub connect_timeout: Duration,
    /// The longest a worker blocks on one read.
    pub max_block: Duration,
    pub pool_size: usize,
}

impl RedisBackend {
    /// Creates the connection pool; no connection is made yet, so this succeeds while Redis is
    /// down (requests then fail with [`TasksError::Unavailable`]).
    pub fn connect(settings: &RedisSettings) -> Result<RedisBackend, TasksError> {
        let info = settings
            .url
            .as_str()
            .into_connection_info()
            .map_err(|e| TasksError::Unavailable(format!("invalid REDIS_URL: {e}")))?;
        let info = match settings.db {
            Some(db) => {
                let redis_settings = info.redis_settings().clone().set_db(db);
                info.set_redis_settings(redis_settings)
            }
            None => info,
        };
        let max_block = settings.max_block.max(Duration::from_millis(1));
        let connection = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(max_block + Duration::from_secs(10)));
        let client = redis::Client::open(info.clone())
            .map_err(|e| TasksError::Unavailable(format!("invalid REDIS_URL: {e}")))?;
        let manager = Manager::new_with_config(info, connection)
            .map_err(|e| TasksError::Unavailable(format!("invalid REDIS_URL: {e}")))?;
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size.max(4))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|e| TasksError::Unavailable(format!("Redis pool: {e}")))?;
        Ok(RedisBackend {
            pool,
            client,
            prefix: settings.prefix.clone(),
            max_block,
            scripts: Scripts {
                enqueue: script(ENQUEUE),
                promote: script(PROMOTE),
                start: script(START),
                finish: script(FINISH),
                dead_page: script(admin::DEAD_PAGE),
            },
        })
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The channel on which `finish.lua` announces jobs that end.
    fn finished_channel(&self) -> String {
        format!("{}finished", self.prefix)
    }

    fn job_key(&self, id: &str) -> String {
        format!("{}job:{id}", self.prefix)
    }

    fn stream_key(&self, queue: &str) -> String {
        format!("{}stream:{queue}", self.prefix)
    }

    fn delayed_key(&self, queue: &str) -> String {
        format!("{}delayed:{queue}", self.prefix)
    }

    /// The failed jobs still kept (dead letters): a sorted set scored by failure time.
    fn dead_key(&self) -> String {
        format!("{}dead", self.prefix)
    }

    async fn conn(&self) -> Result<Connection, TasksError> {
        Ok(self.pool.get().await?)
    }

    async fn create_group(&self, conn: &mut Connection, queue: &str) -> Result<(), TasksError> {
        let created: redis::RedisResult<Value> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.stream_key(queue))
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(conn)
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads entries for `consumer`: taken over from dead workers, then new ones.
    async fn read_entries(
        &self,
        conn: &mut Connection,
        queue: &str,
        consumer: &str,
        max: usize,
        wait: Duration,
        policy: &ClaimPolicy,
    ) -> Result<Vec<(String, String)>, redis::RedisError> {
        let stream = self.stream_key(queue);
        let next_due: i64 = redis::cmd("EVAL")
            .arg(&self.scripts.promote)
            .arg(2)
            .arg(self.delayed_key(queue))
            .arg(&stream)
            .arg(PROMOTE_BATCH)
            .query_async(conn)
            .await?;

        let claimed: Value = redis::cmd("XAUTOCLAIM")
            .arg(&stream)
            .arg(GROUP)
            .arg(consumer)
            .arg(millis(policy.visibility_timeout).max(1))
            .arg("0-0")
            .arg("COUNT")
            .arg(max)
            .query_async(conn)
            .await?;
        let mut entries = match claimed {
            Value::Array(parts) => parts.into_iter().nth(1).map(entries_of).unwrap_or_default(),
            _ => Vec::new(),
        };
        if entries.len() >= max {
            return Ok(entries);
        }

        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(max - entries.len());
        if entries.is_empty() {
            let mut block = wait.min(self.max_block);
            if next_due >= 0 {
                block = block.min(Duration::from_millis(next_due.unsigned_abs()));
            }
            read.arg("BLOCK").arg(millis(block).max(1));
        }
        let fresh: Value = read
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query_async(conn)
            .await?;
        for stream_entries in streams_of(fresh) {
            entries.extend(entries_of(stream_entries));
        }
        Ok(entries)
    }

    async fn start(
        &self,
        conn: &mut Connection,
        queue: &str,
        consumer: &str,
        entry: String,
        task_id: String,
        policy: &ClaimPolicy,
    ) -> Result<Option<Lease>, TasksError> {
        let token = uuid::Uuid::new_v4().to_string();
        let job_key = self.job_key(&task_id);
        let started: Value = redis::cmd("EVAL")
            .arg(&self.scripts.start)
            .arg(3)
            .arg(&job_key)
            .arg(self.stream_key(queue))
            .arg(self.dead_key())
            .arg(&entry)
            .arg(GROUP)
            .arg(&token)
            .arg(kernel::time::format(&kernel::time::now()))
            .arg(policy.max_tries)
            .arg(millis(policy.keep_result).max(1))
            .arg(self.finished_channel())
            .query_async(conn)
            .await?;
        let Value::Array(fields) = started else {
            return Ok(None);
        };
        let mut fields = fields.into_iter().map(|v| text(&v));
        let (Some(Some(attempt)), Some(Some(task_name)), Some(args), Some(kwargs)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(TasksError::Corrupt(format!("job {task_id} lacks fields")));
        };
        Ok(Some(Lease {
            task_id,
            task_name,
            queue: queue.to_owned(),
            args: parse_json_or(args.as_deref(), Vec::new()),
            kwargs: parse_json_or(kwargs.as_deref(), Map::new()),
            attempt: attempt.parse().unwrap_or(1),
            token,
            consumer: consumer.to_owned(),
            delivery: entry,
        }))
    }

    async fn settle(
        &self,
        lease: &Lease,
        mode: &str,
        payload: &str,
        keep: Duration,
        delay: Duration,
    ) -> Result<bool, TasksError> {
        let mut conn = self.conn().await?;
        let done: i64 = redis::cmd("EVAL")
            .arg(&self.scripts.finish)
            .arg(4)
            .arg(self.job_key(&lease.task_id))
            .arg(self.stream_key(&lease.queue))
            .arg(self.delayed_key(&lease.queue))
            .arg(self.dead_key())
            .arg(&lease.delivery)
            .arg(GROUP)
            .arg(&lease.token)
            .arg(mode)
            .arg(payload)
            .arg(kernel::time::format(&kernel::time::now()))
            .arg(millis(keep).max(1))
            .arg(millis(delay))
            .arg(&lease.task_id)
            .arg(self.finished_channel())
            .query_async(&mut conn)
            .await?;
        Ok(done == 1)
    }

    /// The names of the queues that have a stream under this prefix.
    async fn stream_queues(&self, conn: &mut Connection) -> Result<Vec<String>, TasksError> {
        let pattern = format!("{}stream:*", self.prefix);
        let mut cursor = 0u64;
        let mut queues = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(conn)
                .await?;
            let start = self.prefix.len() + "stream:".len();
            queues.extend(
                keys.into_iter()
                    .filter_map(|k| k.get(start..).map(str::to_owned)),
            );
            if next == 0 {
                return Ok(queues);
            }
            cursor = next;
        }
    }
}

#[async_trait::async_trait]
impl TaskBackend for RedisBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Redis
    }

    async fn ping(&self) -> Result<(), TasksError> {
        let mut conn = self.conn().await?;
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        Ok(())
    }

    async fn prepare(&self, queue: &str) -> Result<(), TasksError> {
        let mut conn = self.conn().await?;
        self.create_group(&mut conn, queue).await
    }

    async fn enqueue(&self, job: &TaskRecord, delay: Duration) -> Result<(), TasksError> {
        let mut conn = self.conn().await?;
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(&self.scripts.enqueue)
            .arg(3)
            .arg(self.job_key(&job.task_id))
            .arg(self.stream_key(&job.queue))
            .arg(self.delayed_key(&job.queue))
            .arg(&job.task_id)
            .arg(millis(delay));
        for (field, value) in record_fields(job) {
            cmd.arg(field).arg(value);
        }
        let _: i64 = cmd.query_async(&mut conn).await?;
        Ok(())
    }

    async fn get(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError> {
        let mut conn = self.conn().await?;
        let fields: Value = redis::cmd("HGETALL")
            .arg(self.job_key(task_id))
            .query_async(&mut conn)
            .await?;
        let fields: Vec<(String, Option<String>)> = pairs_of(fields)
            .into_iter()
            .filter_map(|(k, v)| Some((text(&k)?, text(&v))))
            .collect();
        if fields.is_empty() {
            return Ok(None);
        }
        record_from_fields(task_id, fields).map(Some)
    }

    async fn depth(&self, queue: &str) -> Result<QueueDepth, TasksError> {
        let mut conn = self.conn().await?;
        self.create_group(&mut conn, queue).await?;
        let (len, scheduled, pending): (u64, u64, Value) = redis::pipe()
            .cmd("XLEN")
            .arg(self.stream_key(queue))
            .cmd("ZCARD")
            .arg(self.delayed_key(queue))
            .cmd("XPENDING")
            .arg(self.stream_key(queue))
            .arg(GROUP)
            .query_async(&mut conn)
            .await?;
        let in_progress = match pending {
            Value::Array(parts) => parts.first().and_then(integer).unwrap_or(0),
            _ => 0,
        }
        .max(0)
        .unsigned_abs();
        Ok(QueueDepth {
            queued: len.saturating_sub(in_progress),
            scheduled,
            in_progress,
        })
    }

    async fn fetch(
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
        let mut conn = self.conn().await?;
        let entries = match self
            .read_entries(&mut conn, queue, consumer, max, wait, policy)
            .await
        {
            Ok(entries) => entries,
            Err(e) if e.code() == Some("NOGROUP") => {
                self.create_group(&mut conn, queue).await?;
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        let mut leases = Vec::with_capacity(entries.len());
        let mut failure = None;
        for (entry, task_id) in entries {
            // An entry that cannot be started stays pending and is retried after the visibility
            // timeout; the others of the batch still run.
            match self
                .start(&mut conn, queue, consumer, entry, task_id, policy)
                .await
            {
                Ok(Some(lease)) => leases.push(lease),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(%queue, error = %e, "cannot start a job");
                    failure = Some(e);
                }
            }
        }
        match failure {
            Some(e) if leases.is_empty() => Err(e),
            _ => Ok(leases),
        }
    }

    async fn heartbeat(&self, lease: &Lease) -> Result<Held, TasksError> {
        let mut conn = self.conn().await?;
        let held: i64 = redis::cmd("EVAL")
            .arg(HEARTBEAT)
            .arg(2)
            .arg(self.job_key(&lease.task_id))
            .arg(self.stream_key(&lease.queue))
            .arg(&lease.delivery)
            .arg(GROUP)
            .arg(&lease.consumer)
            .arg(&lease.token)
            .query_async(&mut conn)
            .await?;
        Ok(match held {
            0 => Held::Lost,
            2 => Held::Cancelled,
            _ => Held::Yes,
        })
    }

    async fn finish(
        &self,
        lease: &Lease,
        outcome: &Outcome,
        keep: Duration,
    ) -> Result<bool, TasksError> {
        match outcome {
            Outcome::Completed(value) => {
                let payload =
                    serde_json::to_string(value).map_err(|e| TasksError::Corrupt(e.to_string()))?;
                self.settle(lease, "completed", &payload, keep, Duration::ZERO)
                    .await
            }
            Outcome::Failed(error) => {
                self.settle(lease, "failed", error, keep, Duration::ZERO)
                    .await
            }
            Outcome::Retry { error, delay } => {
                self.settle(lease, "retry", error, keep, *delay).await
            }
            Outcome::Cancelled => {
                self.settle(lease, "cancelled", "", keep, Duration::ZERO)
                    .await
            }
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, TasksError> {
        self.settle(lease, "release", "", Duration::ZERO, Duration::ZERO)
            .await
    }

    async fn finished(&self) -> Result<BoxStream<'static, Finished>, TasksError> {
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(self.finished_channel()).await?;
        Ok(pubsub
            .into_on_message()
            .map(|message| match message.get_payload::<String>() {
                Ok(id) => Finished::Job(id),
                Err(_) => Finished::Missed,
            })
            .boxed())
    }

    async fn purge_expired(&self) -> Result<u64, TasksError> {
        // Finished jobs expire by themselves (key TTL); what is left are consumers of workers that
        // went away, which Redis keeps until told.
        let mut conn = self.conn().await?;
        let mut removed = 0u64;
        for queue in self.stream_queues(&mut conn).await? {
            let stream = self.stream_key(&queue);
            let consumers: Value = match redis::cmd("XINFO")
                .arg("CONSUMERS")
                .arg(&stream)
                .arg(GROUP)
                .query_async(&mut conn)
                .await
            {
                Ok(v) => v,
                Err(e) if e.code() == Some("NOGROUP") => continue,
                Err(e) => return Err(e.into()),
            };
            let Value::Array(consumers) = consumers else {
                continue;
            };
            for consumer in consumers {
                let info: Vec<(String, Value)> = pairs_of(consumer)
                    .into_iter()
                    .filter_map(|(k, v)| Some((text(&k)?, v)))
                    .collect();
                let field = |name: &str| info.iter().find(|(k, _)| k == name).map(|(_, v)| v);
                let name = field("name").and_then(text);
                let pending = field("pending").and_then(integer).unwrap_or(1);
                let idle = field("idle").and_then(integer).unwrap_or(0);
                if let Some(name) = name
                    && pending == 0
                    && idle >= millis(CONSUMER_IDLE_FORGET) as i64
                {
                    let _: Value = redis::cmd("XGROUP")
                        .arg("DELCONSUMER")
                        .arg(&stream)
                        .arg(GROUP)
                        .arg(name)
                        .query_async(&mut conn)
                        .await?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    async fn enqueue_scheduled(
        &self,
        job: &TaskRecord,
        due_ms: i64,
        claim_ttl: Duration,
    ) -> Result<bool, TasksError> {
        self.claim_scheduled(job, due_ms, claim_ttl).await
    }

    async fn last_runs(&self) -> Result<HashMap<String, LastRun>, TasksError> {
        self.read_last_runs().await
    }

    async fn failed_page(
        &self,
        offset: u64,
        limit: u64,
        keep: Duration,
    ) -> Result<(Vec<TaskRecord>, u64), TasksError> {
        self.read_failed_page(offset, limit, keep).await
    }

    async fn retry_failed(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError> {
        self.requeue_failed(task_id).await
    }

    async fn drop_failed(&self, task_id: &str) -> Result<bool, TasksError> {
        self.delete_failed(task_id).await
    }

    async fn cancel(&self, task_id: &str, keep: Duration) -> Result<CancelOutcome, TasksError> {
        self.cancel_job(task_id, keep).await
    }

    async fn cancellations(&self) -> Result<BoxStream<'static, String>, TasksError> {
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(self.cancel_channel()).await?;
        Ok(pubsub
            .into_on_message()
            .filter_map(|message| futures_util::future::ready(message.get_payload::<String>().ok()))
            .boxed())
    }

    async fn forget_consumer(&self, queue: &str, consumer: &str) -> Result<(), TasksError> {
        let mut conn = self.conn().await?;
        let _: Value = redis::cmd("EVAL")
            .arg(FORGET_CONSUMER)
            .arg(1)
            .arg(self.stream_key(queue))
            .arg(GROUP)
            .arg(consumer)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}
