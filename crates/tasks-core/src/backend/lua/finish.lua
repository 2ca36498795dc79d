-- KEYS: job, stream, delayed, dead. ARGV: entry id, group, token, mode, payload, now (RFC 3339),
-- keep ms, delay ms, task id, finished channel. Modes: completed, failed, retry, cancelled,
-- release. A job that ends (completed, failed or cancelled) is announced on the channel, for
-- result waiters; a failed one is also listed as a dead letter (scored by Redis time).
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[1], 'lease')
local mode = ARGV[4]
if mode == 'retry' and redis.call('HEXISTS', KEYS[1], 'cancel_requested') == 1 then
  mode = 'cancelled'
end
if mode == 'completed' then
  redis.call('HSET', KEYS[1], 'status', 'completed', 'result', ARGV[5], 'finished_at', ARGV[6])
  redis.call('HDEL', KEYS[1], 'error')
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  redis.call('PUBLISH', ARGV[10], ARGV[9])
elseif mode == 'failed' then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[5], 'finished_at', ARGV[6])
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  __TIME__
  redis.call('ZADD', KEYS[4], now_ms, ARGV[9])
  redis.call('PUBLISH', ARGV[10], ARGV[9])
elseif mode == 'cancelled' then
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'error', 'Task cancelled', 'finished_at', ARGV[6])
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  redis.call('PUBLISH', ARGV[10], ARGV[9])
elseif mode == 'retry' then
  redis.call('HSET', KEYS[1], 'status', 'queued', 'error', ARGV[5])
  __TIME__
  redis.call('ZADD', KEYS[3], now_ms + tonumber(ARGV[8]), ARGV[9])
else
  redis.call('HSET', KEYS[1], 'status', 'queued')
  redis.call('HINCRBY', KEYS[1], 'attempts', -1)
  redis.call('HDEL', KEYS[1], 'started_at')
  redis.call('XADD', KEYS[2], '*', 'task_id', ARGV[9])
end
redis.call('XACK', KEYS[2], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[2], ARGV[1])
return 1
