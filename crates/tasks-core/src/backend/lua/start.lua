-- KEYS: stream, delayed, dead. ARGV: group, job key prefix, token prefix, now (RFC 3339), max
-- tries, keep ms, finished channel, then the entries a blocking read just delivered: entry id
-- and task id, in pairs.
-- Starts their jobs (start_job.lua). Returns take.lua's reply: {-1, entries seen, leases,
-- errors}.
__TIME__
__START__
local entries = {}
for i = 8, #ARGV, 2 do
  entries[#entries + 1] = {ARGV[i], {'task_id', ARGV[i + 1]}}
end
local started = start_all(entries)
return {-1, started[1], started[2], started[3]}
