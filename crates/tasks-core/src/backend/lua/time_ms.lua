-- Spliced into the scripts below where they say __TIME__: the server time in ms as now_ms.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
