"""`chattts-online say` and `submit`: a command-line client of the service's HTTP API.

`say` speaks a short text through `POST /v1/audio/speech` (one request, ahead of bulk jobs;
streamed when writing to a pipe). `submit` speaks a text of any length: it cuts it at sentence
boundaries into jobs of at most `--max-chars`, follows each job's Server-Sent Events for a
progress bar of segments done (on stderr), and writes one file. Exit codes: 0 done, 1 the job
failed, 2 usage, 3 server unreachable or unavailable (5xx, 429), 4 request rejected (4xx),
130 interrupted.

Ctrl-C, whenever it comes, cancels every job this run submitted (those whose submission was still
in flight too) and exits 130 within INTERRUPT_GRACE_S; a second Ctrl-C exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from cli.errors import FAILED, INTERRUPTED, OK, UNAVAILABLE, USAGE, CliError, exit_code
from cli.interrupts import CANCEL_TIMEOUT_S, until_interrupted
from cli.output import PcmWriter, Progress, opened
from cli.running import DEFAULT_URL, service_url
from cli.sse import sse_events
from core.audio.catalog import CATALOG, FORMATS, OPENAI_FORMATS
from core.audio.formats import SAMPLE_RATE, SEGMENT_GAP_S
from core.queue.job import TERMINAL_NAMES as TERMINAL
from core.text.sentences import clean_text, split_sentences
from core.text.subtitles import to_srt, to_vtt

SAY_FORMATS = OPENAI_FORMATS  # what /v1/audio/speech returns
EXTENSIONS = {f".{CATALOG[f].extension}": f for f in FORMATS} | {".oga": "ogg", ".raw": "pcm"}
# Server default of CHATTTS_MAX_TEXT_CHARS: one job's text at most.
# Characters per job: the server's CHATTTS_MAX_DOCUMENT_CHARS (a book is one job, or a few).
MAX_CHARS = 200_000
# Jobs submitted ahead of the one being followed (the server caps unfinished jobs per client).
WINDOW = 16
CONNECT_TIMEOUT_S = 10.0
SSE_RECONNECTS = 5


def pick_format(output: str | None, fmt: str | None, default: str = "mp3") -> str:
    """--format, else the output file's extension, else `default`."""
    if fmt:
        return fmt
    if output and output != "-":
        suffix = Path(output).suffix.lower()
        if suffix in EXTENSIONS:
            return EXTENSIONS[suffix]
        if suffix:
            raise CliError(f"cannot tell the format from {output!r}; pass --format", USAGE)
    return default


def read_text(text: str | None, path: str | None = None) -> str:
    """The text argument, else the file (`-`: stdin), else stdin."""
    if text is None:
        if path and path != "-":
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CliError(f"cannot read {path}: {exc}", USAGE) from None
        elif sys.stdin.isatty():
            raise CliError("no text: give it as an argument, with -f FILE, or on stdin", USAGE)
        else:
            text = sys.stdin.read()
    if not text.strip():
        raise CliError("the text is empty", USAGE)
    return text


def default_output(fmt: str, source: str | None = None) -> str:
    """Next to the input file; else stdout when it is a pipe; else speech.<ext> here."""
    if source and source != "-":
        return str(Path(source).with_suffix(f".{CATALOG[fmt].extension}"))
    return "-" if not sys.stdout.isatty() else f"speech.{CATALOG[fmt].extension}"


# -- HTTP ---------------------------------------------------------------------------------------


