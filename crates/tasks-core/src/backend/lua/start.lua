-- KEYS: job, stream, dead. ARGV: entry id, group, token, now (RFC 3339), max tries, keep ms,
-- finished channel.
-- Returns {attempt, task_name, args, kwargs}, or nil when the entry has nothing to run.
local function drop()
  redis.call('XACK', KEYS[2], ARGV[2], ARGV[1])
  redis.call('XDEL', KEYS[2], ARGV[1])
end
if redis.call('EXISTS', KEYS[1]) == 0 then drop() return false end
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'in_progress' then drop() return false end
local task_id = redis.call('HGET', KEYS[1], 'task_id')
if redis.call('HEXISTS', KEYS[1], 'cancel_requested') == 1 then
  -- Cancelled while its worker ran it, and that worker is gone or handed it back.
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'error', 'Task cancelled', 'finished_at', ARGV[4])
  redis.call('HDEL', KEYS[1], 'lease')
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PUBLISH', ARGV[7], task_id)
  drop()
  return false
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if status == 'in_progress' and attempts >= tonumber(ARGV[5]) then
  local err = 'The worker running the task stopped before it finished (attempt '
    .. attempts .. ' of ' .. ARGV[5] .. ')'
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', err, 'finished_at', ARGV[4])
  redis.call('HDEL', KEYS[1], 'lease')
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  __TIME__
  redis.call('ZADD', KEYS[3], now_ms, task_id)
  redis.call('PUBLISH', ARGV[7], task_id)
  drop()
  return false
end
attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'status', 'in_progress', 'lease', ARGV[3], 'started_at', ARGV[4])
return {tostring(attempts), redis.call('HGET', KEYS[1], 'task_name'),
        redis.call('HGET', KEYS[1], 'args'), redis.call('HGET', KEYS[1], 'kwargs')}
