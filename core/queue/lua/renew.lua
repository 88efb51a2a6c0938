-- Renews the lease of a running job: resets its entry's idle time, so XAUTOCLAIM leaves it alone.
-- Refused when the job was reclaimed (token changed) or finished.
--- keys: jobs job
--- args: token worker
-- Returns 'ok' | 'cancel' (the owner is asked to stop) | 'lost'
local values = fenced(job, token, 'entry', 'cancel_requested')
if not values then return 'lost' end
redis.call('XCLAIM', jobs, 'workers', worker, 0, values[3], 'JUSTID')
if values[4] == '1' then return 'cancel' end
return 'ok'
