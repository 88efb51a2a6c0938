"""The contract both tiers share: queue keys, Lua scripts and job model, settings and Redis
clients, text and audio formats, voice data. It imports nothing of `web`, `workers` or `cli`."""
