"""The ChatTTS service the service tests run against: two real worker processes (the production
command, the tiny checkpoint) on their own queues, started once per test module, and helpers."""

from __future__ import annotations

import asyncio
import io
import lzma
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from aiohttp.test_utils import TestClient

from core.infra.embedded_redis import free_port
from core.infra.settings import Settings
from tests.conftest import FAST, WorkerProcess
from tests.web.conftest import submit, wait_job
from web.app import create_app
from web.appkeys import QUEUE

Client = TestClient[Any, Any]
MakeClient = Callable[[Settings], Awaitable[Client]]
MAX_BATCH = 4
# OpenMP threads of two worker processes fighting over two cores cost more than they give. The
# service tests assert batching and streaming (a stream's segments side by side, a late job
# joining them), not admission by capacity, which tests/workers/test_streams.py asserts.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "CHATTTS_STREAM_ADMISSION": "off"}
# Long enough that jobs submitted together are in the worker's hands at the same time.
BATCH_WAIT_MS = 300
# The decoders' reach (in samples) around a frame: a row decoded next to padding differs from
# its solo decode only this close to its end (see test_engine.py).
RECEPTIVE_SAMPLES = 16 * 256
TEXTS = ["你好世界。", "今天天气很好。", "我们欢迎你。", "欢迎使用语音合成。"]
SENTENCE = "This sentence is one of several that make a long text to speak. "
TERMINAL = ("succeeded", "failed", "cancelled", "dead")


@dataclass
class Service:
    settings: Settings  # the main queue, served by `worker`
    oom_settings: Settings  # a queue of its own, served by `oom_worker`
    worker: WorkerProcess
    oom_worker: WorkerProcess
    metrics_port: int  # `worker`'s Prometheus /metrics


def _settings(redis_url: str, model_dir: Path, data_dir: Path) -> Settings:
    return Settings.of(
        redis_url=redis_url,
        queue=f"c{uuid.uuid4().hex[:10]}",
        engine="chattts",
        device="cpu",
        model_dir=str(model_dir),
        data_dir=str(data_dir),
        **{**FAST, "batch_wait_ms": BATCH_WAIT_MS},  # type: ignore[arg-type]
        max_batch=MAX_BATCH,
        dtype="float32",  # rows batched and alone are compared sample for sample
    )


@pytest.fixture(scope="module")
def service(
    redis_url: str, tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    logs = tmp_path_factory.mktemp("service")
    settings = _settings(redis_url, tiny_checkpoint, logs)
    oom_settings = settings.replace(queue=f"o{uuid.uuid4().hex[:10]}")
    metrics_port = free_port()
    worker = WorkerProcess(
        settings,
        "chattts-main",
        logs / "main.log",
        **WORKER_ENV,
        CHATTTS_WORKER_METRICS_PORT=str(metrics_port),
    )
    oom_worker = WorkerProcess(
        oom_settings,
        "chattts-oom",
        logs / "oom.log",
        **WORKER_ENV,
        CHATTTS_FAULT_OOM_ABOVE_BATCH="1",
    )
    try:  # both start at once: their imports and warm-ups overlap
        worker.wait_ready(120)
        oom_worker.wait_ready(120)
        yield Service(settings, oom_settings, worker, oom_worker, metrics_port)
    finally:
        for process in (worker, oom_worker):  # both stop at once, then each is waited for
            if process.process.poll() is None:
                process.process.terminate()
        for process in (worker, oom_worker):
            process.stop()


@pytest.fixture
async def make_client(aiohttp_client: Any) -> MakeClient:
    async def make(settings: Settings) -> Client:
        client: Client = await aiohttp_client(create_app(settings))
        return client

    return make


@pytest.fixture
async def client(make_client: MakeClient, service: Service) -> Client:
    return await make_client(service.settings)


# -- helpers ------------------------------------------------------------------------------------


async def heartbeat(client: Client, worker: WorkerProcess) -> dict[str, Any]:
    queue = client.app[QUEUE]
    beat = await queue.fleet.heartbeat(worker.name)
    assert beat is not None, f"worker {worker.name} has no heartbeat: {worker.log()}"
    return beat


async def heartbeat_after(
    client: Client, worker: WorkerProcess, succeeded: int, timeout: float = 10.0
) -> dict[str, Any]:
    """The first heartbeat that counts at least `succeeded` jobs (it lags by a period)."""
    deadline = time.monotonic() + timeout
    while True:
        beat = await heartbeat(client, worker)
        if beat["jobs_succeeded"] >= succeeded:
            return beat
        assert time.monotonic() < deadline, beat
        await asyncio.sleep(0.05)


async def run_together(client: Client, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Submit all at once, wait for all; their final snapshots."""
    jobs = await asyncio.gather(*(submit(client, **r) for r in requests))
    return [await wait_job(client, job["id"], TERMINAL, timeout=60) for job in jobs]


async def run_alone(client: Client, request: dict[str, Any]) -> dict[str, Any]:
    job = await submit(client, **request)
    return await wait_job(client, job["id"], TERMINAL, timeout=60)


async def audio_of(client: Client, job: dict[str, Any]) -> bytes:
    assert job["state"] == "succeeded", job
    response = await client.get(f"/v1/tts/jobs/{job['id']}/audio")
    assert response.status == 200
    return await response.read()


def decode(data: bytes) -> np.ndarray:
    samples, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == 24_000 and samples.ndim == 1
    out: np.ndarray = samples
    return out


def encode_embedding(values: np.ndarray) -> str:
    """A ChatTTS speaker-embedding string, encoded as `Speaker._encode` does."""
    import pybase16384  # type: ignore[import-untyped]

    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
    raw = lzma.compress(values.astype(np.float16).tobytes(), lzma.FORMAT_RAW, filters=filters)
    text: str = pybase16384.encode_to_string(raw)
    return text