class Api:
    """An aiohttp session on the service: auth header, cookie identity, errors as CliError."""

    def __init__(self, url: str, api_key: str | None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.session = aiohttp.ClientSession(
            headers=headers,
            # Synthesis takes as long as it takes: only connecting is bounded.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
            cookie_jar=aiohttp.CookieJar(unsafe=True),  # keep the identity cookie of an IP host
        )

    async def close(self) -> None:
        await self.session.close()

    @contextlib.asynccontextmanager
    async def request(self, method: str, path: str, **kwargs: Any) -> AsyncIterator[Any]:
        """The response of a successful request; CliError for anything else."""
        try:
            async with self.session.request(method, self.url + path, **kwargs) as response:
                if response.status >= 400:
                    raise await _error(response)
                yield response
        except aiohttp.ClientConnectionError as exc:
            raise CliError(
                f"cannot reach the server at {self.url} ({exc}); is `chattts-online run` "
                "running? (--url or CHATTTS_URL; without them, the address `run` announced, else "
                f"{DEFAULT_URL})",
                UNAVAILABLE,
            ) from None
        except aiohttp.ClientPayloadError as exc:
            raise CliError(f"the server broke off its answer: {exc}", UNAVAILABLE) from None

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        async with self.request(method, path, **kwargs) as response:
            return orjson.loads(await response.read())


async def _error(response: aiohttp.ClientResponse) -> CliError:
    raw = await response.read()
    code: str | None = None
    try:
        error = orjson.loads(raw)["error"]
        message, code = error["message"], error.get("code")
    except (orjson.JSONDecodeError, KeyError, TypeError):
        message = raw.decode(errors="replace").strip()[:300] or response.reason or "no message"
    return CliError(f"{message} (HTTP {response.status})", exit_code(response.status, code))


# -- commands -----------------------------------------------------------------------------------


async def say(
    api: Api, text: str, output: str, fmt: str, voice: str | None, speed: float | None
) -> int:
    """One request to the OpenAI-compatible endpoint; streamed when writing to stdout."""
    if fmt not in SAY_FORMATS:
        raise CliError(f"say writes {', '.join(SAY_FORMATS)}; use submit for {fmt}", USAGE)
    body: dict[str, Any] = {"model": "chattts", "input": text, "response_format": fmt}
    if voice:
        body["voice"] = voice
    if speed is not None:
        body["speed"] = speed
    if output == "-":
        body["stream_format"] = "audio"
    with opened(output) as file:
        async with api.request("POST", "/v1/audio/speech", json=body) as response:
            async for chunk in response.content.iter_any():
                file.write(chunk)
                if output == "-":
                    file.flush()
    if output != "-":
        print(f"wrote {output}", file=sys.stderr)
    return OK


async def _events(api: Api, job: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """A job's events until its terminal one; resumes after its last event when cut off."""
    last: str | None = None
    for _ in range(SSE_RECONNECTS):
        headers = {"Last-Event-ID": last} if last else {}
        async with api.request("GET", job["events_url"], headers=headers) as response:
            if response.status == 204:  # over, and we saw its end
                return
            async for sse in sse_events(response):
                last = sse.id or last
                event = sse.json()
                yield event
                if event.get("type") in TERMINAL:
                    return
    raise CliError(f"lost the event stream of job {job['id']}", UNAVAILABLE)


async def _wait(
    api: Api, job: dict[str, Any], on_progress: Callable[[int, int, float | None], None]
) -> None:
    async for event in _events(api, job):
        snapshot = event.get("job") or {}
        kind = event.get("type")
        if kind == "progress":
            segment = event.get("segment") or {}
            eta = event.get("eta")
            on_progress(
                int(segment.get("index", 0)),
                int(segment.get("total", 0)),
                float(eta) if eta is not None else None,
            )
        elif kind == "succeeded":
            total = int(snapshot.get("segments_total") or 1)
            on_progress(total, total, None)
            return
        elif kind in TERMINAL:
            reason = snapshot.get("error") or kind
            raise CliError(f"job {job['id']} {kind}: {reason}", FAILED)
    raise CliError(f"job {job['id']}: its events ended early", UNAVAILABLE)


async def submit(api: Api, tracker: JobTracker, text: str, output: str, fmt: str, args: Any) -> int:
    """Any length of text as one job (a document: the server keeps it in parts and resumes it
    after a crash), or several past `--max-chars`; their PCM written as one file of `fmt`;
    `--subtitles` (srt or vtt): the cues of every part, timed on that file, beside it."""
    parts = split_sentences(clean_text(text), args.max_chars)
    if not parts:
        raise CliError("the text has nothing to speak", USAGE)
    progress = Progress([len(p) for p in parts])
    # PCM, encoded here: the jobs of a text past `--max-chars` join without re-decoding.
    params: dict[str, Any] = {"format": "pcm"}
    params |= {"voice": args.voice} if args.voice else {}
    params |= {"speed": args.speed} if args.speed is not None else {}
    jobs: list[dict[str, Any]] = []
    cues: list[dict[str, Any]] = []

    async def post(index: int) -> None:
        jobs.append(await tracker.post(api, {**params, "text": parts[index]}))

    try:
        for index in range(min(WINDOW, len(parts))):
            await post(index)
        with opened(output) as file:
            writer = PcmWriter(file, fmt, output != "-")
            gap = bytes(int(SAMPLE_RATE * SEGMENT_GAP_S) * 2)
            written = 0  # bytes of PCM so far: where the next part's cues start
            for index in range(len(parts)):
                job = jobs[index]
                await _wait(api, job, functools.partial(progress.update, index))
                tracker.finished(job["id"])
                if index + WINDOW < len(parts):
                    await post(index + WINDOW)
                if index:
                    writer.write(gap)
                    written += len(gap)
                offset_s = written / 2 / SAMPLE_RATE
                written += await _download(api, job["audio_url"], writer)
                if args.subtitles:
                    cues += await _cues_from(api, job, offset_s)
            writer.close()
    finally:
        progress.finish()
    if output != "-":
        print(f"wrote {output}", file=sys.stderr)
    if args.subtitles:
        _write_subtitles(cues, output, args.subtitles)
    return OK


async def _cues_from(api: Api, job: dict[str, Any], offset_s: float) -> list[dict[str, Any]]:
    """A part's cues, timed from `offset_s` in the joined file."""
    found = await api.json("GET", f"{job['subtitles_url']}?format=json")
    cues: list[dict[str, Any]] = found["cues"]
    for cue in cues:
        cue["start"] += offset_s
        cue["end"] += offset_s
    return cues


def _write_subtitles(cues: list[dict[str, Any]], output: str, kind: str) -> None:
    """The cues of every part, numbered, as `kind` (srt or vtt) beside `output`."""
    for number, cue in enumerate(cues, start=1):
        cue["index"] = number
    path = Path(output if output != "-" else "speech").with_suffix(f".{kind}")
    path.write_text(to_srt(cues) if kind == "srt" else to_vtt(cues), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


async def _download(api: Api, url: str, writer: PcmWriter) -> int:
    """A job's PCM into `writer` as it arrives (hours of it never sit in memory); its bytes."""
    size, odd = 0, b""
    async with api.request("GET", url) as response:
        async for chunk in response.content.iter_chunked(1 << 16):
            data, size = odd + chunk, size + len(chunk)
            whole = len(data) - len(data) % 2  # whole 16-bit samples only
            writer.write(data[:whole])
            odd = data[whole:]
    return size


class JobTracker:
    """The jobs of one run that have not finished, and the submissions still in flight: what
    Ctrl-C takes back. A submission runs as its own task, so that an interrupt arriving while it
    is on the wire does not lose the id of a job the server is creating."""

    def __init__(self) -> None:
        self.unfinished: set[str] = set()
        self.in_flight: set[asyncio.Task[Any]] = set()

    async def post(self, api: Api, body: dict[str, Any]) -> dict[str, Any]:
        task = asyncio.create_task(api.json("POST", "/v1/tts/jobs", json=body))
        self.in_flight.add(task)
        task.add_done_callback(self._landed)
        job: dict[str, Any] = await asyncio.shield(task)
        return job

    def _landed(self, task: asyncio.Task[Any]) -> None:
        self.in_flight.discard(task)
        if not task.cancelled() and task.exception() is None:
            self.unfinished.add(task.result()["id"])

    def finished(self, job_id: str) -> None:
        self.unfinished.discard(job_id)

    async def cancel_all(self, api: Api) -> None:
        """Best effort and bounded: let submissions in flight land, then cancel every job."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CANCEL_TIMEOUT_S):
                if self.in_flight:
                    await asyncio.wait(set(self.in_flight))
                await asyncio.gather(
                    *(api.json("DELETE", f"/v1/tts/jobs/{job_id}") for job_id in self.unfinished),
                    return_exceptions=True,
                )


def connection(args: Any) -> tuple[str, str | None]:
    """The service's URL and the API key: the flags, else the environment."""
    key = args.api_key or os.environ.get("CHATTTS_API_KEY") or None
    return service_url(args.url, args.command), key


def run(command: str, args: Any) -> int:
    """Entry point of both commands: parse what argparse cannot, run, map failures to codes."""
    url, key = connection(args)
    tracker = JobTracker()

    async def main(text: str, output: str, fmt: str) -> int:
        api = Api(url, key)
        try:
            if command == "say":
                work = say(api, text.strip(), output, fmt, args.voice, args.speed)
            else:
                work = submit(api, tracker, text, output, fmt, args)
            return await until_interrupted(work, functools.partial(tracker.cancel_all, api))
        finally:
            await api.close()

    try:
        # Read before the event loop runs: a blocking read of stdin there would hold Ctrl-C off.
        text = read_text(args.text) if command == "say" else read_text(None, args.file)
        fmt = pick_format(args.output, args.format)
        output = args.output or default_output(fmt, None if command == "say" else args.file)
        return asyncio.run(main(text, output, fmt))
    except CliError as exc:
        print(f"chattts-online {command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:  # before the event loop runs, or after it
        print(f"chattts-online {command}: interrupted", file=sys.stderr)
        return INTERRUPTED
