"""The baseline's worker: one task at a time off a Redis list, synthesized in the default thread
pool, the WAV stored for 600 s. A task popped by a worker that dies is lost (the design's flaw)."""

from __future__ import annotations

import asyncio
import json
import os
import time

import redis.asyncio as redis
from espeak_synth import synthesize

QUEUE_KEY = "tts:queue"
RESULT_KEY = "tts:result:{}"
RESULT_TTL_S = 600
HEARTBEAT_KEY = "tts:worker:heartbeat"  # the benchmarks wait for it before measuring
HEARTBEAT_TTL_S = 10
# Below the client's socket timeout (redis-py's default has none; the wait is bounded anyway).
BRPOP_TIMEOUT_S = 1


async def beat(store: redis.Redis) -> None:
    while True:
        await store.set(HEARTBEAT_KEY, str(time.time()), ex=HEARTBEAT_TTL_S)
        await asyncio.sleep(HEARTBEAT_TTL_S / 3)


async def main() -> None:
    store = redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    loop = asyncio.get_running_loop()
    heartbeat = asyncio.create_task(beat(store))
    try:
        while True:
            popped = await store.brpop([QUEUE_KEY], timeout=BRPOP_TIMEOUT_S)
            if popped is None:
                continue
            task = json.loads(popped[1])
            wav = await loop.run_in_executor(None, synthesize, task["text"], task["voice"])
            await store.setex(RESULT_KEY.format(task["task_id"]), RESULT_TTL_S, wav)
    finally:
        heartbeat.cancel()
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
