"""Streams admitted by capacity, with a real ChatTTS worker (the tiny architecture, rows that run
their whole budget): a worker takes streams beyond its capacity into free rows, and none of them
leaves a gap once its listener has started; its heartbeat says what it carries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.support.jobs import wait_terminal
from tests.workers.engines.chattts.conftest import requires_chattts

pytestmark = [pytest.mark.chattts, requires_chattts]
TOKENS = 96  # two seconds of speech a job: long enough for jobs taken together to overlap


@pytest.fixture(scope="module")
def endless_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from workers.engines.chattts.loading.checkpoint import build_checkpoint

    root = tmp_path_factory.mktemp("streams") / "model"
    return build_checkpoint(root, shape_eos=False, max_new_token=TOKENS)


def chattts_worker(
    start_worker: Callable[..., WorkerProcess], model: Path, **env: str
) -> WorkerProcess:
    """A ready ChatTTS worker on the model, four slots, a heartbeat five times a second."""
    return start_worker(
        ready=False,
        CHATTTS_ENGINE="chattts",
        CHATTTS_MODEL_DIR=str(model),
        CHATTTS_DEVICE="cpu",
        CHATTTS_MAX_BATCH="4",
        CHATTTS_HEARTBEAT_S="0.2",
        OMP_NUM_THREADS="1",
        **env,
    ).wait_ready(120)


def most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


async def streams_beat(aredis: Redis, queue: Queue, name: str, ran: int) -> dict[str, Any]:
    """The worker's `streams` heartbeat once it counts `ran` jobs succeeded."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        raw = await aredis.get(queue.keys.worker(name))
        beat = orjson.loads(raw) if raw else {}
        if beat.get("jobs_succeeded", 0) >= ran:
            return dict(beat["streams"])
        await asyncio.sleep(0.1)
    raise TimeoutError("no heartbeat after the jobs")


def gaps_s(events: list[dict[str, Any]]) -> float:
    """How long a listener who starts at the first audio event and plays in real time waits
    for audio, all told (the events' times are the worker's, when each chunk went out)."""
    chunks = sorted((e for e in events if e["type"] == "audio"), key=lambda e: e["chunk"]["index"])
    if not chunks:
        return 0.0
    played_until, waited = chunks[0]["ts"], 0.0
    for event in chunks:
        waited += max(0.0, event["ts"] - played_until)
        played_until = max(played_until, event["ts"]) + event["chunk"]["duration_s"]
    return waited


@pytest.mark.parametrize("admission", ["capacity", "off"])
async def test_a_worker_takes_streams_beyond_its_capacity_without_gaps(
    admission: str,
    settings: Settings,
    aredis: Redis,
    endless_model: Path,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    """A capacity of two streams, four slots and four streams: the worker takes all four (the
    two beyond the capacity make their audio in free rows, and play once they can go on
    without a gap); none of the listeners waits once its audio has started."""
    settings = settings.replace(heartbeat_s=0.2)
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    worker = chattts_worker(
        start_worker,
        endless_model,
        CHATTTS_STREAM_ADMISSION=admission,
        CHATTTS_STREAM_CAPACITY="2",
    )
    jobs = [
        await queue.enqueue(
            SynthesisRequest(text="你好世界。", voice="zh_female", stream=True, cache=False),
            f"key-listener-{i}",
        )
        for i in range(4)
    ]
    spans = []  # from its start to its last chunk out (then its worker has room again)
    for submitted in jobs:
        events = await wait_terminal(queue, submitted.job_id, timeout=90)
        job = await queue.get(submitted.job_id)
        assert job is not None and job.state == "succeeded", job
        assert job.started_at is not None
        spans.append((job.started_at, max(e["ts"] for e in events if e["type"] == "audio")))
        if admission == "capacity":
            assert gaps_s(events) < 0.05, (submitted.job_id, events)
    assert most_at_once(spans) >= 3, spans  # not one stream per unit of capacity
    streams = await streams_beat(aredis, queue, worker.name, 4)
    assert streams["capacity"] == 2 and streams["admission"] == admission  # as pinned
    assert streams["speed"] > 0  # and measured


async def test_the_capacity_is_measured_and_reaches_the_fleet_reading(
    settings: Settings,
    aredis: Redis,
    endless_model: Path,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    queue = Queue(aredis, settings)
    await queue.ensure_group()
    worker = chattts_worker(start_worker, endless_model)
    request = SynthesisRequest(text="你好世界。", voice="zh_female", stream=True, cache=False)
    submitted = await queue.enqueue(request, "key-listener")
    await wait_terminal(queue, submitted.job_id, timeout=90)
    streams = await streams_beat(aredis, queue, worker.name, 1)
    # What this machine's speed gives: one stream alone at the headroom's speed or more, at
    # least one carried; below it, none, and the fleet counts a worker below real time.
    assert streams["speed"] > 0, streams
    headroom = settings.scheduling.stream_headroom
    assert (streams["capacity"] >= 1) == (streams["speed"] >= headroom), streams
    fleet = (await queue.readings.queue()).streams_fleet
    assert fleet.capacity == streams["capacity"]
    assert fleet.below_realtime == (streams["capacity"] == 0)


async def test_espeaks_speed_counts_every_segment_made(
    settings: Settings, aredis: Redis, worker: WorkerProcess
) -> None:
    """eSpeak NG's stream speed is the audio it made per second busy, jobs that never finished
    included: a cancelled document spent engine time and made audio all the same, and must not
    read as a device below real time."""
    queue = Queue(aredis, settings)
    long_text = "A document read for a while and then cancelled by its client. " * 300
    submitted = await queue.enqueue(SynthesisRequest(text=long_text, voice="en_male"), "key-a")
    deadline = time.monotonic() + 30
    while (job := await queue.get(submitted.job_id)) and job.segments_done < 3:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await queue.cancel(submitted.job_id, "key-a")
    await wait_terminal(queue, submitted.job_id, timeout=30)
    streams = await streams_beat(aredis, queue, worker.name, 0)
    assert streams["speed"] is not None and streams["speed"] > 10, streams
    assert streams["capacity"] >= 1
    assert "below the" not in worker.log()
