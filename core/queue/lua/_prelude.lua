-- Shared by every script (prepended at load time, scripts.py): fencing, job snapshots and event
-- emission. An event is appended to the job's and the client's event streams, then the queue's
-- doorbell channel (keys.py: the queue's base name and ':n') is told both stream names.
-- `DOORBELL` (PUBLISH, or SPUBLISH in a Redis Cluster) and `TERMINAL` (the terminal states) come
-- from the header scripts.py writes. Atomic with the state change that calls it. `emit` returns
-- the job stream's new id and the event JSON.

-- The fencing check of every script a worker runs on a job it holds: the job's `state`, `token`
-- and the other fields named, if it is running under `token` (the attempt number); else nil and
-- the state it is in.
local function fenced(job_key, token, ...)
  local values = redis.call('HMGET', job_key, 'state', 'token', ...)
  if values[1] ~= 'running' or values[2] ~= token then return nil, values[1] end
  return values
end

-- A refused call of a stale worker: counted as fenced, answered with the job's state.
local function stale(stats, state)
  redis.call('HINCRBY', stats, 'fenced', 1)
  return {'stale', state or 'gone'}
end
local NUMERIC = {attempts=true, created_at=true, started_at=true, finished_at=true,
  segments_total=true, segments_done=true, duration_s=true, audio_size=true, seq=true,
  sample_rate=true, chunks_done=true, callback_attempts=true, starts=true}
-- No `seq`: the queue-wide count of submissions would tell every client the traffic volume.
local SNAPSHOT_FIELDS = {'id', 'state', 'voice', 'format', 'attempts', 'created_at',
  'started_at', 'finished_at', 'error', 'segments_total', 'segments_done', 'duration_s',
  'audio_size', 'sample_rate', 'cancel_requested', 'cached', 'chunks_done', 'callback',
  'callback_attempts', 'callback_error', 'document', 'starts'}

local function snapshot(job_key)
  local values = redis.call('HMGET', job_key, unpack(SNAPSHOT_FIELDS))
  local snap = {}
  for i, name in ipairs(SNAPSHOT_FIELDS) do
    local v = values[i]
    if v and v ~= '' then
      if NUMERIC[name] then snap[name] = tonumber(v) else snap[name] = v end
    end
  end
  return snap
end

-- The doorbell channel of the queue that an event stream belongs to.
local function doorbell_of(stream)
  return (string.gsub(stream, ':ev:.*$', ':n', 1))
end

local function emit(job_key, ev_job, ev_client, kind, now, maxlen_job, maxlen_client, ttl, extra)
  local event = {type = kind, ts = tonumber(now), job = snapshot(job_key)}
  if extra then for k, v in pairs(extra) do event[k] = v end end
  local data = cjson.encode(event)
  local job_id = redis.call('XADD', ev_job, 'MAXLEN', '~', maxlen_job, '*', 'data', data)
  redis.call('EXPIRE', ev_job, ttl)
  local client_id = redis.call('XADD', ev_client, 'MAXLEN', '~', maxlen_client, '*', 'data', data)
  redis.call('EXPIRE', ev_client, ttl)
  redis.call(DOORBELL, doorbell_of(ev_job), ev_job .. '\n' .. ev_client)
  return job_id, data
end

-- A job that asked for a callback gets one queued (keys.py: callbacks, callbacks:data) in the
-- same script that ends it: no crash can come between "ended" and "callback queued". The
-- callback carries the job as it ended, so that it outlives the job's own record.
local function queue_callback(job_key)
  local target = redis.call('HGET', job_key, 'callback_url')
  if not target or target == '' then return end
  local base = string.gsub(job_key, ':job:[^:]*$', '')
  local id = redis.call('HGET', job_key, 'id')
  redis.call('HSET', job_key, 'callback', 'pending', 'callback_attempts', 0)
  local record = {url = target, client = redis.call('HGET', job_key, 'client'), attempts = 0,
    job = snapshot(job_key)}
  redis.call('HSET', base .. ':callbacks:data', id, cjson.encode(record))
  -- Due now, in the order the jobs ended (a constant score would order them by id).
  local now = redis.call('TIME')
  redis.call('ZADD', base .. ':callbacks', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000), id)
end

-- Removes a finished job from the queue and from its client's active set, and lets it expire;
-- queues its callback unless `quiet` (a job its own client cancelled before it started: the
-- client knows, and a flood of them must not delay everyone's callbacks).
local function retire(jobs_key, job_key, active_key, entry, ttl, quiet)
  if entry and entry ~= '' then
    redis.call('XACK', jobs_key, 'workers', entry)
    redis.call('XDEL', jobs_key, entry)
  end
  redis.call('SREM', active_key, redis.call('HGET', job_key, 'id'))
  redis.call('EXPIRE', job_key, ttl)
  if not quiet then queue_callback(job_key) end
end
