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
//! Every state change is one Lua script, so a job never ends up half-moved. Commands go over one
//! shared connection (see `redis_link.rs`); a worker takes its jobs in one script call while the
//! queue has any (see `redis_fetch.rs`).

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig, IntoConnectionInfo, Value};
use deadpool_redis::{Connection, Manager, Pool, Runtime};

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
/// How a worker takes jobs.
#[path = "redis_fetch.rs"]
mod fetch;
/// The shared connection and the scripts sent by their SHA1.
#[path = "redis_link.rs"]
mod link;

use codec::{integer, millis, pairs_of, record_fields, record_from_fields, text};
use link::{Link, Lua};

/// The consumer group of every queue's stream.
pub const GROUP: &str = "workers";

/// Idle consumers without pending jobs are forgotten after this long.
const CONSUMER_IDLE_FORGET: Duration = Duration::from_secs(3600);

const TIME_MS: &str = include_str!("lua/time_ms.lua");

/// KEYS: job, stream, delayed. ARGV: task id, delay ms, then field/value pairs of the hash.
const ENQUEUE: &str = include_str!("lua/enqueue.lua");

/// KEYS: stream, delayed, dead. See the scripts and `redis_fetch.rs`.
const TAKE: &str = include_str!("lua/take.lua");
const START: &str = include_str!("lua/start.lua");
/// The start of one job, spliced into both.
const START_JOB: &str = include_str!("lua/start_job.lua");

/// KEYS: job, stream. ARGV: entry id, group, consumer, token. Renews a held lease.
const HEARTBEAT: &str = include_str!("lua/heartbeat.lua");

/// KEYS: job, stream, delayed, dead. ARGV: entry id, group, token, mode, payload, now (RFC 3339),
/// keep ms, delay ms, task id, finished channel. Modes: completed, failed, retry, cancelled,
/// release.
const FINISH: &str = include_str!("lua/finish.lua");

/// KEYS: stream. ARGV: group, consumer. Deletes the consumer when it holds nothing.
const FORGET_CONSUMER: &str = include_str!("lua/forget_consumer.lua");

fn script(body: &str) -> Lua {
    Lua::new(
        body.replace("__TIME__", TIME_MS)
            .replace("__START__", START_JOB),
    )
}

/// Jobs in Redis, shared by every server and worker pointed at the same database and prefix.
pub struct RedisBackend {
    /// Connections for blocking reads (and for other modules' use of the same Redis).
    pool: Pool,
    /// Every other command.
    link: Link,
    /// For the subscription to finished jobs (a connection of its own, outside the pool).
    client: redis::Client,
    prefix: String,
    /// The longest blocking read: below the connections' response timeout.
    max_block: Duration,
    scripts: Scripts,
}

