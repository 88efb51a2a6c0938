"""The voice-agent plugins themselves against the ElevenLabs-compatible WebSocket and HTTP API:
LiveKit's `livekit-plugins-elevenlabs` (its TTS stream, several at once on its one socket, its
`synthesize()` and voices) and Pipecat's ElevenLabsTTSService and ElevenLabsHttpTTSService
(through Pipecat's own test harness), each with a base URL and a key."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from tests.conftest import ClientFactory, WorkerProcess

# Pipecat imports audioop (deprecated in Python 3.11, gone in 3.13) for its audio utilities.
pytestmark = pytest.mark.filterwarnings("ignore:'audioop' is deprecated:DeprecationWarning")
Client = TestClient[Any, Any]
KEY = "k-agent"
TURNS = "Hello there, this is a test. Hello there, friend. How are you? Fine"
LIVEKIT_TEXT = ("Hello there, this is a test. ", "Second sentence here.")


def _port(client: Client) -> int:
    port = client.server.port
    assert port is not None
    return port


async def _livekit_turn(tts: Any, pieces: tuple[str, ...]) -> tuple[bytes, set[int], list[Any]]:
    """One stream (one context): its PCM, sample rates and timed words."""
    stream = tts.stream()
    for piece in pieces:
        stream.push_text(piece)
    stream.flush()
    stream.end_input()
    pcm, rates, words = bytearray(), set(), []
    async with asyncio.timeout(60):
        async for event in stream:
            pcm += event.frame.data.tobytes()
            rates.add(event.frame.sample_rate)
            words += event.frame.userdata.get("lk.timed_transcripts") or []
    await stream.aclose()
    return bytes(pcm), rates, words


async def test_livekit_synthesize_and_its_voices(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """LiveKit's HTTP side: `synthesize()` (ElevenLabs' `/stream` route) and `list_voices()`."""
    elevenlabs = pytest.importorskip("livekit.plugins.elevenlabs")
    client = await make_client(api_keys=KEY)
    pcm, rates = bytearray(), set()
    async with aiohttp.ClientSession() as http:
        tts = elevenlabs.TTS(
            base_url=f"http://127.0.0.1:{_port(client)}/v1",
            api_key=KEY,
            voice_id="en_male",
            model="eleven_flash_v2_5",
            encoding="pcm_24000",
            http_session=http,
        )
        voices = await tts.list_voices()
        async with asyncio.timeout(60):
            async for event in tts.synthesize(LIVEKIT_TEXT[0]):
                pcm += event.frame.data.tobytes()
                rates.add(event.frame.sample_rate)
        await tts.aclose()
    assert {"en_female", "en_male"} <= {voice.id for voice in voices}
    assert {voice.category for voice in voices} <= {"premade", "cloned"}
    assert rates == {24_000} and len(pcm) / 2 / 24_000 > 1.0


@pytest.mark.parametrize(("encoding", "rate"), [("pcm_16000", 16000), ("mp3_22050_32", 22050)])
async def test_livekit_plugin(
    make_client: ClientFactory, worker: WorkerProcess, encoding: str, rate: int
) -> None:
    elevenlabs = pytest.importorskip("livekit.plugins.elevenlabs")
    client = await make_client(api_keys=KEY)
    async with aiohttp.ClientSession() as http:
        tts = elevenlabs.TTS(
            base_url=f"http://127.0.0.1:{_port(client)}/v1",
            api_key=KEY,
            voice_id="EXAVITQu4vr4xnSDxMaL",  # an ElevenLabs id: our default voice reads it
            model="eleven_flash_v2_5",
            encoding=encoding,
            http_session=http,
        )
        other = ("Meanwhile, a second turn speaks. ", "It shares the socket.")
        (pcm, rates, words), (pcm2, _, words2) = await asyncio.gather(
            _livekit_turn(tts, LIVEKIT_TEXT), _livekit_turn(tts, other)
        )
        await tts.aclose()
    assert rates == {rate}
    for audio, timed, text in ((pcm, words, LIVEKIT_TEXT), (pcm2, words2, other)):
        seconds = len(audio) / 2 / rate
        assert seconds > 1.0
        assert "".join(str(w) for w in timed).split() == "".join(text).split()
        starts = [w.start_time for w in timed]
        assert starts == sorted(starts) and starts[0] < 0.2  # the context's own clock
        assert timed[-1].end_time <= seconds + 0.2  # every word within its audio
        assert timed[-1].end_time > seconds * 0.7


async def test_livekit_plugin_error(make_client: ClientFactory, worker: WorkerProcess) -> None:
    """A refusal reaches the agent as the plugin's own error."""
    elevenlabs = pytest.importorskip("livekit.plugins.elevenlabs")
    agents = pytest.importorskip("livekit.agents")
    client = await make_client(live_message_chars=20)
    async with aiohttp.ClientSession() as http:
        tts = elevenlabs.TTS(
            base_url=f"http://127.0.0.1:{_port(client)}/v1",
            api_key="unused",
            encoding="pcm_24000",
            http_session=http,
        )
        stream = tts.stream(conn_options=agents.APIConnectOptions(max_retry=0, timeout=5))
        stream.push_text("This sentence is longer than the twenty characters allowed. ")
        stream.end_input()
        with pytest.raises(agents.APIError):
            async for _ in stream:
                pass
        await stream.aclose()
        await tts.aclose()


