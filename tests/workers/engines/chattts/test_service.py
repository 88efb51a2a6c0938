"""ChatTTS through the whole service: real Redis, real worker processes, real HTTP and SSE.

Two worker processes (started once for the module through the production command, on the tiny
random-weight checkpoint) serve every test: one on the module's main queue, one with injected
out-of-memory faults on a queue of its own. Tests run one after another and each waits for its
own jobs to end, so they share the queue safely; assertions on the workers' heartbeat counters
compare before and after.
"""

from __future__ import annotations

import asyncio
import io
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest
import soundfile as sf

from core.voices.chattts import validate_voice_data
from tests.conftest import WorkerProcess
from tests.support.files import link_copy
from tests.support.metrics import scrape, value
from tests.web.conftest import sse_events, submit, wait_job
from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.chattts.service import (
    RECEPTIVE_SAMPLES,
    SENTENCE,
    TERMINAL,
    TEXTS,
    WORKER_ENV,
    Client,
    MakeClient,
    Service,
    audio_of,
    decode,
    encode_embedding,
    heartbeat,
    heartbeat_after,
    run_alone,
    run_together,
)

pytestmark = [pytest.mark.chattts, requires_chattts]

# -- tests --------------------------------------------------------------------------------------


async def test_jobs_submitted_together_share_the_runtimes_steps(
    client: Client, service: Service
) -> None:
    before = await heartbeat(client, service.worker)
    _, metrics_before = await scrape(service.metrics_port)
    requests = [{"text": t, "seed": 100 + i, "cache": False} for i, t in enumerate(TEXTS)]
    jobs = await run_together(client, requests)
    assert [j["state"] for j in jobs] == ["succeeded"] * len(TEXTS), jobs
    after = await heartbeat_after(client, service.worker, before["jobs_succeeded"] + len(TEXTS))
    stats = after["engine_stats"], before["engine_stats"]
    # Continuous batching: one row per segment, rows of different jobs advanced by one step.
    assert (
        stats[0]["runtime_rows"] - stats[1]["runtime_rows"]
        == after["segments"] - before["segments"]
    )
    assert stats[0]["runtime_shared_steps"] > stats[1]["runtime_shared_steps"], after
    assert after["batch_jobs_max"] >= 2, after
    # A "batch" is a busy period of the engine: jobs submitted together share one (or a few).
    assert after["batches"] - before["batches"] < len(TEXTS)
    # The worker's /metrics saw the same batches; each job's synthesis time is its share of them.
    _, metrics_after = await scrape(service.metrics_port)

    def moved(name: str, **labels: str) -> float:
        return value(metrics_after, name, **labels) - value(metrics_before, name, **labels)

    batches = after["batches"] - before["batches"]
    assert moved("chattts_worker_batch_jobs_count") == batches
    assert moved("chattts_worker_batch_jobs_bucket", le="1.0") < batches  # some had 2+ jobs
    assert moved("chattts_worker_batch_segments_sum") == after["segments"] - before["segments"]
    assert moved("chattts_worker_jobs_total", outcome="succeeded") == len(TEXTS)
    assert moved("chattts_worker_synthesis_seconds_count") == len(TEXTS)
    busy_s = after["busy_s"] - before["busy_s"]
    assert abs(moved("chattts_worker_synthesis_seconds_sum") - busy_s) < 0.01
    assert moved("chattts_worker_real_time_factor_count") == len(TEXTS)


async def test_each_batched_row_is_trimmed_to_its_own_length(
    client: Client, service: Service
) -> None:
    requests = [
        {"text": t, "voice": "zh_male", "seed": 200 + i, "cache": False}
        for i, t in enumerate(TEXTS)
    ]
    before = await heartbeat(client, service.worker)
    together = [decode(await audio_of(client, j)) for j in await run_together(client, requests)]
    after = await heartbeat_after(client, service.worker, before["jobs_succeeded"] + len(TEXTS))
    assert after["batches"] - before["batches"] < len(TEXTS), "no job was batched with another"
    assert len({a.size for a in together}) > 1, "rows should end at different lengths"
    for request, batched in zip(requests, together, strict=True):
        alone = decode(await audio_of(client, await run_alone(client, request)))
        # Same length: no tail decoded from another row's padding. Same samples, except where
        # the decoders saw that padding (right before the row's end).
        assert batched.size == alone.size
        keep = max(0, alone.size - RECEPTIVE_SAMPLES)
        np.testing.assert_allclose(batched[:keep], alone[:keep], atol=3e-4)


