"""Load-generator clients, one aiohttp client for both systems: SSE, WebSocket and polling waits."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson

from bench.lib.identities import cookie_header
from bench.lib.stats import BenchError
from cli.sse import sse_events

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "dead"})
JOB_TIMEOUT_S = 120.0
# Texts: time x subject x action, 16 of each: 4096 different ones before the first repeat, so
# that jobs do not ask for the same audio (our worker has a result cache; we also send cache off).
_TIMES = ("今天下午", "明天早上", "昨天晚上", "周末", "下个月", "每天清晨", "春节前",
          "中午", "放学后", "下班以后", "晚饭前", "上周五", "国庆节", "半夜", "早饭后",
          "暑假里")  # fmt: skip
_SUBJECTS = ("我们", "他们", "老师", "学生们", "朋友们", "我的妹妹", "邻居", "爷爷",
             "同事们", "小明", "大家", "妈妈", "哥哥", "奶奶", "医生", "孩子们")  # fmt: skip
_ACTIONS = ("去公园散步", "在图书馆看书", "一起包饺子", "坐火车去上海", "在家里听音乐",
            "去超市买水果", "练习说中文", "给花园浇水", "看了一场电影", "学习做蛋糕",
            "去海边游泳", "打扫了房间", "写了一封信", "去山上看日出", "在厨房做饭",
            "骑自行车上班")  # fmt: skip


def text_for(i: int) -> str:
    """Text number i: the 4096 combinations scrambled, so that neighbours differ in every part."""
    n = len(_TIMES)
    k = (i * 1001) % (n**3)  # 1001 is odd, prime to 16**3: a permutation
    return f"{_TIMES[k % n]}{_SUBJECTS[(k // n) % n]}{_ACTIONS[k // n // n]}。"


@dataclass
class Sample:
    """One job as a client saw it; times in ms from the start of its submit request."""

    submit_ms: float  # the submit request was answered
    done_ms: float  # the client knows the job succeeded (event, or a DONE poll with the audio)
    audio_ms: float | None = None  # ours: the audio downloaded after the event
    polls: int = 0  # polling clients: query requests made
    stages: dict[str, float] = field(default_factory=dict)  # ours: server-side stages in ms


class Client(Protocol):
    """A user of one system: opens its connections, runs jobs one at a time, closes."""

    label: str

    async def open(self) -> None: ...

    async def run_job(self, text: str) -> Sample: ...

    async def close(self) -> None: ...


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, force_close=False),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        json_serialize=lambda obj: orjson.dumps(obj).decode(),
    )


def _bearer() -> dict[str, str]:
    # One identity per simulated user: a cookie signed with the bench web tier's secret.
    return cookie_header(f"bench-{uuid.uuid4().hex}")


def _stages(t_submit_wall: float, t_done_wall: float, event: dict[str, Any]) -> dict[str, float]:
    """Where the time of one job went, from the timestamps of its terminal snapshot (ms)."""
    job = event.get("job") or {}
    created, started, finished = (job.get(k) for k in ("created_at", "started_at", "finished_at"))
    if not (created and started and finished):
        return {}
    return {
        "accept": (created - t_submit_wall) * 1000,  # request in, validated, enqueue script run
        "queue": (started - created) * 1000,  # waiting in the stream until a worker took it
        "synth": (finished - started) * 1000,  # engine, encoding, result and event written
        "push": (t_done_wall - finished) * 1000,  # doorbell, hub, stream read, to the client
    }


def _check_wav(data: bytes, who: str) -> None:
    if not data.startswith(b"RIFF") or len(data) < 1000:
        raise BenchError(f"{who}: the audio is not a plausible WAV ({len(data)} bytes)")


class _Base:
    label = "?"

    def __init__(self, base_url: str, voice: str = "zh_female") -> None:
        self.base = base_url.rstrip("/")
        self.voice = voice
        self.headers = _bearer()
        self.session: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        assert self.session is not None, "open() first"
        return self.session

    async def open(self) -> None:
        self.session = _session()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


class PollingClient(_Base):
    """The baseline's protocol (also served by ours): submit, then query every `poll_s`."""

    def __init__(self, base_url: str, poll_s: float, label: str) -> None:
        super().__init__(base_url)
        self.poll_s = poll_s
        self.label = label

    async def run_job(self, text: str) -> Sample:
        t0 = time.perf_counter()
        body = {"text": text, "voice": self.voice}
        async with self.http.post(
            f"{self.base}/tts/submit", json=body, headers=self.headers
        ) as resp:
            if resp.status != 200:
                raise BenchError(
                    f"{self.label}: submit answered {resp.status}: {await resp.text()}"
                )
            task_id = (await resp.json())["task_id"]
        t_submit = time.perf_counter()
        polls = 0
        async with asyncio.timeout(JOB_TIMEOUT_S):
            while True:
                await asyncio.sleep(self.poll_s)
                polls += 1
                async with self.http.get(
                    f"{self.base}/tts/query/{task_id}", headers=self.headers
                ) as resp:
                    if resp.status != 200:
                        raise BenchError(f"{self.label}: query answered {resp.status}")
                    answer = await resp.json(loads=orjson.loads)
                if answer["status"] == "DONE":
                    break
                if answer["status"] != "PENDING":
                    raise BenchError(f"{self.label}: job {task_id} ended {answer}")
        t_done = time.perf_counter()
        _check_wav(base64.b64decode(answer["audio"]), self.label)
        return Sample((t_submit - t0) * 1000, (t_done - t0) * 1000, polls=polls)


