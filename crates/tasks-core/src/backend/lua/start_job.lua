-- Spliced into take.lua and start.lua where they say __START__ (after __TIME__). Both scripts
-- take KEYS: stream, delayed, dead; ARGV: group, job key prefix, token prefix, now (RFC 3339),
-- max tries, keep ms, finished channel, then their own.
-- start(entry, task id, token) starts the job of one stream entry under the lease `token`:
-- returns {entry, task id, token, attempt, task name, args, kwargs}, or nil when the entry has
-- nothing to run (its job is gone, finished, cancelled, or was out of attempts when its worker
-- stopped): such an entry is acknowledged and deleted, and a job that ends here is announced on
-- the finished channel (a failed one also listed as a dead letter).
local function start(entry, task_id, token)
  local job = ARGV[2] .. task_id
  local function drop()
    redis.call('XACK', KEYS[1], ARGV[1], entry)
    redis.call('XDEL', KEYS[1], entry)
  end
  local f = redis.call('HMGET', job, 'status', 'cancel_requested', 'attempts', 'task_name', 'args', 'kwargs')
  local status = f[1]
  if status ~= 'queued' and status ~= 'in_progress' then drop() return nil end
  if f[2] then
    -- Cancelled while its worker ran it, and that worker is gone or handed it back.
    redis.call('HSET', job, 'status', 'cancelled', 'error', 'Task cancelled', 'finished_at', ARGV[4])
    redis.call('HDEL', job, 'lease')
    redis.call('PEXPIRE', job, ARGV[6])
    redis.call('PUBLISH', ARGV[7], task_id)
    drop()
    return nil
  end
  local attempts = tonumber(f[3]) or 0
  if status == 'in_progress' and attempts >= tonumber(ARGV[5]) then
    local err = 'The worker running the task stopped before it finished (attempt '
      .. attempts .. ' of ' .. ARGV[5] .. ')'
    redis.call('HSET', job, 'status', 'failed', 'error', err, 'finished_at', ARGV[4])
    redis.call('HDEL', job, 'lease')
    redis.call('PEXPIRE', job, ARGV[6])
    redis.call('ZADD', KEYS[3], now_ms, task_id)
    redis.call('PUBLISH', ARGV[7], task_id)
    drop()
    return nil
  end
  attempts = attempts + 1
  redis.call('HSET', job, 'status', 'in_progress', 'attempts', attempts, 'lease', token, 'started_at', ARGV[4])
  return {entry, task_id, token, tostring(attempts), f[4], f[5], f[6]}
end

-- Starts each {entry id, fields} of `entries`: {how many there were, leases, errors}. An entry
-- whose start fails (data that is not a job) stays pending: it is tried again after the
-- visibility timeout, and the others still start.
local function start_all(entries)
  local leases, errors = {}, {}
  for i, e in ipairs(entries) do
    local task_id
    local fields = e[2] or {}
    for j = 1, #fields, 2 do
      if fields[j] == 'task_id' then task_id = fields[j + 1] end
    end
    if task_id then
      local ok, lease = pcall(start, e[1], task_id, ARGV[3] .. ':' .. i)
      if not ok then
        local why = type(lease) == 'table' and lease.err or tostring(lease)
        errors[#errors + 1] = 'entry ' .. e[1] .. ' (task ' .. task_id .. '): ' .. why
      elseif lease then
        leases[#leases + 1] = lease
      end
    end
  end
  return {#entries, leases, errors}
end
