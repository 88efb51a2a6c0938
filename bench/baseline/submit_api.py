"""The baseline's API: submit pushes a task on a Redis list and answers at once; query polls.

Results live under `tts:result:<id>` for 600 s once the worker stored them; until then a query
answers PENDING. The estimate is the original design's constant guess, whatever the queue holds.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from typing import Any, Literal

import redis.asyncio as redis
from fastapi import FastAPI
from pydantic import BaseModel, Field

QUEUE_KEY = "tts:queue"
RESULT_KEY = "tts:result:{}"
ESTIMATE_MS = 500

store = redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
app = FastAPI(title="TTS baseline (submit/query over a Redis list)")


class SubmitRequest(BaseModel):
    text: str = Field(min_length=1)
    voice: Literal["zh_female", "zh_male"] = "zh_female"


@app.post("/tts/submit")
async def submit(request: SubmitRequest) -> dict[str, Any]:
    task_id = uuid.uuid4().hex
    task = {"task_id": task_id, "text": request.text, "voice": request.voice}
    await store.lpush(QUEUE_KEY, json.dumps(task))
    return {"task_id": task_id, "estimate": ESTIMATE_MS}


@app.get("/tts/query/{task_id}")
async def query(task_id: str) -> dict[str, Any]:
    wav = await store.get(RESULT_KEY.format(task_id))
    if wav is None:
        return {"status": "PENDING"}
    return {"status": "DONE", "audio": base64.b64encode(wav).decode()}
