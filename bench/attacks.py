"""The attackers of `python -m bench.hostile`: each class of hostile client as a paced loop on
its own loopback address, run in a process of their own, and the tally of what they were told."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import io
import json
import lzma
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import numpy as np
import soundfile as sf

ATTACKERS = [f"127.0.0.{i}" for i in range(2, 10)]
EVIL = "https://evil.example"
# Iterations per second of each of the attack's loops (25: a few hundred requests a second).
LOOP_RATE = 25.0


def _b14(data: bytes) -> str:
    flat = np.unpackbits(np.frombuffer(data, np.uint8))
    rows = np.concatenate([flat, np.zeros(-len(flat) % 14, np.uint8)]).reshape(-1, 14)
    codes = np.packbits(np.pad(rows, ((0, 0), (2, 0))).ravel()).view(">u2") + 0x4E00
    rest = len(data) % 7
    return "".join(map(chr, codes.tolist())) + (chr(0x3D00 + rest) if rest else "")


def make_bombs() -> dict[str, Any]:
    compressor = lzma.LZMACompressor(
        format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 1}]
    )
    block = bytes(1 << 20)
    stream = b"".join(compressor.compress(block) for _ in range(128)) + compressor.flush()
    flac = io.BytesIO()
    sf.write(flac, np.zeros((96_000, 8), np.int16), 48_000, format="FLAC")
    return {
        "lzma": {"name": "bomb", "embedding": _b14(stream)},  # 128 MB once inflated
        "long": {"name": "long", "embedding": _b14(bytes(range(256)) * 2_600)},
        "flac": flac.getvalue(),
        # Characters that normalization drops, between spaces: once quadratic (14 s of the web
        # process's loop); a transcript is at most 500 characters now.
        "transcript": {"name": "dropped", "embedding": "x", "transcript": " ж" * 50_000},
    }


class Tally:
    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, int]] = collections.Counter()
        self.stalled = 0  # uploads opened and never finished

    def add(self, kind: str, status: int) -> None:
        self.counts[(kind, status)] += 1

    @property
    def server_errors(self) -> int:
        return sum(n for (_, status), n in self.counts.items() if status >= 500)


def session(address: str | None = None, jar: bool = False) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(local_addr=(address, 0) if address else None, limit=0)
    cookies = aiohttp.CookieJar(unsafe=True) if jar else aiohttp.DummyCookieJar()
    return aiohttp.ClientSession(
        connector=connector, cookie_jar=cookies, timeout=aiohttp.ClientTimeout(total=30)
    )


async def request(tally: Tally, kind: str, call: Awaitable[aiohttp.ClientResponse]) -> int:
    try:
        async with await call as response:
            await response.read()
            tally.add(kind, response.status)
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        tally.add(kind, 0)  # refused or cut: no answer
        return 0


async def attack(
    url: str,
    port: int,
    seconds: float,
    tally: Tally,
    bombs: dict[str, Any],
    rate: float,
    skip: frozenset[str] = frozenset(),
) -> None:
    stop = time.monotonic() + seconds
    streams: list[aiohttp.ClientResponse] = []
    held: list[asyncio.Task[None]] = []
    stalled: list[socket.socket] = []
    sockets: list[aiohttp.ClientWebSocketResponse] = []

    async def loop(address: str, body: Callable[[aiohttp.ClientSession], Awaitable[None]]) -> None:
        # Paced: the attack runs on the same cores as the server; unpaced, it would measure how
        # this machine shares its CPU, not what the server's guards do.
        async with session(address, jar=body in (churn, callback_churn)) as http:
            while time.monotonic() < stop:
                started = time.monotonic()
                await body(http)
                await asyncio.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))

    async def fresh_identities(http: aiohttp.ClientSession) -> None:
        await request(
            tally, "submit, new identity", http.post(f"{url}/v1/tts/jobs", json={"text": "Flood."})
        )

    async def churn(http: aiohttp.ClientSession) -> None:
        async with http.post(f"{url}/v1/tts/jobs", json={"text": "Never mind."}) as r:
            tally.add("submit then cancel", r.status)
            job = await r.json() if r.status == 202 else None
        if job:
            await request(tally, "cancel", http.delete(f"{url}/v1/tts/jobs/{job['id']}"))

    async def hold_open(http: aiohttp.ClientSession, kind: str, path: str) -> None:
        """Open a long answer and keep it, unread, until the attack ends."""
        try:
            response = await http.get(f"{url}{path}")
            tally.add(kind, response.status)
            if response.status == 200:
                streams.append(response)
            else:
                response.release()
        except aiohttp.ClientError:
            tally.add(kind, 0)

    async def open_streams(http: aiohttp.ClientSession) -> None:
        await hold_open(http, "event stream", "/v1/events")
        await asyncio.sleep(0.01)

    async def voice_bombs(http: aiohttp.ClientSession) -> None:
        for kind in ("lzma", "long"):
            data = json.dumps(bombs[kind], ensure_ascii=False).encode()
            headers = {"Content-Type": "application/json"}
            call = http.post(f"{url}/v1/voices", data=data, headers=headers)
            await request(tally, f"voice: {kind}", call)
        form = aiohttp.FormData({"name": "flac", "transcript": "hello"})
        form.add_field("audio", bombs["flac"], filename="a.flac", content_type="audio/flac")
        await request(tally, "voice: 8-channel flac", http.post(f"{url}/v1/voices", data=form))

    async def digits(http: aiohttp.ClientSession) -> None:
        call = http.post(f"{url}/v1/tts/jobs", json={"text": "1" * 4000})
        await request(tally, "4,000 digits", call)
        # What it tests is the web tier's normalizing (linear now). Each accepted one is also a
        # long job for the one worker: a flood of them is a backlog, not a guard's failure.
        await asyncio.sleep(1.0)

    async def dropped_characters(http: aiohttp.ClientSession) -> None:
        data = json.dumps(bombs["transcript"], ensure_ascii=False).encode()
        call = http.post(
            f"{url}/v1/voices", data=data, headers={"Content-Type": "application/json"}
        )
        await request(tally, "voice: 100k-char transcript", call)

    async def callback_churn(http: aiohttp.ClientSession) -> None:
        body = {"text": "Call me, then never mind.", "callback_url": "https://example.com/hook"}
        async with http.post(f"{url}/v1/tts/jobs", json=body) as r:
            tally.add("submit with callback then cancel", r.status)
            job = await r.json() if r.status == 202 else None
        if job:
            await request(tally, "cancel", http.delete(f"{url}/v1/tts/jobs/{job['id']}"))

    long_job: dict[str, str] = {}

    async def never_read(http: aiohttp.ClientSession) -> None:
        """Downloads of a long job's WAV (MBs) on sockets that take no byte, and its stream
        opened again and again."""
        if not long_job:
            body = {"text": "A long sentence to say, and to download slowly. " * 60, "stream": True}
            async with http.post(f"{url}/v1/tts/jobs", json=body) as r:
                if r.status != 202:
                    tally.add("long job", r.status)
                    await asyncio.sleep(1.0)
                    return
                long_job["id"] = (await r.json())["id"]
        job_id = long_job["id"]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((ATTACKERS[-1], 0))  # an attacker's address, not the honest client's
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        sock.send(f"GET /v1/tts/jobs/{job_id}/audio HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        stalled.append(sock)
        tally.add("download never read", 1)
        await hold_open(http, "audio stream", f"/v1/tts/jobs/{job_id}/stream")

    async def spoken_numbers(http: aiohttp.ClientSession) -> None:
        """Texts that are short to write and long to say ("$999,999,999" is a dozen words),
        read at half speed: charged as spoken, so refused once the address's room is spent."""
        body = {"text": "$999,999,999 " * 40, "speed": 0.5}
        await request(tally, "spoken numbers", http.post(f"{url}/v1/tts/jobs", json=body))
        await asyncio.sleep(0.5)

    async def unheard_streams(http: aiohttp.ClientSession) -> None:
        """Long streams nobody listens to: their chunks live in Redis, within their budget."""
        body = {"text": "A stream that nobody will ever hear, made all the same. " * 70}
        body["stream"] = True  # type: ignore[assignment]
        await request(tally, "stream nobody hears", http.post(f"{url}/v1/tts/jobs", json=body))
        await asyncio.sleep(0.5)

    async def subtitles_again(http: aiohttp.ClientSession) -> None:
        """The long job's subtitles, six at a time, again and again: made once, then kept."""
        if "id" not in long_job:
            await asyncio.sleep(0.5)
            return
        path = f"{url}/v1/tts/jobs/{long_job['id']}/subtitles?format=json"
        await asyncio.gather(*(request(tally, "subtitles", http.get(path)) for _ in range(6)))

    mp3_document: dict[str, str] = {}

    async def mp3_documents(http: aiohttp.ClientSession) -> None:
        """Documents in mp3 (parts kept as PCM and a file encoded from them: charged for both,
        refused once the address's room is spent), and a part asked for in mp3 six at a time:
        encoded once in a thread, then kept; past two at a time per address, refused."""
        body = {"text": "A chapter of a book, read aloud in mp3. " * 110, "format": "mp3"}
        async with http.post(f"{url}/v1/tts/jobs", json=body) as r:
            tally.add("mp3 document", r.status)
            if r.status == 202 and not mp3_document:
                mp3_document["id"] = (await r.json())["id"]
        if mp3_document:
            path = f"{url}/v1/tts/jobs/{mp3_document['id']}/segments/1"
            await asyncio.gather(
                *(request(tally, "document part in mp3", http.get(path)) for _ in range(6))
            )
        await asyncio.sleep(0.5)

    async def held_answers(http: aiohttp.ClientSession) -> None:
        """Whole OpenAI answers held open, eight at a time: each holds a lease until its job
        is made, and past the address's cap they are refused at once."""
        body = {"model": "tts-1", "input": "Hold this answer open. " * 40, "voice": "alloy"}

        async def one() -> None:
            try:
                response = await http.post(f"{url}/v1/audio/speech", json=body)
            except aiohttp.ClientError:
                tally.add("speech answer held", 0)
                return
            tally.add("speech answer held", response.status)
            response.release()

        asks = [asyncio.create_task(one()) for _ in range(8)]
        await asyncio.wait(asks, timeout=1.0)  # those still waiting are held open meanwhile
        held.extend(asks)

    async def held_tts(http: aiohttp.ClientSession) -> None:
        """ChatTTS-ui's `/tts` answers held open, four at a time, as its form posts: the same
        lease as OpenAI's; a refusal is its `{"code": 1}` with HTTP 200 (counted by the
        status it stands for: 429 with Retry-After)."""
        form = {"text": "Hold this answer open. " * 40, "voice": "2222", "is_split": "1"}

        async def one() -> None:
            try:
                response = await http.post(f"{url}/tts", data=form)
                body = await response.json(content_type=None)
            except (aiohttp.ClientError, ValueError):
                tally.add("ChatTTS-ui answer held", 0)
                return
            refused = body.get("code") == 1
            status = (429 if "Retry-After" in response.headers else 422) if refused else 200
            tally.add("ChatTTS-ui answer held", status)

        asks = [asyncio.create_task(one()) for _ in range(4)]
        await asyncio.wait(asks, timeout=1.0)
        held.extend(asks)

    async def wrong_keys(http: aiohttp.ClientSession) -> None:
        guess = {"Authorization": f"Bearer guess-{time.monotonic_ns()}"}
        await request(tally, "admin key guess", http.get(f"{url}/admin/v1/queue", headers=guess))

    async def bad_ws_ops(http: aiohttp.ClientSession) -> None:
        try:
            async with http.ws_connect(f"{url}/v1/ws") as ws:
                ops: list[object] = [[], {"a": 1}, None, "dance"]
                for op in ops:
                    await ws.send_json({"op": op})
                    reply = await ws.receive_json(timeout=5)
                    kind = (reply.get("error") or {}).get("type") if reply else None
                    tally.add("websocket bad op", 500 if kind == "server_error" else 400)
        except (aiohttp.ClientError, TimeoutError):
            tally.add("websocket bad op", 0)
        await asyncio.sleep(0.2)

    async def live_floods(http: aiohttp.ClientSession) -> None:
        """Live sessions that pour text far faster than speech into more contexts than one may
        open, and never read their audio: the text waiting is capped per context, the audio
        waiting counts in the web tier's memory budget, and a socket that stops reading is
        closed (its segments cancelled)."""
        try:
            ws = await http.ws_connect(f"{url}/v1/live")
        except aiohttp.WSServerHandshakeError as exc:
            tally.add("live session", exc.status)
            await asyncio.sleep(0.5)
            return
        except aiohttp.ClientError:
            tally.add("live session", 0)
            return
        tally.add("live session", 101)
        sockets.append(ws)
        text = "Say this again, and again, and again. " * 128  # 4,864 characters
        with contextlib.suppress(aiohttp.ClientError, ConnectionError):
            for n in range(10):
                for _ in range(5):
                    await ws.send_json({"op": "text", "context": f"c{n}", "text": text})
        await asyncio.sleep(0.5)

    async def cross_site(http: aiohttp.ClientSession) -> None:
        form = aiohttp.FormData({"name": "xsite", "transcript": "hello"})
        call = http.post(f"{url}/v1/voices", data=form, headers={"Origin": EVIL})
        await request(tally, "cross-site form", call)

    for i in range(20):  # uploads that never finish
        sock = socket.create_connection(("127.0.0.1", port), source_address=(ATTACKERS[i % 8], 0))
        sock.sendall(
            b"POST /v1/voices HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: multipart/form-data; boundary=zz\r\nContent-Length: 9000000\r\n\r\n"
            b'--zz\r\nContent-Disposition: form-data; name="audio"; filename="a.wav"\r\n\r\nRIFF'
        )
        stalled.append(sock)
    for i in range(20):  # urlencoded forms that stop one byte short of their 2 MB
        sock = socket.create_connection(("127.0.0.1", port), source_address=(ATTACKERS[i % 8], 0))
        sock.sendall(
            b"POST /v1/voices HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 2000000\r\n\r\n"
        )
        sock.settimeout(0.2)
        with contextlib.suppress(OSError):  # refused at once: answered and closed unread
            sock.sendall(b"name=x&transcript=" + b"a" * 1_999_000)
        stalled.append(sock)
    plan = [fresh_identities] * 4 + [churn, open_streams, voice_bombs, digits, cross_site]
    plan += [dropped_characters, callback_churn, never_read, spoken_numbers, unheard_streams]
    plan += [subtitles_again, held_answers, held_tts, wrong_keys, bad_ws_ops, live_floods]
    plan += [mp3_documents]
    plan = [body for body in plan if body.__name__ not in skip]
    try:
        await asyncio.gather(*(loop(ATTACKERS[i % 8], body) for i, body in enumerate(plan)))
    finally:
        for task in held:
            task.cancel()
        for response in streams:
            response.close()
        for ws in sockets:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 1.0)
        for sock in stalled:
            sock.close()
    tally.stalled = len(stalled)


def attack_process(
    url: str, port: int, seconds: float, rate: float, skip: frozenset[str], out: Any
) -> None:
    """The attackers, in a process of their own: their load must not slow the honest client's
    own event loop (only the server it shares with them)."""
    tally = Tally()
    asyncio.run(attack(url, port, seconds, tally, make_bombs(), rate, skip))
    out.put((dict(tally.counts), tally.stalled))
