"""The clients of bench.live, one simulated LLM answer each, sent three ways: `whole` (one OpenAI
streamed request after the last token), `per-sentence` (one request per sentence as it ends,
played in order) and `live` (our `/v1/live` session, text token by token); the first sentence
alone as one request (the reference); and a barge-in (`clear` while audio plays)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.lib.identities import cookie_header
from bench.lib.playback import underrun
from bench.lib.stats import BenchError
from bench.live_text import Answer

BYTES_PER_S = 24_000 * 2  # 16-bit mono PCM at 24 kHz
STALE_WAIT_S = 0.3  # after `cleared`: how long the listener watches for audio of the old text
TIMEOUT_S = 300.0


@dataclass
class Heard:
    """What one listener received: (arrival time, bytes) in play order, and its clock's marks."""

    start: float  # the token clock's zero
    first_sentence: float  # when the first sentence's last token was written
    last_token: float
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    sent: float | None = None  # the reference: when its request was sent

    def figures(self) -> dict[str, float]:
        """ms: first audio after the first sentence (after its request, for the reference),
        silence after playback started, the last audio byte and the end of playback after the
        last token; and seconds of audio."""
        if not self.arrivals:
            raise BenchError("a listener heard no audio")
        played = [(at, size / BYTES_PER_S) for at, size in self.arrivals]
        audio_s = sum(s for _, s in played)
        stalled = underrun(played)
        first = self.arrivals[0][0]
        return {
            "first_audio_ms": 1000 * (first - (self.sent or self.first_sentence)),
            "underrun_ms": 1000 * stalled,
            "last_audio_ms": 1000 * (self.arrivals[-1][0] - self.last_token),
            "played_end_ms": 1000 * (first + audio_s + stalled - self.last_token),
            "audio_s": audio_s,
        }


def session() -> aiohttp.ClientSession:
    """One simulated user: its own identity (a signed cookie), its own connections."""
    return aiohttp.ClientSession(
        headers=cookie_header(f"live-{uuid.uuid4().hex}"),
        timeout=aiohttp.ClientTimeout(total=TIMEOUT_S, sock_connect=10),
    )


def clock(answer: Answer, start: float) -> Heard:
    return Heard(start, start + answer.sentence_end(0), start + answer.last)