async def test_same_seed_same_audio_other_seed_other_audio(client: Client) -> None:
    request = {"text": "Hello world. 今天天气很好。", "voice": "en_female", "cache": False}
    first = await audio_of(client, await run_alone(client, {**request, "seed": 42}))
    again = await audio_of(client, await run_alone(client, {**request, "seed": 42}))
    other = await audio_of(client, await run_alone(client, {**request, "seed": 43}))
    assert first == again
    assert first != other


async def test_registered_voices_speak_until_deleted(client: Client) -> None:
    values = np.random.default_rng(7).normal(0.0, 0.5, 768)
    embedding = encode_embedding(values)
    assert validate_voice_data(embedding) == "embedding"
    response = await client.post("/v1/voices", json={"name": "svc-emb", "embedding": embedding})
    assert response.status == 201, await response.text()

    t = np.arange(16_000 * 2) / 16_000
    wav = io.BytesIO()
    sf.write(wav, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16_000, format="WAV")
    form = aiohttp.FormData()
    form.add_field("name", "svc-rec")
    form.add_field("transcript", "这是我的声音")
    form.add_field("audio", wav.getvalue(), filename="me.wav", content_type="audio/wav")
    response = await client.post("/v1/voices", data=form)
    assert response.status == 201, await response.text()

    request = {"text": "你好世界。", "seed": 9, "cache": False}
    builtin = await audio_of(client, await run_alone(client, request))
    for voice in ("svc-emb", "svc-rec"):  # the recording is encoded by the worker on first use
        job = await run_alone(client, {**request, "voice": voice})
        assert job["state"] == "succeeded" and job["voice"] == voice, job
        assert await audio_of(client, job) != builtin
        assert (await client.delete(f"/v1/voices/{voice}")).status == 200
        refused = await client.post("/v1/tts/jobs", json={**request, "voice": voice})
        assert refused.status == 422
        assert (await refused.json())["error"]["code"] == "unknown_voice"


async def test_text_chattts_cannot_speak_is_refused_at_submit(client: Client) -> None:
    response = await client.post("/v1/tts/jobs", json={"text": "Привет, мир!"})
    body = await response.json()
    assert response.status == 422, body
    assert body["error"]["code"] == "text_not_speakable" and "ChatTTS" in body["error"]["message"]


async def test_control_tokens_prompt_and_normalize_through_the_service(client: Client) -> None:
    """Tokens and a sentence prompt are spoken by the worker; unknown ones and digits that only
    our spelling would have made speakable are refused at submit."""
    request = {"text": "你好[laugh]世界[uv_break]。", "seed": 4, "cache": False}
    plain = await run_alone(client, request)
    styled = await run_alone(
        client, {**request, "refine": True, "prompt": "[oral_2][laugh_0][break_6]"}
    )
    assert decode(await audio_of(client, plain)).size > 0
    assert decode(await audio_of(client, styled)).size > 0
    for payload, code in (
        ({"text": "你好[cough]"}, "unknown_control_token"),
        ({"text": "123", "normalize": False}, "text_not_speakable"),
    ):
        response = await client.post("/v1/tts/jobs", json=payload)
        body = await response.json()
        assert response.status == 422 and body["error"]["code"] == code, body
    spelled = await run_alone(client, {"text": "123", "seed": 1, "cache": False})
    assert spelled["state"] == "succeeded", spelled


