-- KEYS: delayed, stream. ARGV: batch size. Returns ms until the next delayed job (-1: none).
__TIME__
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('XADD', KEYS[2], '*', 'task_id', id)
  redis.call('ZREM', KEYS[1], id)
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #nxt == 0 then return -1 end
local wait = tonumber(nxt[2]) - now_ms
if wait < 0 then return 0 end
return wait
