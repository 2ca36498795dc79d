-- KEYS: claim, job, stream, last runs. ARGV: claim ms, task id, task name, due ms, then
-- field/value pairs of the job's hash.
-- Claims one due run of a periodic task (SET NX with expiry) and, only when this call claimed
-- it, queues its job and records it as the task's last run. Returns 1 when claimed, else 0.
if not redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then return 0 end
redis.call('HSET', KEYS[2], unpack(ARGV, 5))
redis.call('XADD', KEYS[3], '*', 'task_id', ARGV[2])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[4] .. ' ' .. ARGV[2])
return 1