async def test_segments_are_announced_in_order_and_playable_before_the_end(
    client: Client,
) -> None:
    job = await submit(client, text=SENTENCE * 60, voice="en_male", seed=5, cache=False)
    response = await client.get(job["events_url"])
    progress: list[dict[str, Any]] = []
    types: list[str] = []
    async with asyncio.timeout(60):
        async for event in sse_events(response):
            types.append(event.event)
            if event.event != "progress":
                continue
            progress.append(event.json()["segment"])
            if len(progress) == 1:  # the first segment is out: fetch it while the job runs
                segment = await client.get(f"{job['status_url']}/segments/1")
                assert segment.status == 200, await segment.text()
                first = decode(await segment.read())
                assert first.size > 0
                status = await (await client.get(job["status_url"])).json()
                assert status["state"] == "running", status
    total = progress[0]["total"]
    assert total >= 6
    assert [p["index"] for p in progress] == list(range(1, total + 1))
    assert all(p["total"] == total for p in progress)
    assert types[-1] == "succeeded" and types.index("progress") < types.index("succeeded")
    final = decode(await audio_of(client, await wait_job(client, job["id"], ("succeeded",))))
    assert final.size > sum(round(p["duration_s"] * 24_000) for p in progress) - total


async def test_out_of_memory_splits_the_batch_and_every_job_succeeds(
    make_client: MakeClient, service: Service
) -> None:
    client = await make_client(service.oom_settings)
    before = await heartbeat(client, service.oom_worker)
    # Two segments per job (191 + 17 characters): even a job alone is a batch of two rows.
    text = SENTENCE * 3 + "Another sentence."
    requests = [{"text": text, "voice": "en_male", "seed": i, "cache": False} for i in range(3)]
    jobs = await run_together(client, requests)
    assert [j["state"] for j in jobs] == ["succeeded"] * 3, jobs
    assert all(j["segments_total"] == 2 for j in jobs), jobs
    after = await heartbeat_after(client, service.oom_worker, before["jobs_succeeded"] + 3)
    assert after["batch_jobs_max"] >= 2, after  # jobs were batched together, then split
    shrinks = "runtime_oom_shrinks"  # the decode runtime ran fewer rows at once from then on
    assert after["engine_stats"][shrinks] > before["engine_stats"][shrinks], after
    assert after["engine_stats"]["runtime_max_rows"] == 1, after
    assert after["jobs_failed"] == before["jobs_failed"]
    assert "out of memory with 2 rows: at most 1 rows" in service.oom_worker.log()


async def test_cancel_a_running_job_others_complete(client: Client) -> None:
    await client.get("/healthz")  # the identity cookie first: both jobs are this client's
    long, other = await asyncio.gather(
        submit(client, text=SENTENCE * 60, voice="en_male", seed=1, cache=False),
        submit(client, text=SENTENCE * 24, voice="en_male", seed=2, cache=False),
    )
    events = await client.get(long["events_url"])
    async with asyncio.timeout(60):
        async for event in sse_events(events):
            if event.event == "progress":
                break
    cancel = await client.delete(long["status_url"])
    assert cancel.status == 202 and (await cancel.json())["state"] == "cancelling"
    cancelled = await wait_job(client, long["id"], TERMINAL, timeout=60)
    assert cancelled["state"] == "cancelled", cancelled
    assert 1 <= cancelled["segments_done"] < cancelled["segments_total"], cancelled
    done = await wait_job(client, other["id"], TERMINAL, timeout=60)
    assert done["state"] == "succeeded", done
    assert done["segments_done"] == done["segments_total"] >= 6
    assert decode(await audio_of(client, done)).size > 0


def test_worker_with_a_missing_checkpoint_file_exits_and_names_it(
    service: Service, tiny_checkpoint: Path, tmp_path: Path
) -> None:
    missing = "asset/Vocos.safetensors"
    model = link_copy(tiny_checkpoint, tmp_path / "model", skip=missing)
    settings = service.settings.replace(queue=f"m{uuid.uuid4().hex[:10]}", model_dir=str(model))
    worker = WorkerProcess(settings, "chattts-broken", tmp_path / "broken.log", **WORKER_ENV)
    try:
        code = worker.process.wait(timeout=90)
    finally:
        worker.stop()
    log = worker.log_path.read_text(errors="replace")
    assert code != 0, log
    assert f"missing: {model / missing}" in log, log