struct Scripts {
    enqueue: Lua,
    take: Lua,
    start: Lua,
    heartbeat: Lua,
    finish: Lua,
    forget_consumer: Lua,
    schedule: Lua,
    cancel: Lua,
    dead_page: Lua,
    dead_retry: Lua,
    dead_drop: Lua,
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
        let manager = Manager::new_with_config(info, connection.clone())
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
            link: Link::new(
                client.clone(),
                connection,
                format!("{}link", settings.prefix).replace(char::is_whitespace, "_"),
            ),
            client,
            prefix: settings.prefix.clone(),
            max_block,
            scripts: Scripts {
                enqueue: script(ENQUEUE),
                take: script(TAKE),
                start: script(START),
                heartbeat: script(HEARTBEAT),
                finish: script(FINISH),
                forget_consumer: script(FORGET_CONSUMER),
                schedule: script(admin::SCHEDULE),
                cancel: script(admin::CANCEL),
                dead_page: script(admin::DEAD_PAGE),
                dead_retry: script(admin::DEAD_RETRY),
                dead_drop: script(admin::DEAD_DROP),
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

    /// The key prefix of job hashes, for scripts that name jobs they find in a stream.
    fn job_prefix(&self) -> String {
        format!("{}job:", self.prefix)
    }

    /// A pooled connection: for blocking reads only (see `redis_link.rs`).
    async fn conn(&self) -> Result<Connection, TasksError> {
        Ok(self.pool.get().await?)
    }

    async fn create_group(&self, queue: &str) -> Result<(), TasksError> {
        let created: redis::RedisResult<Value> = self
            .link
            .query(
                redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(self.stream_key(queue))
                    .arg(GROUP)
                    .arg("0")
                    .arg("MKSTREAM"),
            )
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn settle(
        &self,
        lease: &Lease,
        mode: &str,
        payload: &str,
        keep: Duration,
        delay: Duration,
    ) -> Result<bool, TasksError> {
        let mut call = self.scripts.finish.call(4);
        call.arg(self.job_key(&lease.task_id))
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
            .arg(self.finished_channel());
        let done: i64 = self.link.eval(&self.scripts.finish, &call).await?;
        Ok(done == 1)
    }

    /// The names of the queues that have a stream under this prefix.
    async fn stream_queues(&self) -> Result<Vec<String>, TasksError> {
        let pattern = format!("{}stream:*", self.prefix);
        let mut cursor = 0u64;
        let mut queues = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = self
                .link
                .query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(500),
                )
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
        let _: String = self.link.query(&redis::cmd("PING")).await?;
        Ok(())
    }

    async fn prepare(&self, queue: &str) -> Result<(), TasksError> {
        self.create_group(queue).await
    }

    async fn enqueue(&self, job: &TaskRecord, delay: Duration) -> Result<(), TasksError> {
        let mut call = self.scripts.enqueue.call(3);
        call.arg(self.job_key(&job.task_id))
            .arg(self.stream_key(&job.queue))
            .arg(self.delayed_key(&job.queue))
            .arg(&job.task_id)
            .arg(millis(delay));
        for (field, value) in record_fields(job) {
            call.arg(field).arg(value);
        }
        let _: i64 = self.link.eval(&self.scripts.enqueue, &call).await?;
        Ok(())
    }

    async fn get(&self, task_id: &str) -> Result<Option<TaskRecord>, TasksError> {
        let fields: Value = self
            .link
            .query(redis::cmd("HGETALL").arg(self.job_key(task_id)))
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
        self.create_group(queue).await?;
        let (len, scheduled, pending): (u64, u64, Value) = self
            .link
            .pipe(
                redis::pipe()
                    .cmd("XLEN")
                    .arg(self.stream_key(queue))
                    .cmd("ZCARD")
                    .arg(self.delayed_key(queue))
                    .cmd("XPENDING")
                    .arg(self.stream_key(queue))
                    .arg(GROUP),
            )
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
        self.take_jobs(queue, consumer, max, wait, policy).await
    }

    async fn heartbeat(&self, lease: &Lease) -> Result<Held, TasksError> {
        let mut call = self.scripts.heartbeat.call(2);
        call.arg(self.job_key(&lease.task_id))
            .arg(self.stream_key(&lease.queue))
            .arg(&lease.delivery)
            .arg(GROUP)
            .arg(&lease.consumer)
            .arg(&lease.token);
        let held: i64 = self.link.eval(&self.scripts.heartbeat, &call).await?;
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
        let mut removed = 0u64;
        for queue in self.stream_queues().await? {
            let stream = self.stream_key(&queue);
            let consumers: Value = match self
                .link
                .query(redis::cmd("XINFO").arg("CONSUMERS").arg(&stream).arg(GROUP))
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
                    let _: Value = self
                        .link
                        .query(
                            redis::cmd("XGROUP")
                                .arg("DELCONSUMER")
                                .arg(&stream)
                                .arg(GROUP)
                                .arg(name),
                        )
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
        let mut call = self.scripts.forget_consumer.call(1);
        call.arg(self.stream_key(queue)).arg(GROUP).arg(consumer);
        let _: Value = self.link.eval(&self.scripts.forget_consumer, &call).await?;
        Ok(())
    }
}
