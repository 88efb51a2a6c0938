-- Cancel on behalf of a client: a queued job is cancelled at once and never starts; a running job
-- is flagged and its owner stops at the next segment or batch boundary.
--- keys: jobs job ev_job ev_client stats active usage usage_expiry
--- args: now maxlen_job maxlen_client ttl:n client unstarted_ttl:n
-- usage, usage_expiry: the owner's storage charges (a job that never ran gives its charge back);
-- client: '' for any; unstarted_ttl: how long the job and its own events are kept when it never
-- ran (nothing to keep them for)
-- Returns {'cancelled'} | {'cancelling'} | {'terminal', state} | {'missing'} | {'forbidden'}
-- ('forbidden': the job belongs to another client; only its owner cancels it)
local values = redis.call('HMGET', job, 'state', 'entry', 'client', 'cancel_requested', 'lane',
  'who', 'id')
local state = values[1]
if not state then return {'missing'} end
if client ~= '' and values[3] ~= client then return {'forbidden'} end
if TERMINAL[state] then return {'terminal', state} end
if state == 'queued' then
  redis.call('HSET', job, 'state', 'cancelled', 'finished_at', now,
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
    emit(job, ev_job, ev_client, 'cancelled', now, maxlen_job, maxlen_client, ttl)
    return {'cancelled'}
  end
  local id = redis.call('HGET', job, 'id')
  for _, account in ipairs(chunk_accounts(base_of(job), job)) do  -- no chunk was made
    account_drop(account[1], account[2], id)
  end
  retire(jobs, job, active, values[2], unstarted_ttl, true)
  redis.call('ZREM', K.index(base_of(job)), id)  -- its record goes soon: so does its entry
  local accounts = {{usage, usage_expiry}}
  local source = redis.call('HGET', job, 'source_account')
  if source then
    local base = base_of(job)
    accounts[2] = {K.usage(base, source), K.usage_expiry(base, source)}
  end
  for _, account in ipairs(accounts) do
    local account_usage, expiry = account[1], account[2]
    local charged = redis.call('HGET', account_usage, id)
    if charged then
      if redis.call('HINCRBY', account_usage, 'total', -tonumber(charged)) <= 0
          and redis.call('HLEN', account_usage) <= 2 then
        redis.call('DEL', account_usage)  -- nothing else charged: no empty account kept for a day
      else
        redis.call('HDEL', account_usage, id)
      end
      redis.call('ZREM', expiry, id)
    end
  end
  emit(job, ev_job, ev_client, 'cancelled', now, maxlen_job, maxlen_client, ttl)
  redis.call('EXPIRE', ev_job, unstarted_ttl)
  -- What this job alone kept for a day goes with it: its idempotency key, and its client's
  -- events when they are only this job's (a script's submit-then-cancel from a fresh cookie).
  local idem = redis.call('HGET', job, 'idem_key')
  if idem then redis.call('EXPIRE', idem, unstarted_ttl) end
  if redis.call('SCARD', active) == 0 and redis.call('XLEN', ev_client) <= 2 then
    redis.call('EXPIRE', ev_client, unstarted_ttl)
  end
  return {'cancelled'}
end
if values[4] ~= '1' then
  redis.call('HSET', job, 'cancel_requested', '1')
  emit(job, ev_job, ev_client, 'cancelling', now, maxlen_job, maxlen_client, ttl)
end
return {'cancelling'}
