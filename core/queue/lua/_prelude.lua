-- Shared by every script (prepended at load time, scripts.py): fencing, job snapshots and event
-- emission. An event is appended to the job's and the client's event streams, then the queue's
-- doorbell channel (keys.py: doorbell) is told both stream names.
-- `DOORBELL` (PUBLISH, or SPUBLISH in a Redis Cluster), `TERMINAL` (the terminal states) and
-- `K` (the key names, keys.py) come from the header scripts.py writes. Atomic with the state
-- change that calls it. `emit` returns the job stream's new id and the event JSON.

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
-- Flags: JSON booleans in every snapshot, set or not ("0" would be true in a client's `if`).
local FLAGS = {cancel_requested=true, cached=true, document=true}
-- No `seq`: the queue-wide count of submissions would tell every client the traffic volume.
local SNAPSHOT_FIELDS = {'id', 'state', 'voice', 'format', 'attempts', 'created_at',
  'started_at', 'finished_at', 'error', 'segments_total', 'segments_done', 'duration_s',
  'audio_size', 'sample_rate', 'cancel_requested', 'cached', 'chunks_done', 'callback',
  'callback_attempts', 'callback_error', 'document', 'starts'}
-- What the worker heard in the job's segments (workers/checks/): counts by verdict, and of
-- segments made again; a snapshot carries them as one `checks` object.
local CHECKS = {'passed', 'failed', 'unheard', 'remade'}

local function snapshot(job_key)
  local values = redis.call('HMGET', job_key, unpack(SNAPSHOT_FIELDS))
  local snap = {}
  for i, name in ipairs(SNAPSHOT_FIELDS) do
    local v = values[i]
    if FLAGS[name] then
      snap[name] = (v == '1')
    elseif v and v ~= '' then
      if NUMERIC[name] then snap[name] = tonumber(v) else snap[name] = v end
    end
  end
  local counts = redis.call('HMGET', job_key, 'checks_passed', 'checks_failed',
    'checks_unheard', 'checks_remade')
  if counts[1] or counts[2] or counts[3] then
    local checks = {}
    for i, name in ipairs(CHECKS) do checks[name] = tonumber(counts[i] or '0') end
    snap.checks = checks
  end
  return snap
end

-- A segment's cue (a table) counted in its job's checks, where the worker heard it.
local function count_check(job_key, cue)
  local check = cue.check
  if type(check) ~= 'table' then return nil end
  redis.call('HINCRBY', job_key, 'checks_' .. check.verdict, 1)
  if (check.attempts or 1) > 1 then redis.call('HINCRBY', job_key, 'checks_remade', 1) end
  return check
end

-- The doorbell channel of the queue that a job's event stream belongs to.
local function doorbell_of(ev_job)
  return K.doorbell((string.gsub(ev_job, K.job_events('', '.*') .. '$', '')))
end

-- A stream written for the last time, rewritten to its exact size: Redis keeps a new stream
-- node's room for 4 KB of entries, which a finished job's few events would hold for a day
-- (DUMP and RESTORE give back a stream, its ids and its TTL, packed).
local COMPACT_BELOW = 32  -- entries: a longer stream is a client's, still growing
local function compact(stream)
  if redis.call('XLEN', stream) > COMPACT_BELOW then return end
  local ttl = redis.call('PTTL', stream)
  redis.call('RESTORE', stream, ttl > 0 and ttl or 0, redis.call('DUMP', stream), 'REPLACE')
end

local function emit(job_key, ev_job, ev_client, kind, now, maxlen_job, maxlen_client, ttl, extra)
  local event = {type = kind, ts = tonumber(now), job = snapshot(job_key)}
  if extra then for k, v in pairs(extra) do event[k] = v end end
  local data = cjson.encode(event)
  local job_id = redis.call('XADD', ev_job, 'MAXLEN', '~', maxlen_job, '*', 'data', data)
  redis.call('EXPIRE', ev_job, ttl)
  local client_id = redis.call('XADD', ev_client, 'MAXLEN', '~', maxlen_client, '*', 'data', data)
  redis.call('EXPIRE', ev_client, ttl)
  if TERMINAL[kind] then  -- the job's last event: its stream and a short-lived client's packed
    compact(ev_job)
    compact(ev_client)
  end
  redis.call(DOORBELL, doorbell_of(ev_job), ev_job .. '\n' .. ev_client)
  return job_id, data
end

-- The queue's base name (keys.py: base) of one of its job keys.
local function base_of(job_key)
  return (string.gsub(job_key, K.job('', '[^:]*') .. '$', ''))
end

-- Byte accounts: what jobs hold of a shared resource (keys.py: usage, pending, chunks). An
-- account is a hash (job id -> bytes, and `total`) and a sorted set of the same ids by when
-- their charge lapses; lapsed charges are collected by whoever charges next, a few at a time.
local function account_drop(usage, expiry, id)
  local held = redis.call('HGET', usage, id)
  if held then
    redis.call('HINCRBY', usage, 'total', -tonumber(held))
    redis.call('HDEL', usage, id)
  end
  redis.call('ZREM', expiry, id)
end

-- The account's total once the charges lapsed by `now` are gone.
local function account_total(usage, expiry, now)
  local lapsed = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, 256)
  for _, old in ipairs(lapsed) do account_drop(usage, expiry, old) end
  return tonumber(redis.call('HGET', usage, 'total') or '0')
