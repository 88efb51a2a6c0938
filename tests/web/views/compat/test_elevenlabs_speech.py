"""ElevenLabs' text-to-speech HTTP API through ElevenLabs' own Python SDK (`elevenlabs`), against
the real service and a real worker: each call's audio decoded, its timestamps read."""

from __future__ import annotations

import base64
import io
from typing import Any

import av
import numpy as np
import orjson
import pytest
from aiohttp.test_utils import TestClient
from elevenlabs import AsyncElevenLabs
from elevenlabs.core.api_error import ApiError as ElevenLabsError

from tests.conftest import ClientFactory, WorkerProcess
from web.appkeys import MEMORY

Client = TestClient[Any, Any]
TEXT = "Hello there, this is a test of the speech API."
VOICE_ID = "21m00Tcm4TlvDq8ikWAM"  # one of ElevenLabs' own ids, as agents carry them


def sdk(client: Client, key: str = "sk-test") -> AsyncElevenLabs:
    return AsyncElevenLabs(base_url=str(client.make_url("")).rstrip("/"), api_key=key)


async def joined(chunks: Any) -> bytes:
    return b"".join([chunk async for chunk in chunks])


def mp3_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data), format="mp3") as container:
        frames = [frame.to_ndarray() for frame in container.decode(audio=0)]
        rate = container.streams.audio[0].sample_rate
    samples = np.concatenate(frames, axis=-1).reshape(-1).astype(np.float32)
    assert float(np.sqrt(np.mean(samples**2))) > 0.001  # speech, not silence
    return samples.size / rate


def pcm_seconds(data: bytes, rate: int) -> float:
    assert len(data) % 2 == 0
    samples = np.frombuffer(data, "<i2").astype(np.float32) / 32767
    assert float(np.sqrt(np.mean(samples**2))) > 0.01
    return samples.size / rate


async def test_convert_and_stream_as_the_sdk_reads_them(
    client: Client, worker: WorkerProcess
) -> None:
    api = sdk(client)
    whole = await joined(api.text_to_speech.convert(VOICE_ID, text=TEXT))  # mp3_44100_128
    assert 1.0 < mp3_seconds(whole) < 10.0
    streamed = await joined(
        api.text_to_speech.stream(VOICE_ID, text=TEXT, output_format="pcm_16000")
    )
    assert 1.0 < pcm_seconds(streamed, 16_000) < 10.0
    ulaw = await joined(api.text_to_speech.stream(VOICE_ID, text=TEXT, output_format="ulaw_8000"))
    # μ-law: a byte a sample, as long as the PCM at 8 kHz.
    assert abs(len(ulaw) / 8000 - len(streamed) / 2 / 16_000) < 0.05


async def test_the_same_seeded_request_the_same_audio(
    client: Client, worker: WorkerProcess
) -> None:
    api = sdk(client)
    call = {"text": "Seeded speech.", "seed": 4_000_000_000, "output_format": "pcm_24000"}
    first = await joined(api.text_to_speech.convert(VOICE_ID, **call))
    second = await joined(api.text_to_speech.convert(VOICE_ID, **call))
    assert first and first == second


async def test_timestamps_whole_and_streamed(client: Client, worker: WorkerProcess) -> None:
    api = sdk(client)
    timed = await api.text_to_speech.convert_with_timestamps(
        VOICE_ID, text=TEXT, output_format="pcm_22050"
    )
    audio = base64.b64decode(timed.audio_base_64)
    seconds = pcm_seconds(audio, 22_050)
    alignment = timed.alignment
    assert alignment is not None
    assert "".join(alignment.characters).strip() == TEXT
    starts, ends = alignment.character_start_times_seconds, alignment.character_end_times_seconds
    assert starts == sorted(starts) and all(e >= s for s, e in zip(starts, ends, strict=True))
    assert 0 < ends[-1] <= seconds + 0.05
    chunks = [
        chunk
        async for chunk in api.text_to_speech.stream_with_timestamps(
            VOICE_ID, text=TEXT, output_format="pcm_22050"
        )
    ]
    assert chunks
    streamed = b"".join(base64.b64decode(chunk.audio_base_64 or "") for chunk in chunks)
    assert abs(len(streamed) - len(audio)) <= 4
    characters = [c for chunk in chunks if chunk.alignment for c in chunk.alignment.characters]
    assert "".join(characters).strip() == TEXT


