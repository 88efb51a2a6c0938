-- A streaming job's chunks `ARGV[1]`..`ARGV[2]` (0-based, inclusive) and the run they belong to
-- (the job's `starts`), read together: a new run empties the list as it starts.
-- KEYS: job, chunks. Returns {starts, chunk...}.
local starts = tonumber(redis.call('HGET', KEYS[1], 'starts') or '0')
local chunks = redis.call('LRANGE', KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]))
table.insert(chunks, 1, starts)
return chunks
