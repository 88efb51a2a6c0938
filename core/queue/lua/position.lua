-- Where a waiting job stands in the fair waiting room (_prelude.lua: fair_position).
--- keys: job
-- Returns the jobs ahead of it, or -1 when it does not wait there (a FIFO queue's)
local v = redis.call('HMGET', job, 'state', 'lane', 'who', 'id')
if v[1] ~= 'queued' or not v[2] or v[2] == '' then return -1 end
return fair_position(base_of(job), v[2], v[3], v[4])
