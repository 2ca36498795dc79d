-- KEYS: job, stream. ARGV: entry id, group, consumer, token. Renews a held lease.
-- Returns 0 when the lease is lost, 1 when held, 2 when held but the job was cancelled.
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[4] then return 0 end
redis.call('XCLAIM', KEYS[2], ARGV[2], ARGV[3], 0, ARGV[1], 'JUSTID')
if redis.call('HEXISTS', KEYS[1], 'cancel_requested') == 1 then return 2 end
return 1
