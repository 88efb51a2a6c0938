"""Each segment heard before it counts, through real worker processes: faults injected into the
engine's audio are caught and made again, and the job keeps the good attempt."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import soundfile as sf
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import wait_terminal
from workers.checks.signal import expected_seconds

TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
# Two segments (eSpeak NG cuts at 200 characters).
TWO = (
    "The quick brown fox jumps over the lazy dog near the river bank, and the dog sleeps on "
    "while the fox runs far away into the green and quiet forest behind the old stone mill. "
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells."
)


async def _cues(queue: Queue, job_id: str) -> list[dict[str, Any]]:
    return [orjson.loads(cue) for cue in await queue.stored.cues(job_id)]


async def _run(queue: Queue, text: str, **fields: Any) -> tuple[list[dict[str, Any]], Any]:
    submitted = await queue.enqueue(
        SynthesisRequest(text=text, voice="en_female", cache=False, **fields), client="c1"
    )
    events = await wait_terminal(queue, submitted.job_id)
    job = await queue.get(submitted.job_id)
    return events, job


async def test_a_correct_segment_passes_through_pocketsphinx(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    queue = Queue(aredis, settings)
    events, job = await _run(queue, TEXT)
    assert events[-1]["type"] == "succeeded"
    assert job.checks == {"passed": 1, "failed": 0, "unheard": 0, "remade": 0}
    assert events[-1]["job"]["checks"] == job.checks
    cues = await _cues(queue, job.id)
    assert cues[0]["check"]["verdict"] == "passed"
    assert cues[0]["check"]["heard_by"] == "pocketsphinx"


@pytest.mark.parametrize("kind", ["short", "runon", "silence", "loop", "words", "clip", "nan"])
async def test_each_fault_is_caught_and_made_again(
    kind: str, settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    start_worker(CHATTTS_FAULT_AUDIO=kind)
    queue = Queue(aredis, settings)
    events, job = await _run(queue, TWO)
    assert events[-1]["type"] == "succeeded"
    progress = [e["segment"]["check"] for e in events if e["type"] == "progress"]
    assert [c["verdict"] for c in progress] == ["passed", "passed"]
    assert [c["attempts"] for c in progress] == [2, 2]
    assert job.checks == {"passed": 2, "failed": 0, "unheard": 0, "remade": 2}
    # The job's audio is the good attempts': as long as the text takes, no longer.
    audio, rate = sf.read(io.BytesIO(await queue.stored.file(job.id)))
    assert 0.3 * expected_seconds(TWO) < len(audio) / rate < expected_seconds(TWO)


async def test_a_segment_that_fails_every_try_says_so(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    start_worker(CHATTTS_FAULT_AUDIO="words:9", CHATTTS_CHECK_TRIES="3")
    queue = Queue(aredis, settings)
    events, job = await _run(queue, TEXT)
    assert events[-1]["type"] == "succeeded"
    assert job.checks == {"passed": 0, "failed": 1, "unheard": 0, "remade": 1}
    cue = (await _cues(queue, job.id))[0]
    assert cue["check"]["verdict"] == "failed" and cue["check"]["attempts"] == 3
    assert cue["check"]["reasons"] == ["words"]


async def test_a_recognizer_that_is_down_gives_unheard(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    start_worker(CHATTTS_RECOGNIZER="http://127.0.0.1:9/v1/audio/transcriptions")
    queue = Queue(aredis, settings)
    events, job = await _run(queue, TEXT)
    assert events[-1]["type"] == "succeeded"
    assert job.checks == {"passed": 0, "failed": 0, "unheard": 1, "remade": 0}
    cue = (await _cues(queue, job.id))[0]
    assert cue["check"]["verdict"] == "unheard" and "down" in cue["check"]["unheard"]


@pytest.mark.parametrize("policy", ["hold", "send"])
async def test_a_stream_holds_or_sends_a_segment_that_is_made_again(
    policy: str, settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """`hold`: the stream gets only the kept attempt, and joins into exactly the job's file;
    `send`: the stream got the first attempt as the engine made it (the fault spoils what the
    check hears), and its last chunk went out before the job ended."""
    start_worker(CHATTTS_FAULT_AUDIO="runon")
    queue = Queue(aredis, settings)
    events, job = await _run(queue, TEXT, stream=True, stream_check=policy, format="pcm")
    assert events[-1]["type"] == "succeeded"
    assert job.checks == {"passed": 1, "failed": 0, "unheard": 0, "remade": 1}
    streamed = b"".join(await queue.stored.chunks(job.id, 0, -1))
    final = await queue.stored.file(job.id)
    if policy == "hold":
        assert streamed == final
    else:
        audio = [e for e in events if e["type"] == "audio"]
        assert audio[-1]["chunk"]["last"] and not any(e["chunk"]["last"] for e in audio[:-1])
        assert len(streamed) == len(final)  # eSpeak NG made the same samples twice


async def test_nothing_is_lost_when_a_worker_dies_while_it_hears(
    settings: Settings, aredis: Redis, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A worker killed while its recognizer hears a segment: the job is reclaimed and made by
    another worker."""
    from aiohttp import web

    heard = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:  # a transcription server that hangs
        await request.read()
        heard.set()
        await asyncio.sleep(60)
        return web.json_response({"text": ""})

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        url = f"http://127.0.0.1:{port}/v1/audio/transcriptions"
        first = start_worker(CHATTTS_RECOGNIZER=url, CHATTTS_RECOGNIZER_TIMEOUT_S="60")
        queue = Queue(aredis, settings)
        request = SynthesisRequest(text=TEXT, voice="en_female", cache=False)
        submitted = await queue.enqueue(request, client="c1")
        await asyncio.wait_for(heard.wait(), 30)
        first.kill()
        start_worker(CHATTTS_RECOGNIZER="pocketsphinx")
        events = await wait_terminal(queue, submitted.job_id, timeout=90)
        assert events[-1]["type"] == "succeeded"
        job = await queue.get(submitted.job_id)
        assert job is not None and job.attempts == 2
        assert job.checks == {"passed": 1, "failed": 0, "unheard": 0, "remade": 0}
    finally:
        await runner.cleanup()


async def test_a_voice_the_recognizer_does_not_hear_is_unheard(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    """The worker finds, the first time it hears it, that pocketsphinx fails eSpeak NG's male
    English voice: its segments' words go unheard (and say why), never failed for a recognizer's
    weakness."""
    queue = Queue(aredis, settings)
    submitted = await queue.enqueue(
        SynthesisRequest(text=TEXT, voice="en_male", cache=False), client="c1"
    )
    await wait_terminal(queue, submitted.job_id)
    job = await queue.get(submitted.job_id)
    assert job is not None and job.checks == {"passed": 0, "failed": 0, "unheard": 1, "remade": 0}
    cue = (await _cues(queue, job.id))[0]
    assert "does not hear the voice 'en_male'" in cue["check"]["unheard"]
    assert "its words go unheard" in worker.log()