async def _pipecat(client: Client, frames: list[Any], sample_rate: int) -> tuple[Any, Any]:
    elevenlabs = pytest.importorskip("pipecat.services.elevenlabs.tts")
    harness = pytest.importorskip("pipecat.tests.utils")
    tts = elevenlabs.ElevenLabsTTSService(
        api_key=KEY,
        url=f"ws://127.0.0.1:{_port(client)}",
        sample_rate=sample_rate,
        settings=elevenlabs.ElevenLabsTTSService.Settings(voice="en_female", speed=1.1),
    )
    down, up = await harness.run_test(tts, frames_to_send=[*frames, harness.SleepFrame(sleep=3)])
    return down, up


async def test_pipecat_sentences(make_client: ClientFactory, worker: WorkerProcess) -> None:
    """A whole turn (TTSSpeakFrame), then an LLM's tokens: audio at the pipeline's rate, each
    word's frame in order and within the audio, TTSStoppedFrame per turn (on isFinal)."""
    frames_module = pytest.importorskip("pipecat.frames.frames")
    client = await make_client(api_keys=KEY)
    tokens = ["Hello", " there", ",", " friend", ".", " How", " are", " you", "?", " Fine"]
    sent = [
        frames_module.TTSSpeakFrame("Hello there, this is a test."),
        frames_module.LLMFullResponseStartFrame(),
        *[frames_module.LLMTextFrame(token) for token in tokens],
        frames_module.LLMFullResponseEndFrame(),
    ]
    down, up = await _pipecat(client, sent, 16000)
    audio = [f for f in down if isinstance(f, frames_module.TTSAudioRawFrame)]
    assert audio and {f.sample_rate for f in audio} == {16000}
    seconds = sum(len(f.audio) for f in audio) / 2 / 16000
    assert seconds > 1.5
    assert sum(isinstance(f, frames_module.TTSStoppedFrame) for f in down) == 2
    words = [f for f in down if isinstance(f, frames_module.TTSTextFrame)]
    spoken = " ".join(f.text for f in words)
    assert spoken.split() == TURNS.split()
    times = [f.pts for f in words]
    assert times == sorted(times)
    assert (times[-1] - times[0]) / 1e9 < seconds
    assert not [f for f in up if isinstance(f, frames_module.ErrorFrame)]


async def test_pipecat_tokens(client: Client, worker: WorkerProcess) -> None:
    """Token aggregation (auto_mode=false): tokens verbatim, spoken once flushed."""
    frames_module = pytest.importorskip("pipecat.frames.frames")
    elevenlabs = pytest.importorskip("pipecat.services.elevenlabs.tts")
    harness = pytest.importorskip("pipecat.tests.utils")
    aggregation = pytest.importorskip("pipecat.services.tts_service")
    tts = elevenlabs.ElevenLabsTTSService(
        api_key="unused",
        url=f"ws://127.0.0.1:{_port(client)}",
        sample_rate=24000,
        text_aggregation_mode=aggregation.TextAggregationMode.TOKEN,
        settings=elevenlabs.ElevenLabsTTSService.Settings(voice="None"),
    )
    tokens = ["Hel", "lo", " there", ",", " friend", ".", " Bye", " now", "."]
    sent = [
        frames_module.LLMFullResponseStartFrame(),
        *[frames_module.LLMTextFrame(token) for token in tokens],
        frames_module.LLMFullResponseEndFrame(),
        harness.SleepFrame(sleep=3),
    ]
    down, _ = await harness.run_test(tts, frames_to_send=sent)
    audio = b"".join(f.audio for f in down if isinstance(f, frames_module.TTSAudioRawFrame))
    assert len(audio) / 2 / 24000 > 1.0
    assert any(isinstance(f, frames_module.TTSStoppedFrame) for f in down)


async def test_pipecat_http_service(make_client: ClientFactory, worker: WorkerProcess) -> None:
    """Pipecat's ElevenLabsHttpTTSService: ElevenLabs' `/stream/with-timestamps` route, a turn's
    audio at the pipeline's rate and its words in order within it."""
    frames_module = pytest.importorskip("pipecat.frames.frames")
    elevenlabs = pytest.importorskip("pipecat.services.elevenlabs.tts")
    harness = pytest.importorskip("pipecat.tests.utils")
    client = await make_client(api_keys=KEY)
    async with aiohttp.ClientSession() as http:
        tts = elevenlabs.ElevenLabsHttpTTSService(
            api_key=KEY,
            aiohttp_session=http,
            base_url=f"http://127.0.0.1:{_port(client)}",
            sample_rate=16000,
            settings=elevenlabs.ElevenLabsHttpTTSSettings(voice="en_male"),
        )
        sent = [frames_module.TTSSpeakFrame(LIVEKIT_TEXT[0]), harness.SleepFrame(3)]
        down, up = await harness.run_test(tts, frames_to_send=sent)
    audio = [f for f in down if isinstance(f, frames_module.TTSAudioRawFrame)]
    assert audio and {f.sample_rate for f in audio} == {16000}
    seconds = sum(len(f.audio) for f in audio) / 2 / 16000
    assert seconds > 1.0
    words = [f.text for f in down if isinstance(f, frames_module.TTSTextFrame)]
    assert " ".join(words).split() == LIVEKIT_TEXT[0].split()
    assert not [f for f in up if isinstance(f, frames_module.ErrorFrame)]
