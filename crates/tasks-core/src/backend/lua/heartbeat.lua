-- KEYS: job, stream. ARGV: entry id, group, consumer, token. Renews a held lease.
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[4] then return 0 end
redis.call('XCLAIM', KEYS[2], ARGV[2], ARGV[3], 0, ARGV[1], 'JUSTID')
return 1
