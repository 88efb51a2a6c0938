"""Requests validated without I/O: synthesis jobs, OpenAI speech, voice registrations, the
seed-era request and the console's parameters (reading a body or the queue is web/intake's)."""