async def until(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def speech(
    http: aiohttp.ClientSession, url: str, text: str, voice: str, seed: int
) -> AsyncIterator[tuple[float, int]]:
    """One OpenAI streamed request (pcm): (arrival time, bytes) of each piece of its audio."""
    body = {
        "model": "tts-1",
        "input": text,
        "voice": voice,
        "response_format": "pcm",
        "stream_format": "audio",
        "seed": seed,
        "cache": False,
    }
    async with http.post(f"{url}/v1/audio/speech", json=body) as response:
        if response.status != 200:
            raise BenchError(f"speech: HTTP {response.status}: {await response.text()}")
        async for piece in response.content.iter_any():
            if piece:
                yield time.perf_counter(), len(piece)


async def whole(url: str, answer: Answer, voice: str, seed: int, start: float) -> Heard:
    """The whole answer as one streamed request, sent once its last token is written."""
    heard = clock(answer, start)
    async with session() as http:
        await until(heard.last_token)
        async for arrival in speech(http, url, answer.text, voice, seed):
            heard.arrivals.append(arrival)
    return heard


async def per_sentence(url: str, answer: Answer, voice: str, seed: int, start: float) -> Heard:
    """One streamed request per sentence, each sent as its sentence's last token is written;
    the listener plays them in order: a piece plays once every earlier request has all come."""
    heard = clock(answer, start)

    async def one(http: aiohttp.ClientSession, s: int) -> list[tuple[float, int]]:
        await until(start + answer.sentence_end(s))
        return [arrival async for arrival in speech(http, url, answer.sentences[s], voice, seed)]

    async with session() as http:
        parts = await asyncio.gather(*(one(http, s) for s in range(len(answer.sentences))))
    ready = 0.0  # when every earlier request had all come
    for part in parts:
        if not part:
            raise BenchError("a sentence's request brought no audio")
        heard.arrivals += [(max(at, ready), size) for at, size in part]
        ready = max(ready, part[-1][0])
    return heard


async def reference(url: str, answer: Answer, voice: str, seed: int, start: float) -> Heard:
    """The first sentence alone as one streamed request, sent when its last token is written."""
    heard = clock(answer, start)
    async with session() as http:
        await until(heard.first_sentence)
        heard.sent = time.perf_counter()
        async for arrival in speech(http, url, answer.sentences[0], voice, seed):
            heard.arrivals.append(arrival)
    return heard


class LiveSocket:
    """One `/v1/live` connection with its context "main": frames read into `events` (type,
    arrival time, frame) and audio into `arrivals`, by a reader of its own."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[tuple[str, float, dict[str, Any]]] = []
        self.arrivals: list[tuple[float, int]] = []
        self.changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            now = time.perf_counter()
            if message.type == aiohttp.WSMsgType.BINARY:
                self.arrivals.append((now, len(message.data)))
            elif message.type == aiohttp.WSMsgType.TEXT:
                frame = message.json()
                self.events.append((frame.get("type", "?"), now, frame))
            self.changed.set()
        self.changed.set()

    async def wait_for(self, kind: str, timeout: float = TIMEOUT_S) -> float:
        """When the first frame of `kind` came (raises on an error frame or a closed socket)."""
        async with asyncio.timeout(timeout):
            while True:
                for name, at, frame in self.events:
                    if name == "error":
                        raise BenchError(f"live: error frame {frame}")
                    if name == kind:
                        return at
                if self._reader.done():
                    raise BenchError(f"live: closed ({self.ws.close_code}) before {kind!r}")
                self.changed.clear()
                await self.changed.wait()

    async def first_audio(self) -> float:
        async with asyncio.timeout(TIMEOUT_S):
            while not self.arrivals:
                if self._reader.done():
                    raise BenchError(f"live: closed ({self.ws.close_code}) before any audio")
                self.changed.clear()
                await self.changed.wait()
        return self.arrivals[0][0]

    async def send(self, op: str, **fields: Any) -> None:
        await self.ws.send_json({"op": op, **fields})

    async def stop(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def live_socket(url: str, voice: str, seed: int) -> AsyncIterator[LiveSocket]:
    """A connection with its context opened (before the answer's clock starts: a client opens
    while its LLM thinks)."""
    async with session() as http, http.ws_connect(f"{url.replace('http', 'ws', 1)}/v1/live") as ws:
        socket = LiveSocket(ws)
        try:
            await socket.send("open", voice=voice, seed=seed)
            await socket.wait_for("opened", 30)
            yield socket
        finally:
            await socket.stop()


async def live(socket: LiveSocket, answer: Answer, start: float) -> Heard:
    """The answer token by token, as written, then `close`; the audio until `done`."""
    heard = clock(answer, start)
    for k, (_, token) in enumerate(answer.tokens):
        await until(start + answer.at(k))
        await socket.send("text", text=token)
    await socket.send("close")
    await socket.wait_for("done")
    heard.arrivals = list(socket.arrivals)
    return heard


async def barge_in(socket: LiveSocket, answer: Answer, delay: float) -> dict[str, float]:
    """The whole answer at once; `delay` s after its first audio, `clear`: ms until the later of
    the `cleared` frame and the last audio frame of the old text; audio frames after `cleared`
    (none is right); whether the old text was still being spoken; then new text is spoken and
    the context closes."""
    await socket.send("text", text=answer.text, flush=True)
    await socket.first_audio()
    await asyncio.sleep(delay)
    cleared_at = time.perf_counter()
    spoken = sum(1 for kind, at, _ in socket.events if kind == "segment" and at <= cleared_at)
    await socket.send("clear")
    cleared = await socket.wait_for("cleared", 30)
    await asyncio.sleep(STALE_WAIT_S)
    old = [at for at, _ in socket.arrivals if at > cleared_at]
    stale = sum(1 for at in old if at > cleared)
    heard_before = len(socket.arrivals)
    await socket.send("text", text="Okay, stopping there.")
    await socket.send("close")
    await socket.wait_for("done")
    if len(socket.arrivals) == heard_before:
        raise BenchError("live: no audio for the text sent after `clear`")
    return {
        "barge_in_ms": 1000 * (max([cleared, *old]) - cleared_at),
        "cleared_ms": 1000 * (cleared - cleared_at),
        "stale_frames": stale,
        # 1: `clear` came before the old text's audio was all out (fewer segments than sentences)
        "mid_answer": float(spoken < len(answer.sentences)),
    }
