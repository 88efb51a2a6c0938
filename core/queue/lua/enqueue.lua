--- keys: jobs job ev_job ev_client idem active stats other_jobs usage usage_expiry
--- keys: source_usage source_expiry
--- args: id client request now ttl:n max_backlog:n max_active:n maxlen_job maxlen_client voice
--- args: format has_idem fingerprint callback_url document bytes:n client_quota:n source_quota:n
--- args: source_account lane who weight cost chars head store_room chunk_bytes:n
--- args: chunk_budget:n backlog_owner backlog_share:n
-- jobs: this job's stream; idem: its idempotency key (the job key itself when none);
-- other_jobs: the other priority's stream (the backlog counts both); usage, usage_expiry: the
-- client's storage charges (job -> bytes, job by expiry); source_usage, source_expiry: the same
-- for its source address (the client's again, and a source_quota of 0, when it has none).
-- callback_url: '' for none; document: '1' when kept in parts; bytes: its audio's expected
-- size; client_quota, source_quota: storage quotas (0: none); source_account: the source's
-- account name (keys.py: usage); lane: 's' | 'i' | 'b' in the fair waiting room (take.lua), ''
-- at the back of the stream; who: the client it is fair to (a key, or a cookie client's
-- address); cost: estimated seconds of speech; chars: its text's length (the usage tallies);
-- head: its text's start (the operators' search: console.py); store_room: the store's free
-- bytes at the last sample ('': unknown or unbounded); chunk_bytes: a stream's chunk bytes (0:
-- not streamed); chunk_budget: the queue's (bytes; 0: none); backlog_owner: who its backlog
-- share counts (an API key, or its source address); backlog_share: that share (0: none)
-- Returns {'ok', id, event_id, event_json, started_seq, depth, seq, position (-1: FIFO)} | {'dup', id} | {'backlog', depth}
--       | {'backlog_share', the owner's jobs, its share, the owners waiting}
--       | {'paused', retry_after_s, reason} (an operator paused intake: keys.py, paused)
--       | {'client_cap', active}
--       | {'storage', bytes in use, seconds until a charge lapses, 'client'|'address'}
--       | {'store_full', room, bytes reserved by jobs not yet written}
--       | {'streams_full', chunk bytes in use, seconds until one lapses, 'queue'|'client'|
--         'address', that account's budget};
--       depth: jobs in both streams and the waiting room, this one included
if has_idem == '1' then
  local existing = redis.call('GET', idem)
  if existing then
    -- A write (the key's TTL refreshed) even here: a WAIT after this script then confirms
    -- that replicas hold everything before it, the earlier submission's job included.
    redis.call('EXPIRE', idem, ttl)
    -- "<job id> <fingerprint of its request>": the key reused for another request is refused.
    local earlier, print_of = string.match(existing, '^(%S+) (%S+)$')
    if not earlier then return {'dup', existing} end
    if print_of ~= fingerprint then return {'idem_mismatch', earlier} end
    return {'dup', earlier}
  end
end
local base = base_of(job)
-- Paused by an operator: nothing new is accepted (a retry of an accepted job found it above).
local paused = redis.call('HMGET', K.paused(base), 'retry_after', 'reason')
if paused[1] then return {'paused', paused[1], paused[2] or ''} end
local depth = redis.call('XLEN', jobs) + redis.call('XLEN', other_jobs)
  + tonumber(redis.call('HGET', K.fair(base), 'queued') or '0')
if depth >= max_backlog then return {'backlog', depth} end
-- One owner (an API key, or a source address with all its cookies) holds at most its share of
-- the backlog, a max-min share: the backlog over the owners waiting, this one counted, and one
-- more (room is always left for an owner yet to come), capped at backlog_share. More owners
-- waiting, smaller shares: a few owners cannot fill the backlog between them.
if backlog_share > 0 then
  local held = tonumber(redis.call('HGET', K.backlog(base), backlog_owner) or '0')
  local owners = redis.call('HLEN', K.backlog(base))
  if held == 0 then owners = owners + 1 end
  local share = math.max(1, math.min(backlog_share, math.floor(max_backlog / (owners + 1))))
  if held >= share then return {'backlog_share', held, share, owners} end
end
local n_active = redis.call('SCARD', active)
if n_active >= max_active then return {'client_cap', n_active} end
-- Storage is admitted like work: the charges of jobs still kept, this one's added, on the
-- client's account and on its source address's (fresh cookies share their address's).
local accounts = {{usage, usage_expiry, client_quota, 'client'}}
if source_quota > 0 and source_usage ~= usage then
  accounts[2] = {source_usage, source_expiry, source_quota, 'address'}
end
for _, account in ipairs(accounts) do
  local used = account_total(account[1], account[2], now)
  if account[3] > 0 and used + bytes > account[3] then
    local first = redis.call('ZRANGE', account[2], 0, 0, 'WITHSCORES')
    local wait = first[2] and math.ceil(tonumber(first[2]) - tonumber(now)) or ttl
    return {'storage', used, wait, account[4]}
  end
end
-- The store's room, sampled by the web tier, less what the jobs not yet written will take:
-- submissions faster than the sampling cannot promise the same free bytes twice.
local pending = K.pending(base)
if store_room ~= '' and bytes > 0 then
  local reserved = tonumber(redis.call('GET', pending) or '0')
  if reserved + bytes > tonumber(store_room) then
    return {'store_full', tonumber(store_room), reserved}
  end
end
-- A stream's chunks live in Redis until a while after it ends: charged to the queue's chunk
-- budget, at most half of it per client and per address.
local owners = {client}
if source_usage ~= usage then owners[2] = source_account end
local budgets = {}
if chunk_bytes > 0 and chunk_budget > 0 then
  budgets = {{K.chunk_usage(base), K.chunk_usage_expiry(base), chunk_budget, 'queue'}}
  for _, owner in ipairs(owners) do
    budgets[#budgets + 1] = {K.owner_chunk_usage(base, owner), K.owner_chunk_usage_expiry(base, owner),
      math.floor(chunk_budget / 2), owner == client and 'client' or 'address'}
  end
  for _, account in ipairs(budgets) do
    local used = account_total(account[1], account[2], now)
    if used + chunk_bytes > account[3] then
      local first = redis.call('ZRANGE', account[2], 0, 0, 'WITHSCORES')
      local wait = first[2] and math.ceil(tonumber(first[2]) - tonumber(now)) or ttl
      return {'streams_full', used, wait, account[4], account[3]}
    end
  end
end
-- The job's record: written once, below, with what its charges need later.
local fields = {'id', id, 'client', client, 'state', 'queued', 'request', request,
  'created_at', now, 'attempts', 0, 'voice', voice, 'format', format,
  'stream', jobs, 'queued_at', now, 'chars', chars, 'head', head}
local function field(name, value)
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end
if chunk_bytes > 0 and chunk_budget > 0 then
  for _, account in ipairs(budgets) do
    account_charge(account[1], account[2], id, chunk_bytes, now, ttl)
  end
  field('chunk_owners', table.concat(owners, '\n'))
  field('chunk_charge', chunk_bytes)
end
if bytes > 0 then
  for _, account in ipairs(accounts) do account_charge(account[1], account[2], id, bytes, now, ttl) end
  redis.call('INCRBY', pending, bytes)
  field('reserved', bytes)
  if accounts[2] then field('source_account', source_account) end
  field('charge', bytes)
end
local seq = redis.call('HINCRBY', stats, 'enqueued_seq', 1)
redis.call('HINCRBY', stats, 'submitted', 1)
local entry = ''
if lane == '' then
  -- The entry names the client too: a worker starts the job without reading the hash first.
  entry = redis.call('XADD', jobs, '*', 'id', id, 'client', client)
  wake(base)
end
field('entry', entry)
field('seq', seq)
-- Every job kept, by submission, for the operators' search; those past the TTL leave it, a
-- few hundred at a time (a trim on every submission would cost every submission a command).
redis.call('ZADD', K.index(base), now, id)
if seq % 256 == 0 then
  redis.call('ZREMRANGEBYSCORE', K.index(base), '-inf', tonumber(now) - ttl)
end
local index = nil
if lane ~= '' then
  field('lane', lane)
  field('who', who)
  field('weight', weight)
  field('cost', cost)
end
if callback_url ~= '' then field('callback_url', callback_url) end
if document == '1' then field('document', '1') end
redis.call('HINCRBY', K.backlog(base), backlog_owner, 1)
field('backlog_owner', backlog_owner)
if has_idem == '1' then
  redis.call('SET', idem, id .. ' ' .. fingerprint, 'EX', ttl)
  field('idem_key', idem)  -- a cancel before it starts shortens its life
end
redis.call('HSET', job, unpack(fields))
if lane ~= '' then index = fair_enter(base, lane, who, id, false, now) end
redis.call('SADD', active, id)
redis.call('EXPIRE', active, ttl)
-- Where it stands (the jobs before it) goes in its queued event too.
local position, extra = -1, nil
if lane ~= '' then
  position = fair_position(base, lane, who, id, index)
  extra = {position = position}
end
local event_id, event = emit(job, ev_job, ev_client, 'queued', now, maxlen_job, maxlen_client, ttl, extra)
-- The queued event, the started watermark and the depth: the web tier answers the submit
-- without reading anything else.
return {'ok', id, event_id, event, redis.call('HGET', stats, 'started_seq') or '0', depth + 1,
  seq, position}
