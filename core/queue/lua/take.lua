-- A worker takes up to `count` jobs: entries already in the streams first (a FIFO queue's, read
-- as XREADGROUP always did, interactive first), then from the fair waiting room. Each job taken
-- from the room gets a stream entry delivered to this worker at once, so that from here on it
-- is leased, renewed, reclaimed and retired like any stream entry (start.lua and the rest).
--
-- The order (start-time fair queuing, twice): between lanes, the lane with the lower pass goes
-- first (interactive on a tie); a lane's pass grows by each job's charge over the lane's share
-- (1 - bulk_share for interactive work, bulk_share for bulk), so that bulk keeps its share while
-- interactive work waits and takes everything when none does. Within a lane, the client with the
-- lowest pass goes first, and its pass grows by the charge over its weight. A charge is the job's
-- estimated seconds of speech; a document's is one slice (it gives its worker back after about
-- that much while others wait, progress.lua; what it ran past its charge is charged when it is
-- given back, release.lua).
-- Streams wait in their own lane and go first among interactive work (charged to its pass): a
-- listener is waiting. A worker takes at most `stream_room` of them, the streams it can still
-- carry in real time (workers/streams.py); the rest wait for a worker that can.
-- A worker keeps room for interactive work: it takes at most `bulk_room` more bulk jobs (a long
-- job that is not a document cannot give its worker back, so a hand full of them would make
-- every interactive job wait for one to end).
--- keys: high normal fair wake_list
--- args: worker count:n slice_s:n bulk_share:n bulk_room:n stream_room:n
-- high, normal: the streams (keys.py: jobs_high, jobs); wake_list: keys.py's wake
-- Returns {stream, entry, id, client, ...}, four per job
local share = {i = 1 - bulk_share, b = bulk_share}
local class = {i = 'i', s = 'i', b = 'b'}  -- whose pass a lane's work is charged to
local base = string.sub(high, 1, #high - #K.jobs_high(''))  -- the queue's (keys.py)
local out, taken = {}, 0

local function deliver(stream, entries)
  for _, e in ipairs(entries) do
    local fields, id, client = e[2], '', ''
    for i = 1, #fields, 2 do
      if fields[i] == 'id' then id = fields[i + 1] elseif fields[i] == 'client' then
        client = fields[i + 1]
      end
    end
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = stream, e[1], id, client
    taken = taken + 1
  end
end

for _, stream in ipairs({high, normal}) do
  if taken >= count then break end
  local got = redis.call('XREADGROUP', 'GROUP', 'workers', worker, 'COUNT', count - taken,
    'STREAMS', stream, '>')
  if got then deliver(stream, got[1][2]) end
end

local function waiting(lane)
  return redis.call('ZCARD', K.lane(base, lane)) > 0
end

local function next_lane()
  local waiting_s = stream_room > 0 and waiting('s')
  local interactive = waiting_s and 's' or (waiting('i') and 'i' or nil)
  local waiting_b = waiting('b')
  if not waiting_b then return interactive end
  if not interactive then return 'b' end
  local passes = redis.call('HMGET', fair, 'p:i', 'p:b')
  if tonumber(passes[2] or '0') < tonumber(passes[1] or '0') then return 'b' end
  return interactive
end

while taken < count do
  local lane = next_lane()
  if not lane then
    if waiting('s') then  -- streams this worker cannot carry: another one may be waiting
      if redis.call('LLEN', wake_list) == 0 then wake(base) end
    else
      redis.call('DEL', wake_list)  -- nothing waits: no worker should wake for nothing
    end
    break
  end
  if lane == 'b' and bulk_room <= 0 then
    local other = (stream_room > 0 and waiting('s')) and 's' or (waiting('i') and 'i' or nil)
    if not other then
      -- The work left is another worker's to take: one may be waiting for it.
      if redis.call('LLEN', wake_list) == 0 then wake(base) end
      break
    end
    lane = other
  end
  local zlane = K.lane(base, lane)
  local top = redis.call('ZRANGE', zlane, 0, 0, 'WITHSCORES')
  local who, pass = top[1], tonumber(top[2])
  local list = K.waiting(base, lane, who)
  local id = redis.call('LPOP', list)
  if not id then
    redis.call('ZREM', zlane, who)  -- a client with nothing waiting (never left by the scripts)
  else
    redis.call('HINCRBY', fair, 'queued', -1)
    redis.call('HINCRBY', fair, 'n:' .. lane, -1)
    redis.call('ZREM', K.since(base, lane), id)
    -- The lane's clock is the pass of the client served last; a client that left with a pass
    -- below it has nothing to keep.
    redis.call('HSET', fair, 'v:' .. lane, pass)
    redis.call('ZREMRANGEBYSCORE', K.gone(base, lane), '-inf', pass)
    local job = K.job(base, id)
    local v = redis.call('HMGET', job, 'state', 'client', 'weight', 'cost', 'document',
      'audio_s', 'stream')
    local runnable, charge = v[1] == 'queued', 0  -- else it expired while it waited: skipped
    local document = v[5] == '1'
    if runnable then
      charge = tonumber(v[4] or '1')
      if document and slice_s > 0 then charge = math.min(slice_s, charge) end
    end
    local next_pass = pass + charge / tonumber(v[3] or '1')
    if redis.call('LLEN', list) > 0 then
      redis.call('ZADD', zlane, next_pass, who)
    else
      redis.call('ZREM', zlane, who)
      redis.call('ZADD', K.gone(base, lane), next_pass, who)
    end
    if runnable then
      if lane == 'b' then bulk_room = bulk_room - 1 end
      if lane == 's' then stream_room = stream_room - 1 end
      local charged = class[lane]
      local lane_pass = tonumber(redis.call('HGET', fair, 'p:' .. charged) or '0')
      redis.call('HSET', fair, 'lv', lane_pass, 'p:' .. charged, lane_pass + charge / share[charged])
      local stream = v[7]
      local entry = redis.call('XADD', stream, '*', 'id', id, 'client', v[2])
      -- What it has made so far, against which its run is measured when it is given back (a
      -- document resumes; any other job starts afresh).
      local made = document and (v[6] or '0') or '0'
      redis.call('HSET', job, 'entry', entry, 'charged', charge, 'taken_audio_s', made)
      local got = redis.call('XREADGROUP', 'GROUP', 'workers', worker, 'COUNT', 1,
        'STREAMS', stream, '>')
      if got then deliver(stream, got[1][2]) end
    end
  end
end
return out
