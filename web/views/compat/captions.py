"""`POST /dev/captioned_speech`: Kokoro-FastAPI's captioned speech (OpenAI's body; the whole audio
as base64 beside its word timestamps), served by the same queue and the same subtitles as every
job (web/views/jobs/subtitles.py)."""

from __future__ import annotations

import base64
import functools

import orjson
from aiohttp import web

from web import job_service
from web.appkeys import DERIVED, QUEUE
from web.errors import ApiError, json_response
from web.intake.bodies import json_body
from web.intake.door import Admitted
from web.intake.speech import admit_speech
from web.monitors.memory import address
from web.replies.sending import holding
from web.replies.timings import words_file
from web.replies.waiting import succeeded
from web.schemas.compat_answers import CaptionedSpeech
from web.schemas.openai import Speech


def _flag(payload: dict[str, object], name: str, default: bool) -> bool:
    value = payload.pop(name, default)
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be true or false", code="invalid_value", param=name)
    return value


async def captioned_speech(request: web.Request) -> web.StreamResponse:
    payload = await json_body(request)
    timestamps = True
    if isinstance(payload, dict):
        payload = dict(payload)
        timestamps = _flag(payload, "return_timestamps", True)
        lang_code = payload.pop("lang_code", None)  # ours follow the text's language
        if lang_code is not None and not isinstance(lang_code, str):
            raise ApiError(
                400, "'lang_code' must be a string", code="invalid_value", param="lang_code"
            )
        if _flag(payload, "stream", False) or payload.get("stream_format") is not None:
            raise ApiError(
                400,
                "captioned speech comes whole: leave 'stream' and 'stream_format' out (to "
                "stream, use /v1/audio/speech and read its job's /subtitles afterwards)",
                code="invalid_value",
                param="stream",
            )
    async with admit_speech(request, payload) as (params, admitted):  # held while it is made
        return await _answer(request, params, admitted, timestamps)


async def _answer(
    request: web.Request, params: Speech, admitted: Admitted, timestamps: bool
) -> web.StreamResponse:
    app = request.app
    job_id = admitted.job_id
    finished = await succeeded(request, job_id, admitted.cursor)
    if finished is None:  # nobody is listening any more
        return web.Response(status=499, headers={"X-Job-Id": job_id})
    size = int(finished.get("audio_size") or 0)
    with holding(request, size * 2):  # the file, and its base64 in the body
        queue = app[QUEUE]
        data = await queue.stored.file(job_id)
        if data is None:
            raise ApiError(500, "the job's audio expired", code="audio_expired")
        job = await job_service.get(app, job_id)
        build = functools.partial(words_file, job, await queue.stored.cues(job_id))
        timed = orjson.loads(await app[DERIVED].get((job_id, "words"), build, address(request)))
        body: CaptionedSpeech = {
            "audio": base64.b64encode(data).decode(),
            "audio_format": params.format,
            "timestamps": timed["words"] if timestamps else None,
            "timestamps_estimated": timed["estimated"],
            "job_id": job_id,
        }
        return json_response(body, headers={"X-Job-Id": job_id})
