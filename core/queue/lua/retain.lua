-- Redis near its maxmemory: the oldest finished jobs go before their TTL, a batch at a time,
-- so that new work always has room (the job TTL holds while Redis has room for it). A job is
-- walked in submission order (the operators' index); one that has not ended is kept.
-- Everything a finished job keeps goes with it: its record, its events, its cues, segments,
-- parts, encoded pieces, chunks, audio kept in Redis, record of runs and the result cache's entry it made (an
-- object in the audio store is the sweeper's once nothing records it).
--- keys: index stats
--- args: most:n look:n
-- most: how many to remove at most; look: how many index entries to look at at most
-- Returns {removed, looked at}
local base = string.sub(index, 1, #index - #K.index(''))  -- the queue's (keys.py)
local removed, seen = 0, 0
for _, id in ipairs(redis.call('ZRANGE', index, 0, look - 1)) do
  seen = seen + 1
  local job = K.job(base, id)
  local state = redis.call('HGET', job, 'state')
  if not state or TERMINAL[state] then
    local entry = redis.call('HGET', job, 'cache_entry')  -- the result cache's copy of it
    if entry then redis.call('DEL', entry) end
    redis.call('DEL', job, K.job_events(base, id), K.cues(base, id), K.segments(base, id),
      K.parts(base, id), K.pieces(base, id), K.chunks(base, id), K.audio(base, id),
      K.runs(base, id))
    redis.call('ZREM', index, id)
    if state then
      removed = removed + 1
      if removed >= most then break end
    end
  end
end
if removed > 0 then redis.call('HINCRBY', stats, 'retired_early', removed) end
return {removed, seen}
