-- KEYS: job, stream, delayed. ARGV: task id, delay ms, then field/value pairs of the hash.
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
local delay = tonumber(ARGV[2])
if delay > 0 then
  __TIME__
  redis.call('ZADD', KEYS[3], now_ms + delay, ARGV[1])
else
  redis.call('XADD', KEYS[2], '*', 'task_id', ARGV[1])
end
return 1
