-- KEYS: job, delayed. ARGV: now (RFC 3339), keep ms, task id, finished channel, cancel channel.
-- A queued or delayed job is cancelled at once (its stream entry, if any, is dropped by the
-- worker that reads it); a running one is marked and its worker told to stop.
-- Returns missing, cancelled, requested, or the status of a job that had already ended.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'queued' then
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'error', 'Task cancelled', 'finished_at', ARGV[1])
  redis.call('HDEL', KEYS[1], 'lease')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PUBLISH', ARGV[4], ARGV[3])
  return 'cancelled'
elseif status == 'in_progress' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  redis.call('PUBLISH', ARGV[5], ARGV[3])
  return 'requested'
end
return status