async def test_refusals_reach_the_sdk(make_client: ClientFactory, worker: WorkerProcess) -> None:
    client = await make_client(api_keys="k-one")
    with pytest.raises(ElevenLabsError) as caught:
        await joined(sdk(client, "wrong").text_to_speech.convert(VOICE_ID, text=TEXT))
    assert caught.value.status_code == 401
    api = sdk(client, "k-one")  # xi-api-key, as the SDK sends it
    with pytest.raises(ElevenLabsError) as caught:
        await joined(api.text_to_speech.convert(VOICE_ID, text=TEXT, output_format="mp3_1_2"))
    assert caught.value.status_code == 422
    assert orjson.loads(orjson.dumps(caught.value.body))["error"]["param"] == "output_format"
    with pytest.raises(ElevenLabsError) as caught:
        await joined(api.text_to_speech.convert(VOICE_ID, text=""))
    assert caught.value.status_code == 422
    assert await joined(api.text_to_speech.convert(VOICE_ID, text=TEXT))


async def test_a_voice_of_ours_by_its_name_and_its_speed(
    client: Client, worker: WorkerProcess
) -> None:
    seconds = []
    for speed in (1.0, 2.0):
        response = await client.post(
            "/v1/text-to-speech/en_male/stream?output_format=pcm_24000",
            json={"text": TEXT, "voice_settings": {"speed": speed}, "model_id": "eleven_v3"},
        )
        assert response.status == 200
        seconds.append(pcm_seconds(await response.read(), 24_000))
        job = await (await client.get(f"/v1/tts/jobs/{response.headers['X-Job-Id']}")).json()
        assert job["voice"] == "en_male"
    assert seconds[1] < 0.8 * seconds[0]


async def test_a_timed_answer_counts_in_the_memory_budget(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """The whole answer with timestamps is gathered before it is sent: its bytes count in the
    address's budget as they come, past it the answer is refused, and all is given back."""
    client = await make_client(web_memory_per_address_bytes=200_000)
    path = f"/v1/text-to-speech/{VOICE_ID}/with-timestamps?output_format=pcm_48000"
    response = await client.post(path, json={"text": TEXT * 3})
    assert response.status in (429, 503), await response.text()
    assert (await response.json())["error"]["code"]
    assert client.app[MEMORY].held == 0
    response = await client.post(path.replace("pcm_48000", "pcm_8000"), json={"text": "Short."})
    assert response.status == 200
    assert client.app[MEMORY].held == 0


async def test_voices_as_the_sdk_lists_them(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """`voices.get_all()` with the key in `xi-api-key`, as the SDK sends it to /v1/voices."""
    client = await make_client(api_keys="k-one")
    listed = await sdk(client, "k-one").voices.get_all()
    by_id = {voice.voice_id: voice for voice in listed.voices}
    assert {"en_female", "zh_male"} <= set(by_id)
    english = by_id["en_female"]
    assert english.name == "en_female" and english.category == "premade"
    assert english.labels == {"language": "en-US", "gender": "female"}
    with pytest.raises(ElevenLabsError) as caught:
        await sdk(client, "wrong").voices.get_all()
    assert caught.value.status_code == 401


async def test_voices_searched_a_page_at_a_time(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """`voices.search()` (/v2/voices): found by name and labels, a page at a time, each page's
    token leading to the next until none is left."""
    client = await make_client(api_keys="k-one")
    api = sdk(client, "k-one").voices
    english = await api.search(search="en-us")
    assert english.voices and all(v.labels["language"] == "en-US" for v in english.voices)
    seen, token = [], None
    while True:
        page = await api.search(page_size=2, next_page_token=token, category="premade")
        assert len(page.voices) <= 2 and page.total_count >= len(english.voices)
        seen += [voice.voice_id for voice in page.voices]
        token = page.next_page_token
        assert page.has_more == (token is not None)
        if token is None:
            break
    assert len(seen) == len(set(seen)) == page.total_count
    assert (await api.search(search="no such voice at all")).voices == []
    response = await client.get("/v2/voices?page_size=101", headers={"xi-api-key": "k-one"})
    assert response.status == 400 and (await response.json())["error"]["param"] == "page_size"