class _OursBase(_Base):
    fetch_audio = False

    def request(self, text: str) -> dict[str, Any]:
        # cache: false - every job is synthesized, as in the baseline (texts are unique anyway).
        return {"text": text, "voice": self.voice, "format": "wav", "cache": False}

    async def submit(self, text: str) -> dict[str, Any]:
        async with self.http.post(
            f"{self.base}/v1/tts/jobs", json=self.request(text), headers=self.headers
        ) as resp:
            if resp.status != 202:
                raise BenchError(
                    f"{self.label}: submit answered {resp.status}: {await resp.text()}"
                )
            body: dict[str, Any] = await resp.json(loads=orjson.loads)
            return body

    async def audio(self, body: dict[str, Any]) -> None:
        async with self.http.get(self.base + body["audio_url"], headers=self.headers) as resp:
            if resp.status != 200:
                raise BenchError(f"{self.label}: audio answered {resp.status}")
            _check_wav(await resp.read(), self.label)


def _finish(
    label: str,
    t0: float,
    t_submit: float,
    w0: float,
    done: tuple[float, float, str, dict[str, Any]],
) -> Sample:
    t_done, w_done, kind, event = done
    if kind != "succeeded":
        raise BenchError(f"{label}: job ended {kind}: {event.get('job')}")
    return Sample((t_submit - t0) * 1000, (t_done - t0) * 1000, stages=_stages(w0, w_done, event))


class JobSSEClient(_OursBase):
    """Ours: submit, then follow the job's own SSE stream until its terminal event."""

    label = "ours: job SSE"

    def __init__(self, base_url: str, fetch_audio: bool = False) -> None:
        super().__init__(base_url)
        self.fetch_audio = fetch_audio

    async def run_job(self, text: str) -> Sample:
        t0, w0 = time.perf_counter(), time.time()
        body = await self.submit(text)
        t_submit = time.perf_counter()
        done: tuple[float, float, str, dict[str, Any]] | None = None
        async with (
            asyncio.timeout(JOB_TIMEOUT_S),
            self.http.get(self.base + body["events_url"], headers=self.headers) as resp,
        ):
            if resp.status != 200:
                raise BenchError(f"{self.label}: events answered {resp.status}")
            async for sse in sse_events(resp):
                kind, data = sse.event, sse.data
                if kind in TERMINAL:
                    done = (time.perf_counter(), time.time(), kind, orjson.loads(data))
                    break
        if done is None:
            raise BenchError(f"{self.label}: the stream ended without a terminal event")
        sample = _finish(self.label, t0, t_submit, w0, done)
        if self.fetch_audio:
            await self.audio(body)
            sample.audio_ms = (time.perf_counter() - t0) * 1000
        return sample