end

-- Charge `bytes` to a new job `id` until `ttl` seconds from `now`; the keys live as long as
-- this charge, the latest (every charge of an account is made at submission, for the job TTL).
local function account_charge(usage, expiry, id, bytes, now, ttl)
  redis.call('HSET', usage, id, bytes)
  redis.call('HINCRBY', usage, 'total', bytes)
  redis.call('ZADD', expiry, tonumber(now) + ttl, id)
  redis.call('EXPIRE', usage, ttl)
  redis.call('EXPIRE', expiry, ttl)
end

-- Correct job `id`'s charge to `bytes` (the real size once written), keeping its lapse; nothing
-- when it holds none. Returns the account's new total.
local function account_correct(usage, id, bytes)
  local held = redis.call('HGET', usage, id)
  if not held then return tonumber(redis.call('HGET', usage, 'total') or '0') end
  redis.call('HSET', usage, id, bytes)
  return redis.call('HINCRBY', usage, 'total', bytes - tonumber(held))
end

-- A job's storage charge (enqueue.lua) corrected to `real` bytes once they are written, on its
-- client's account and its source address's.
local function recharge(job_key, real)
  local f = redis.call('HMGET', job_key, 'charge', 'id', 'client', 'source_account')
  if not f[1] then return end
  local base = base_of(job_key)
  account_correct(K.usage(base, f[3]), f[2], real)
  if f[4] then account_correct(K.usage(base, f[4]), f[2], real) end
  redis.call('HSET', job_key, 'charge', real)
end

-- The accounts a job's stream chunks are charged to (enqueue.lua): the queue's, its client's
-- and its source address's (the same one for a client without a cookie of its own).
local function chunk_accounts(base, job_key)
  local owners = redis.call('HGET', job_key, 'chunk_owners')
  if not owners then return {} end
  local out = {{K.chunk_usage(base), K.chunk_usage_expiry(base)}}
  for owner in string.gmatch(owners, '[^\n]+') do
    out[#out + 1] = {K.owner_chunk_usage(base, owner), K.owner_chunk_usage_expiry(base, owner)}
  end
  return out
end

-- One start (or the finding that a job is past its deliveries) in the job's record of runs, for
-- the operators (console.py): the last 64, kept as long as the job.
-- (Every job does this: the trim and the expiry only when they change something.)
local function record_run(job_key, id, run, ttl)
  local runs = K.runs(base_of(job_key), id)
  local n = redis.call('RPUSH', runs, cjson.encode(run))
  if n == 1 then redis.call('EXPIRE', runs, ttl) elseif n > 64 then
    redis.call('LTRIM', runs, -64, -1)
  end
end

-- A job that asked for a callback gets one queued (keys.py: callbacks_due, callbacks) in the
-- same script that ends it: no crash can come between "ended" and "callback queued". The
-- callback carries the job as it ended, so that it outlives the job's own record.
-- `owner`: whose share its delivery counts in (its backlog owner: an API key, or the source
-- address of anonymous clients, whatever their cookies).
local function queue_callback(job_key, ttl, owner)
  local target = redis.call('HGET', job_key, 'callback_url')
  if not target or target == '' then return end
  local base = base_of(job_key)
  local id = redis.call('HGET', job_key, 'id')
  redis.call('HSET', job_key, 'callback', 'pending', 'callback_attempts', 0)
  local now = redis.call('TIME')
  local client = redis.call('HGET', job_key, 'client')
  local record = {url = target, client = client, owner = owner or client, attempts = 0,
    job = snapshot(job_key), ['until'] = tonumber(now[1]) + math.max(ttl, 86400)}
  redis.call('HSET', K.callbacks(base), id, cjson.encode(record))
  -- Due now, in the order the jobs ended (a constant score would order them by id).
  redis.call('ZADD', K.callbacks_due(base), tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000), id)
