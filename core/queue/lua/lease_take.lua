-- A live-connection lease: `member` holds one of at most `places` in `leases` for `seconds`
-- (taking it again renews it). Returns 1 when held, 0 when the cap is full.
--- keys: leases
--- args: member places:n seconds:n
local t = redis.call('TIME')
local now = t[1] + t[2] / 1e6
redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
if redis.call('ZSCORE', leases, member) == false and redis.call('ZCARD', leases) >= places then
  return 0
end
redis.call('ZADD', leases, now + seconds, member)
redis.call('EXPIRE', leases, math.ceil(seconds))
return 1
