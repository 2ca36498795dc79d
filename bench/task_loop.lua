-- wrk script: background tasks enqueue to result, two requests a task. Each connection sends
-- `POST /api/v1/tasks/enqueue` (io_simulation_task, latency_scale 0), or, when an enqueue has
-- been answered and its result not yet asked for, `GET /api/v1/tasks/result/{task_id}?wait=30`,
-- which the server holds until the job ends (asked again if it answers 202 first). wrk does not
-- say which connection a response came on, so a thread's connections share one list of tasks to
-- ask for: a task's result may be asked for on another connection than its enqueue. A response
-- is a result when its task's result was asked for (a count per id, so that the bare handler,
-- which answers every request with the same completed result, is counted the same way: every
-- other response a result). Prints "tasks N requests M" (answered, all threads) when done.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  -- Formatted here, once wrk has set the Host header.
  enqueue = wrk.format("POST", "/api/v1/tasks/enqueue",
    { ["Content-Type"] = "application/json" },
    '{"task_name": "io_simulation_task", "kwargs": {"latency_scale": 0}}')
  to_ask = {}  -- task ids whose enqueue was answered (or whose result answered 202)
  asked = {}   -- task id -> results asked for and not yet answered
  tasks = 0
end

function request()
  local id = table.remove(to_ask)
  if id == nil then
    return enqueue
  end
  asked[id] = (asked[id] or 0) + 1
  return wrk.format("GET", "/api/v1/tasks/result/" .. id .. "?wait=30")
end

function response(status, headers, body)
  local id = body:match('"task_id":"([^"]+)"')
  if id == nil then
    error("no task_id in an answer (HTTP " .. status .. "): " .. body:sub(1, 200))
  end
  local pending = asked[id] or 0
  if pending == 0 then
    table.insert(to_ask, id)       -- an enqueue's answer
    return
  end
  asked[id] = pending > 1 and pending - 1 or nil
  if status == 200 and body:find('"status":"completed"', 1, true) then
    tasks = tasks + 1
  elseif status == 202 then
    table.insert(to_ask, id)       -- the wait ended first: ask again
  else
    error("task " .. id .. ": HTTP " .. status .. " " .. body:sub(1, 200))
  end
end

function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("tasks")
  end
  io.write(string.format("tasks %d requests %d\n", total, summary.requests))
end