end

-- A job that ended, in the operators' tallies (keys.py: tally, minute): its client's jobs,
-- characters and seconds of audio of the day, and the queue's jobs and audio of the minute. A
-- day tallies USAGE_CLIENTS clients apart at most; later ones share 'other' (bounded memory).
-- Every job that ends runs this: a known client costs no lookup, a key's expiry is set when
-- the key is made.
local function tally(job_key)
  local base = base_of(job_key)
  local f = redis.call('HMGET', job_key, 'state', 'client', 'chars', 'duration_s')
  local now = tonumber(redis.call('TIME')[1])
  local day, who = K.tally(base, math.floor(now / 86400)), f[2] or ''
  if redis.call('HINCRBY', day, who .. '|jobs', 1) == 1 then  -- a new client today
    local clients = redis.call('HINCRBY', day, '#clients', 1)
    if clients == 1 then redis.call('EXPIRE', day, USAGE_KEEP_S) end
    if clients > USAGE_CLIENTS and who ~= 'other' then
      redis.call('HDEL', day, who .. '|jobs')
      redis.call('HINCRBY', day, '#clients', -1)
      who = 'other'
      redis.call('HINCRBY', day, who .. '|jobs', 1)
    end
  end
  local ok = f[1] == 'succeeded'
  local audio_s = ok and tonumber(f[4] or '0') or 0
  redis.call('HINCRBY', day, who .. '|chars', tonumber(f[3] or '0'))
  if ok then
    redis.call('HINCRBY', day, who .. '|ok', 1)
    redis.call('HINCRBYFLOAT', day, who .. '|audio_s', audio_s)
  end
  local minute = K.minute(base, math.floor(now / 60))
  if redis.call('HINCRBY', minute, 'jobs', 1) == 1 then
    redis.call('EXPIRE', minute, MINUTES_KEEP_S)
  end
  if ok then redis.call('HINCRBYFLOAT', minute, 'audio_s', audio_s) end
end

-- Removes a finished job from the queue and from its client's active set, and lets it expire;
-- queues its callback and tallies it unless `quiet` (a job its own client cancelled before it
-- started: the client knows, a flood of them must not delay everyone's callbacks, and it used
-- nothing).
local function retire(jobs_key, job_key, active_key, entry, ttl, quiet)
  if entry and entry ~= '' then
    redis.call('XACK', jobs_key, 'workers', entry)
    redis.call('XDEL', jobs_key, entry)
  end
  local f = redis.call('HMGET', job_key, 'id', 'backlog_owner', 'reserved', 'chunk_owners')
  local id, base = f[1], base_of(job_key)
  redis.call('SREM', active_key, id)
  redis.call('EXPIRE', job_key, ttl)
  if f[2] then  -- its share of the backlog comes back (once: the fields go with the counts)
    if redis.call('HINCRBY', K.backlog(base), f[2], -1) <= 0 then
      redis.call('HDEL', K.backlog(base), f[2])
    end
  end
  -- Its audio is written (or never will be): the store's free space says the rest from now on.
  if f[3] then redis.call('DECRBY', K.pending(base), f[3]) end
  if f[2] or f[3] then redis.call('HDEL', job_key, 'backlog_owner', 'reserved') end
  -- Its stream's chunks linger a while for late listeners, then their charge lapses.
  if f[4] then
    local lapse = tonumber(redis.call('TIME')[1]) + CHUNKS_LINGER_S
    for _, account in ipairs(chunk_accounts(base, job_key)) do
      if redis.call('ZSCORE', account[2], id) then redis.call('ZADD', account[2], lapse, id) end
    end
  end
  redis.call('EXPIRE', K.runs(base, id), ttl)
  if not quiet then
    queue_callback(job_key, ttl, f[2])
    tally(job_key)
  end
