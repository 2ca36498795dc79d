-- KEYS: stream, delayed, dead. ARGV: group, job key prefix, token prefix, now (RFC 3339), max
-- tries, keep ms, finished channel, consumer, count, visibility ms, promote batch.
-- One look at a queue for a worker: moves delayed jobs that are due to the stream, takes over
-- entries idle for the visibility timeout (their worker is gone), reads new entries, up to
-- `count` in all, and starts their jobs (start_job.lua). Returns {ms until the next delayed job
-- (-1: none), entries seen, leases, errors}.
__TIME__
__START__
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[11]))
for _, id in ipairs(ids) do
  redis.call('XADD', KEYS[1], '*', 'task_id', id)
  redis.call('ZREM', KEYS[2], id)
end
local next_due = -1
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #nxt > 0 then next_due = math.max(0, tonumber(nxt[2]) - now_ms) end

local count = tonumber(ARGV[9])
local entries = {}
local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[8], ARGV[10], '0-0', 'COUNT', count)
for _, e in ipairs(claimed[2]) do
  if e then entries[#entries + 1] = e end
end
if #entries < count then
  local fresh = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[8], 'COUNT', count - #entries,
    'STREAMS', KEYS[1], '>')
  if fresh then
    for _, e in ipairs(fresh[1][2]) do entries[#entries + 1] = e end
  end
end
local started = start_all(entries)
return {next_due, started[1], started[2], started[3]}
