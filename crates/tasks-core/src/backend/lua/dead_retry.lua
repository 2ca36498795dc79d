-- KEYS: dead, job, stream. ARGV: task id, now (RFC 3339).
-- Queues a failed job again with its attempts starting over, and removes its dead letter.
-- Returns 1, or 0 when the job is not a kept failed job.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[2], 'status') ~= 'failed' then return 0 end
redis.call('HSET', KEYS[2], 'status', 'queued', 'attempts', '0', 'queued_at', ARGV[2])
redis.call('HDEL', KEYS[2], 'error', 'result', 'started_at', 'finished_at', 'lease', 'cancel_requested')
redis.call('PERSIST', KEYS[2])
redis.call('XADD', KEYS[3], '*', 'task_id', ARGV[1])
return 1
