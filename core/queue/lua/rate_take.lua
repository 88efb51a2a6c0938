-- Every bucket of a request at once (GCRA over Redis's clock): admitted by every one, or
-- charged to none. `limits`: per bucket, its interval (ms) and its burst; `peek`: '1' to only
-- ask (nothing is charged).
--- keys: *buckets
--- args: peek *limits
-- Returns {0, 0} when admitted, else {the refusing bucket's index, ms to wait}.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local next_tat = {}
for i, key in ipairs(buckets) do
  local interval, burst = tonumber(limits[2 * i - 1]), tonumber(limits[2 * i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local wait = tat + interval - now - interval * burst
  if wait > 0 then return {i, math.ceil(wait)} end
  next_tat[i] = tat + interval
end
if peek == '1' then return {0, 0} end
for i, key in ipairs(buckets) do
  redis.call('SET', key, next_tat[i], 'PX', math.ceil(next_tat[i] - now))
end
return {0, 0}
