"""Delivers callbacks from the queue's outbox (core/queue/callbacks.py), in every web process.

Each attempt is a POST of the ended job to its `callback_url`, signed per Standard Webhooks with
the job owner's secret; `webhook-id` is the same for every attempt of a job, so receivers can
de-duplicate. Any 2xx is delivered. Anything else (another status, no answer within
CHATTTS_CALLBACK_TIMEOUT_S, a refused connection) is retried after the next pause of
CHATTTS_CALLBACK_SCHEDULE_S, with jitter, then recorded as failed; an address the guard refuses
(targets.py) fails at once. Redirects are not followed. Deliveries run beside the requests of
this process, a bounded number at once and at most four of one owner's (an API key, or an
address with all its cookies): a receiver that never answers holds up only its owner's callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

import aiohttp
import orjson
from redis.exceptions import RedisError

from core.infra.networks import Network
from core.queue.callbacks import Callback, Outbox, Outcome
from web.callbacks.signing import client_secret, headers
from web.callbacks.targets import ALLOW_SETTING, ForbiddenAddress, guarded_socket

log = logging.getLogger("chattts_online.web.callbacks")

POLL_S = 0.5  # how often an idle sender looks for due callbacks: one small script per look
IN_FLIGHT = 32  # deliveries at once per process
# ... of which one owner's callbacks (an API key's, or an address's whatever its cookies) take
# at most this many: a receiver that never answers holds up its owner's callbacks (deferred a
# second at a time), not everyone's; fresh cookies are no fresh share.
IN_FLIGHT_PER_CLIENT = 4
DEFER_MS = 1000
# A claim outlives its attempt (the timeout) and the recording of its outcome, with room for a
# stalled event loop: only a sender that died lets it lapse.
LEASE_FACTOR, LEASE_EXTRA_S = 2.0, 1.0
JITTER = 0.2  # each pause is stretched or shrunk by up to a fifth: retries do not stampede
USER_AGENT = "ChatTTS-Online-Callbacks/1"
STOP_TIMEOUT_S = 3.0


def payload(callback: Callback, public_url: str) -> bytes:
    """The body: the Standard Webhooks envelope around the job as it ended, with its URLs."""
    state = str(callback.job.get("state", "ended"))
    base = f"{public_url.rstrip('/')}/v1/tts/jobs/{callback.job_id}"
    data = {"job": callback.job, "status_url": base}
    if state == "succeeded":
        data["audio_url"] = f"{base}/audio"
        data["subtitle_urls"] = {fmt: f"{base}/subtitles?format={fmt}" for fmt in ("srt", "vtt")}
    envelope = {
        "type": f"job.{state}",
        "timestamp": datetime.now(tz=UTC).isoformat().replace("+00:00", "Z"),
        "data": data,
    }
    return orjson.dumps(envelope)


class CallbackSender:
    """The outbox's delivery loop of one web process."""

    def __init__(
        self,
        outbox: Outbox,
        service_secret: bytes,
        *,
        allow: tuple[Network, ...],
        schedule: tuple[float, ...],
        timeout_s: float,
        public_url: str,
        on_outcome: Callable[[str], None] | None = None,
    ) -> None:
        self.outbox = outbox
        self.service_secret = service_secret
        self.allow = allow
        self.schedule = schedule
        self.timeout_s = timeout_s
        self.public_url = public_url
        self.on_outcome = on_outcome
        self._deliveries: set[asyncio.Task[None]] = set()
        self._busy: Counter[str] = Counter()  # deliveries in flight by owner
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(socket_factory=guarded_socket(self.allow), limit=IN_FLIGHT)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            headers={"User-Agent": USER_AGENT},
        )
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="callback-sender")

    async def stop(self) -> None:
        """Stop taking callbacks; attempts in flight get a moment, then their claims lapse and
        another process (or this one, restarted) delivers them."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await asyncio.shield(self._task)
            self._task.cancel()
        if self._deliveries:
            await asyncio.wait(self._deliveries, timeout=STOP_TIMEOUT_S)
            for task in self._deliveries:
                task.cancel()
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        lease_ms = int((self.timeout_s * LEASE_FACTOR + LEASE_EXTRA_S) * 1000)
        while not self._stop.is_set():
            free = IN_FLIGHT - len(self._deliveries)
            taken: list[Callback] = []
            if free > 0:
                try:
                    now_ms = int(time.time() * 1000)
                    taken = await self.outbox.claim(
                        now_ms, lease_ms, free, dict(self._busy), IN_FLIGHT_PER_CLIENT, DEFER_MS
                    )
                except (RedisError, OSError) as exc:
                    log.debug("callbacks: Redis unreachable (%s); retrying", exc)
            for callback in taken:
                task = asyncio.create_task(self._deliver(callback))
                self._deliveries.add(task)
                self._busy[callback.owner] += 1
                task.add_done_callback(functools.partial(self._done, callback.owner))
            if free <= 0:  # every slot busy: until one delivery ends (or a poll's time)
                await asyncio.wait(self._deliveries, timeout=POLL_S, return_when="FIRST_COMPLETED")
            elif len(taken) < free:  # nothing more due now
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_S):
                        await self._stop.wait()

    def _done(self, owner: str, task: asyncio.Task[None]) -> None:
        self._deliveries.discard(task)
        self._busy[owner] -= 1
        if self._busy[owner] <= 0:
            del self._busy[owner]

    async def _deliver(self, callback: Callback) -> None:
        outcome, error = await self._attempt(callback)
        attempts = callback.attempts
        next_ms = 0
        if outcome == "retry":
            if attempts > len(self.schedule):
                outcome = "failed"
                error = f"{error}; gave up after {attempts} attempts"
            else:
                pause = self.schedule[attempts - 1] * random.uniform(1 - JITTER, 1 + JITTER)
                next_ms = int((time.time() + pause) * 1000)
        try:
            verdict = await self.outbox.settle(callback, outcome, next_ms, error)
        except (RedisError, OSError) as exc:
            # The claim lapses and the callback falls due again: at least once, never lost.
            log.warning("callbacks: recording the attempt for %s failed: %s", callback.job_id, exc)
            return
        if verdict == "ok" and self.on_outcome is not None:
            self.on_outcome(outcome)
        level = logging.INFO if outcome == "delivered" else logging.WARNING
        log.log(level, "callback of job %s: %s %s", callback.job_id, outcome, error)

    async def _attempt(self, callback: Callback) -> tuple[Outcome, str]:
        """One POST: ('delivered', ''), ('retry', why) or ('failed', why: never retried)."""
        assert self._session is not None
        body = payload(callback, self.public_url).decode()
        signed = headers(
            client_secret(self.service_secret, callback.client), callback.message_id, body
        )
        try:
            async with self._session.post(
                callback.url,
                data=body,
                headers={**signed, "Content-Type": "application/json"},
                allow_redirects=False,
            ) as response:
                if 200 <= response.status < 300:
                    return "delivered", ""
                return "retry", f"HTTP {response.status}"
        except aiohttp.ClientConnectorError as exc:
            # A name with several addresses fails with one OSError naming each refusal.
            if isinstance(exc.os_error, ForbiddenAddress) or ALLOW_SETTING in str(exc.os_error):
                return "failed", f"refused: {exc.os_error}"
            return "retry", f"connection failed: {exc.os_error}"
        except TimeoutError:
            return "retry", f"no answer within {self.timeout_s:g} s"
        except (aiohttp.ClientError, ValueError) as exc:
            return "retry", f"{type(exc).__name__}: {exc}"
