-- KEYS: dead. ARGV: keep ms, offset, limit.
-- Forgets dead letters older than the retention, then returns {total, ids of the page}, most
-- recent failure first.
__TIME__
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now_ms - tonumber(ARGV[1])))
local total = redis.call('ZCARD', KEYS[1])
local first = tonumber(ARGV[2])
local ids = redis.call('ZREVRANGE', KEYS[1], first, first + tonumber(ARGV[3]) - 1)
return {total, ids}
