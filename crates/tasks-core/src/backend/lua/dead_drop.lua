-- KEYS: dead, job. ARGV: task id.
-- Removes a failed job and its dead letter. Returns 1, or 0 when it is not a kept failed job.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[2], 'status') ~= 'failed' then return 0 end
redis.call('DEL', KEYS[2])
return 1
