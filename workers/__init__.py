"""Queue contract (keys, Lua scripts, job model, events) and the worker process with its engines."""
