"""The operators' console (`/admin`): its page and session, the queue and the fleet, the jobs
and the dead letters."""
