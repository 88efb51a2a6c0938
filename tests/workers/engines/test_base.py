"""The engine boundary: a second model written against the protocol alone (tone.py), named by
`CHATTTS_ENGINE`, runs in a real worker behind the real web tier, which reads its capabilities,
never its name."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import soundfile as sf

from core.voices.chattts import builtin_embeddings
from tests.conftest import ClientFactory, WorkerProcess
from tests.web.conftest import submit, wait_job
from tests.workers.engines.tone import WORD_S
from workers.engines import ENGINES

TONE = "tests.workers.engines.tone"


async def test_a_second_model_is_one_module_behind_the_boundary(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    assert TONE not in ENGINES.values()  # registered nowhere: the setting names its module
    start_worker(CHATTTS_ENGINE=TONE)
    client = await make_client()

    text = "One two three four. Five six seven."
    job = await submit(client, text=text, voice="en_male", format="wav")
    done = await wait_job(client, job["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done
    wav = await (await client.get(f"/v1/tts/jobs/{job['id']}/audio")).read()
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    spoken = len(text.split()) * WORD_S * 1.1  # seven tones, each with its pause
    assert rate == 24_000 and spoken <= samples.size / rate <= spoken + 1.0
    # Its word times (alignment, one of its capabilities) place each word in the subtitles.
    vtt = await (await client.get(f"/v1/tts/jobs/{job['id']}/subtitles?format=vtt")).text()
    assert "Five" in vtt

    streamed = await submit(client, text=text * 3, voice="en_female", stream=True)
    response = await client.get(f"/v1/tts/jobs/{streamed['id']}/stream")
    pcm = await response.read()
    assert response.status == 200 and np.abs(np.frombuffer(pcm, "<i2")).max() > 1000
    await wait_job(client, streamed["id"], ("succeeded",))

    listed = await (await client.get("/v1/voices")).json()
    [engine] = listed["engines"]
    assert engine["name"] == "tone" and engine["model_version"] == "tone-1"
    assert engine["capabilities"]["streaming"] == "chunks"
    assert engine["capabilities"]["registered_voices"] is False


async def test_the_web_tier_reads_capabilities_not_names(
    make_client: ClientFactory, start_worker: Callable[..., WorkerProcess]
) -> None:
    """No live engine speaks registered voices: a job in one is refused at submit, whatever
    the engine is called; text ChatTTS's normalizer would drop is not refused, since no live
    engine reads through it."""
    start_worker(CHATTTS_ENGINE=TONE)
    client = await make_client()
    voice = {"name": "narrator-t", "embedding": builtin_embeddings()["en_male_2"]}
    assert (await client.post("/v1/voices", json=voice)).status == 201
    response = await client.post("/v1/tts/jobs", json={"text": "Hello.", "voice": "narrator-t"})
    body: dict[str, Any] = await response.json()
    assert response.status == 422 and body["error"]["code"] == "voice_needs_chattts", body
    assert "tone" in body["error"]["message"]
    await submit(client, text="Привет, мир", voice="en_male")  # ChatTTS would refuse it