end

-- The fair scheduler's waiting room (keys.py: lane, waiting, fair, wake; take.lua serves it).
-- A job waits in its client's list in its lane; a client waits in its lane's sorted set,
-- scored by its pass. `base` is the queue's base name (base_of).

-- An idle worker blocks on the wake list (BLPOP): one push per job that became takeable.
local function wake(base)
  redis.call('LPUSH', K.wake(base), 1)
  redis.call('LTRIM', K.wake(base), 0, 255)
end

-- Job `id` of client `who` waits in `lane` from `now`: at the back of its client's list, or at
-- the front (`front`: a job given back goes before its client's later ones). Returns its index
-- in that list (what fair_position would otherwise look up).
local function fair_enter(base, lane, who, id, front, now)
  local list = K.waiting(base, lane, who)
  local zlane, fair = K.lane(base, lane), K.fair(base)
  local n
  if front then n = redis.call('LPUSH', list, id) else n = redis.call('RPUSH', list, id) end
  if n == 1 then
    if redis.call('ZCARD', zlane) == 0 then
      -- The lane starts waiting: it joins at the clock between lanes, with no credit saved
      -- (streams are charged to the interactive lane's pass: take.lua).
      local clock = tonumber(redis.call('HGET', fair, 'lv') or '0')
      local class = lane == 's' and 'i' or lane
      if tonumber(redis.call('HGET', fair, 'p:' .. class) or '0') < clock then
        redis.call('HSET', fair, 'p:' .. class, clock)
      end
    end
    -- The client starts waiting: at the lane's clock, or later when it was served ahead of
    -- it before its list ran dry (coming and going gains nothing).
    local gone = K.gone(base, lane)
    local pass = tonumber(redis.call('HGET', fair, 'v:' .. lane) or '0')
    pass = math.max(pass, tonumber(redis.call('ZSCORE', gone, who) or '0'))
    redis.call('ZREM', gone, who)
    redis.call('ZADD', zlane, pass, who)
  end
  redis.call('HINCRBY', fair, 'queued', 1)
  redis.call('HINCRBY', fair, 'n:' .. lane, 1)
  redis.call('ZADD', K.since(base, lane), now, id)  -- the oldest waiting, for operators
  wake(base)
  if front then return 0 end
  return n - 1
end

-- A waiting job leaves the room (cancelled before it was taken).
local function fair_leave(base, lane, who, id)
  local list = K.waiting(base, lane, who)
  if redis.call('LREM', list, 1, id) == 0 then return end
  redis.call('ZREM', K.since(base, lane), id)
  redis.call('HINCRBY', K.fair(base), 'queued', -1)
  redis.call('HINCRBY', K.fair(base), 'n:' .. lane, -1)
  if redis.call('LLEN', list) == 0 then
    local zlane = K.lane(base, lane)
    local pass = redis.call('ZSCORE', zlane, who)
    redis.call('ZREM', zlane, who)
    if pass then redis.call('ZADD', K.gone(base, lane), pass, who) end
  end
end

-- About how many jobs go before waiting job `id`: a round of the lane serves each of its
-- clients once (its turn in its client's list, times the clients), the clients due before it
-- in this round, and, for bulk work, the interactive and streaming clients waiting. `index`:
-- its place in its client's list when known (fair_enter's), else looked up among the first
-- POSITION_WALK of the list (a client's backlog can be long: past them, its list's length).
local POSITION_WALK = 256
local function fair_position(base, lane, who, id, index)
  local zlane = K.lane(base, lane)
  if not index then
    local list = K.waiting(base, lane, who)
    index = redis.call('LPOS', list, id, 'MAXLEN', POSITION_WALK)
    if not index and redis.call('LLEN', list) > POSITION_WALK then
      index = redis.call('LLEN', list)
    end
  end
  local rank = redis.call('ZRANK', zlane, who)  -- the clients served before it this round
  if not index or not rank then return 0 end
  local ahead = index * redis.call('ZCARD', zlane) + rank
  if lane == 'b' then
    ahead = ahead + redis.call('ZCARD', K.lane(base, 'i')) + redis.call('ZCARD', K.lane(base, 's'))
  end
  return ahead
end
