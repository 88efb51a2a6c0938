-- Cancel on behalf of a client: a queued job is cancelled at once and never starts; a running job
-- is flagged and its owner stops at the next segment or batch boundary.
-- KEYS: jobs, job, ev_job, ev_client, stats, active, usage, usage_expiry (the owner's storage
--       charges: a job that never ran gives its charge back)
-- ARGV: now, maxlen_job, maxlen_client, ttl, client ('' = any), unstarted_ttl (the job and its
-- own events, when it never ran: nothing to keep them for)
-- Returns {'cancelled'} | {'cancelling'} | {'terminal', state} | {'missing'} | {'forbidden'}
-- ('forbidden': the job belongs to another client; only its owner cancels it)
local jobs, job, ev_job, ev_client, stats, active =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local values = redis.call('HMGET', job, 'state', 'entry', 'client', 'cancel_requested', 'lane',
  'who', 'id')
local state = values[1]
if not state then return {'missing'} end
if ARGV[5] ~= '' and values[3] ~= ARGV[5] then return {'forbidden'} end
if TERMINAL[state] then return {'terminal', state} end
local ttl = tonumber(ARGV[4])
if state == 'queued' then
  redis.call('HSET', job, 'state', 'cancelled', 'finished_at', ARGV[1],
    'error', 'cancelled by the client')
  redis.call('HINCRBY', stats, 'cancelled', 1)
  -- Waiting in the fair room (not yet taken: no entry), it leaves it.
  if values[5] and values[5] ~= '' and (values[2] or '') == '' then
    fair_leave(base_of(job), values[5], values[6], values[7])
  end
  -- A job that never ran stored nothing: its charge comes back and it is kept briefly. One
  -- that ran before and was given back (a document with stored parts) keeps both until it
  -- expires, as its audio does.
  if tonumber(redis.call('HGET', job, 'starts') or '0') > 0 then
    retire(jobs, job, active, values[2], ttl)
    emit(job, ev_job, ev_client, 'cancelled', ARGV[1], ARGV[2], ARGV[3], ttl)
    return {'cancelled'}
  end
  local unstarted = tonumber(ARGV[6])
  local id = redis.call('HGET', job, 'id')
  for _, account in ipairs(chunk_accounts(base_of(job), job)) do  -- no chunk was made
    account_drop(account[1], account[2], id)
  end
  retire(jobs, job, active, values[2], unstarted, true)
  redis.call('ZREM', base_of(job) .. ':index', id)  -- its record goes soon: so does its entry
  local accounts = {{KEYS[7], KEYS[8]}}
  local source = redis.call('HGET', job, 'source_account')
  if source then
    local base = base_of(job)
    accounts[2] = {base .. ':usage:' .. source, base .. ':usage_exp:' .. source}
  end
  for _, account in ipairs(accounts) do
    local usage, expiry = account[1], account[2]
    local charged = redis.call('HGET', usage, id)
    if charged then
      if redis.call('HINCRBY', usage, 'total', -tonumber(charged)) <= 0
          and redis.call('HLEN', usage) <= 2 then
        redis.call('DEL', usage)  -- nothing else charged: no empty account kept for a day
      else
        redis.call('HDEL', usage, id)
      end
      redis.call('ZREM', expiry, id)
    end
  end
  emit(job, ev_job, ev_client, 'cancelled', ARGV[1], ARGV[2], ARGV[3], ttl)
  redis.call('EXPIRE', ev_job, unstarted)
  -- What this job alone kept for a day goes with it: its idempotency key, and its client's
  -- events when they are only this job's (a script's submit-then-cancel from a fresh cookie).
  local idem = redis.call('HGET', job, 'idem_key')
  if idem then redis.call('EXPIRE', idem, unstarted) end
  if redis.call('SCARD', active) == 0 and redis.call('XLEN', ev_client) <= 2 then
    redis.call('EXPIRE', ev_client, unstarted)
  end
  return {'cancelled'}
end
if values[4] ~= '1' then
  redis.call('HSET', job, 'cancel_requested', '1')
  emit(job, ev_job, ev_client, 'cancelling', ARGV[1], ARGV[2], ARGV[3], ttl)
end
return {'cancelling'}
