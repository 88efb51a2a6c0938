-- A segment of a running job is made again (its attempts so far failed their check): its seconds
-- of speech are charged to its client's pass in the job's lane, as the job's were when it was
-- taken (take.lua), so that a client whose segments keep failing pays for what they cost. A job
-- of the FIFO scheduler (no lane) and a stale worker's call charge nothing.
--- keys: job
--- args: token charge:n
-- Returns 1 when charged, 0 when not
local values = fenced(job, token, 'lane', 'who', 'weight')
if not values or not values[3] then return 0 end
local base, lane, who = base_of(job), values[3], values[4]
local step = charge / tonumber(values[5] or '1')
local zlane = K.lane(base, lane)
local pass = redis.call('ZSCORE', zlane, who)
if pass then
  redis.call('ZADD', zlane, tonumber(pass) + step, who)
else
  -- Not waiting now: it rejoins no earlier than this (fair_enter reads the gone set).
  local gone = K.gone(base, lane)
  local clock = tonumber(redis.call('HGET', K.fair(base), 'v:' .. lane) or '0')
  local was = math.max(clock, tonumber(redis.call('ZSCORE', gone, who) or '0'))
  redis.call('ZADD', gone, was + step, who)
end
return 1
