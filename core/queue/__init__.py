"""The queue contract both tiers share: key names, the job model, its Lua scripts, the store."""