class _Waiters:
    """Futures of terminal events by job id; an event may come before its submit is answered."""

    def __init__(self) -> None:
        self.futures: dict[str, asyncio.Future[tuple[float, float, str, dict[str, Any]]]] = {}

    def get(self, job_id: str) -> asyncio.Future[tuple[float, float, str, dict[str, Any]]]:
        if job_id not in self.futures:
            self.futures[job_id] = asyncio.get_running_loop().create_future()
        return self.futures[job_id]

    def resolve(self, job_id: str, kind: str, event: dict[str, Any]) -> None:
        future = self.get(job_id)
        if not future.done():
            future.set_result((time.perf_counter(), time.time(), kind, event))

    def fail_all(self, exc: BaseException) -> None:
        for future in self.futures.values():
            if not future.done():
                future.set_exception(exc)

    async def wait(self, job_id: str) -> tuple[float, float, str, dict[str, Any]]:
        try:
            async with asyncio.timeout(JOB_TIMEOUT_S):
                return await self.get(job_id)
        finally:
            self.futures.pop(job_id, None)


class ClientEventsClient(_OursBase):
    """Ours: one `/v1/events` SSE stream per user (a browser tab), opened first; submit, wait."""

    label = "ours: /v1/events"

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.waiters = _Waiters()
        self.reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await super().open()
        resp = await self.http.get(f"{self.base}/v1/events", headers=self.headers)
        if resp.status != 200:
            raise BenchError(f"{self.label}: /v1/events answered {resp.status}")
        self.reader = asyncio.create_task(self._read(resp))

    async def _read(self, resp: aiohttp.ClientResponse) -> None:
        try:
            async for sse in sse_events(resp):
                kind, data = sse.event, sse.data
                if kind in TERMINAL:
                    event = orjson.loads(data)
                    self.waiters.resolve(event["job"]["id"], kind, event)
            raise BenchError(f"{self.label}: the server closed /v1/events")
        except Exception as exc:
            self.waiters.fail_all(exc)
            raise
        finally:
            resp.release()

    async def run_job(self, text: str) -> Sample:
        t0, w0 = time.perf_counter(), time.time()
        body = await self.submit(text)
        t_submit = time.perf_counter()
        return _finish(self.label, t0, t_submit, w0, await self.waiters.wait(body["id"]))

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        await super().close()


class WebSocketClient(_OursBase):
    """Ours: one WebSocket per user; submit frames, event frames back on the same socket."""

    label = "ours: WebSocket"

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.waiters = _Waiters()
        self.submits: dict[str, asyncio.Future[tuple[float, dict[str, Any]]]] = {}
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.reader: asyncio.Task[None] | None = None
        self.refs = 0

    async def open(self) -> None:
        await super().open()
        self.ws = await self.http.ws_connect(f"{self.base}/v1/ws", headers=self.headers)
        self.reader = asyncio.create_task(self._read(self.ws))

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                frame = orjson.loads(msg.data)
                kind = frame.get("type")
                if kind == "event":
                    event = frame["event"]
                    if event.get("type") in TERMINAL:
                        self.waiters.resolve(frame["job_id"], event["type"], event)
                elif kind in ("submitted", "error"):
                    future = self.submits.pop(str(frame.get("ref")), None)
                    if future is None or future.done():
                        continue
                    if kind == "submitted":
                        future.set_result((time.perf_counter(), frame["job"]))
                    else:
                        future.set_exception(BenchError(f"{self.label}: {frame['error']}"))
            raise BenchError(f"{self.label}: the server closed the socket ({ws.close_code})")
        except Exception as exc:
            self.waiters.fail_all(exc)
            for future in self.submits.values():
                if not future.done():
                    future.set_exception(exc)
            raise

    async def run_job(self, text: str) -> Sample:
        assert self.ws is not None
        self.refs += 1
        ref = str(self.refs)
        submitted = asyncio.get_running_loop().create_future()
        self.submits[ref] = submitted
        t0, w0 = time.perf_counter(), time.time()
        await self.ws.send_str(
            orjson.dumps({"op": "submit", "ref": ref, "request": self.request(text)}).decode()
        )
        async with asyncio.timeout(JOB_TIMEOUT_S):
            t_submit, job = await submitted
        return _finish(self.label, t0, t_submit, w0, await self.waiters.wait(job["id"]))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        await super().close()
