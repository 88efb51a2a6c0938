-- A streaming job's chunks `first`..`last` (0-based, inclusive) and the run they belong to
-- (the job's `starts`), read together: a new run empties the list as it starts.
--- keys: job chunks
--- args: first:n last:n
-- Returns {starts, chunk...}.
local starts = tonumber(redis.call('HGET', job, 'starts') or '0')
local read = redis.call('LRANGE', chunks, first, last)
table.insert(read, 1, starts)
return read
