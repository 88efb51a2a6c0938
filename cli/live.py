"""`chattts-online say --live`: standard input spoken through a live session (`GET /v1/live`) as it
is written, the audio written as it arrives and each spoken sentence's text printed on stderr."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import sys
import threading
from typing import Any

import aiohttp
import orjson

from cli.client import Api, pick_format
from cli.errors import FAILED, OK, UNAVAILABLE, USAGE, CliError, exit_code
from cli.interrupts import until_interrupted
from cli.output import PcmWriter, opened

READ_BYTES = 4096  # at most this much of stdin per `text` op: whatever has arrived, up to this
_STATUS_OF_TYPE = {"server_error": 500, "rate_limit_error": 429}


class StdinPieces:
    """Standard input as text pieces, each as soon as it arrives (a thread does the blocking
    reads: a pipe, a file or a terminal alike); None at the end."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop, self._fd = loop, fd
        # A daemon: a read still blocked on a silent pipe never keeps the process alive.
        threading.Thread(target=self._read, name="stdin", daemon=True).start()

    def _read(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while data := os.read(self._fd, READ_BYTES):
                if text := decoder.decode(data):
                    self._put(text)
            self._put(decoder.decode(b"", final=True) or None)
        except OSError:
            pass
        self._put(None)

    def _put(self, item: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)

    async def __aiter__(self) -> Any:
        while (piece := await self.queue.get()) is not None:
            yield piece


class LiveSay:
    """One live session: the text sent as it comes, the audio written as it comes."""

    def __init__(self, api: Api, writer: PcmWriter, to_stdout: bool) -> None:
        self.api, self.writer, self.to_stdout = api, writer, to_stdout
        self.segments, self.audio_ms = 0, 0.0
        self.spoken = False  # whether any text but blanks went out

    async def run(self, pieces: Any, voice: str | None, speed: float | None) -> None:
        url = self.api.url.replace("http", "ws", 1) + "/v1/live"
        try:
            async with self.api.session.ws_connect(url, heartbeat=30.0) as ws:
                await self._open(ws, voice, speed)
                sender = asyncio.create_task(self._send(ws, pieces))
                try:
                    await self._receive(ws)
                finally:
                    sender.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sender
        except aiohttp.WSServerHandshakeError as exc:
            status = exc.status or 500
            raise CliError(
                f"the server refused the live session: {exc.message} (HTTP {status})",
                exit_code(status, None),
            ) from None
        except aiohttp.ClientConnectionError as exc:
            raise CliError(
                f"cannot reach the server at {self.api.url} ({exc}); is `chattts-online run` "
                "running? (--url or CHATTTS_URL)",
                UNAVAILABLE,
            ) from None

    async def _open(
        self, ws: aiohttp.ClientWebSocketResponse, voice: str | None, speed: float | None
    ) -> None:
        """Open the context and wait for it: no text goes out under options it refused."""
        op: dict[str, Any] = {"op": "open"}
        if voice:
            op["voice"] = voice
        if speed is not None:
            op["speed"] = speed
        await ws.send_str(orjson.dumps(op).decode())
        frame = await self._next_json(ws)
        if frame.get("type") != "opened":
            raise _frame_error(frame)

    async def _send(self, ws: aiohttp.ClientWebSocketResponse, pieces: Any) -> None:
        async for piece in pieces:
            self.spoken = self.spoken or bool(piece.strip())
            await ws.send_str(orjson.dumps({"op": "text", "text": piece}).decode())
        await ws.send_str('{"op": "close"}')

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            frame = await self._next_json(ws)
            kind = frame.get("type")
            if kind == "audio":
                self._write(await self._pcm(ws, int(frame.get("bytes", 0))))
            elif kind == "segment":
                print(frame.get("text", ""), file=sys.stderr, flush=True)
            elif kind == "done":
                self.segments = int(frame.get("segments", 0))
                self.audio_ms = float(frame.get("audio_ms", 0.0))
                return
            elif kind == "error":
                raise _frame_error(frame)

    async def _next_json(self, ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
        message = await ws.receive()
        if message.type == aiohttp.WSMsgType.TEXT:
            frame: dict[str, Any] = orjson.loads(message.data)
            return frame
        if message.type == aiohttp.WSMsgType.BINARY:
            raise CliError("the server sent audio without its header", UNAVAILABLE)
        raise _closed(ws)

    async def _pcm(self, ws: aiohttp.ClientWebSocketResponse, size: int) -> bytes:
        message = await ws.receive()
        if message.type != aiohttp.WSMsgType.BINARY:
            if message.type == aiohttp.WSMsgType.TEXT:
                raise CliError("the server sent a header without its audio", UNAVAILABLE)
            raise _closed(ws)
        data: bytes = message.data
        if len(data) != size:
            raise CliError(f"expected {size} bytes of audio, got {len(data)}", UNAVAILABLE)
        return data

    def _write(self, pcm: bytes) -> None:
        try:
            self.writer.write(pcm)
            if self.to_stdout:
                self.writer.file.flush()  # a player on the pipe hears it now
        except BrokenPipeError:
            raise CliError("the output pipe was closed", FAILED) from None


def _frame_error(frame: dict[str, Any]) -> CliError:
    """An `error` frame (or any unexpected one) as the failure to report."""
    error = frame.get("error") if frame.get("type") == "error" else None
    if not isinstance(error, dict):
        return CliError(f"unexpected frame from the server: {frame}", UNAVAILABLE)
    code = error.get("code")
    status = _STATUS_OF_TYPE.get(str(error.get("type")), 400)
    where = f" (context {frame['context']})" if frame.get("context") else ""
    return CliError(f"{error.get('message')}{where} [{code}]", exit_code(status, code))


def _closed(ws: aiohttp.ClientWebSocketResponse) -> CliError:
    code = ws.close_code
    why = {1008: "a limit of the server", 1013: "the client fell behind"}.get(code or 0, "")
    return CliError(
        f"the server closed the live session early (code {code}{', ' + why if why else ''})",
        UNAVAILABLE,
    )


def run(args: Any, url: str, key: str | None) -> int:
    """`say --live`: stdin (or the text argument) into a live session until it is all spoken."""
    output = args.output or ("-" if not sys.stdout.isatty() else "speech.wav")
    try:
        fmt = pick_format(output, args.format, "pcm" if output == "-" else "wav")
        if args.text is None and sys.stdin.isatty():
            print("chattts-online say: reading stdin to the end (Ctrl-D)", file=sys.stderr)
        return asyncio.run(_main(args, url, key, output, fmt))
    except CliError as exc:
        print(f"chattts-online say: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("chattts-online say: interrupted", file=sys.stderr)
        return 130


async def _main(args: Any, url: str, key: str | None, output: str, fmt: str) -> int:
    api = Api(url, key)
    try:
        return await until_interrupted(_speak(api, args, output, fmt), _nothing)
    finally:
        await api.close()


async def _speak(api: Api, args: Any, output: str, fmt: str) -> int:
    if args.text is not None:
        if not args.text.strip():
            raise CliError("the text is empty", USAGE)
        pieces: Any = _one(args.text)
    else:
        pieces = StdinPieces(asyncio.get_running_loop(), sys.stdin.fileno())
    with opened(output) as file:
        writer = PcmWriter(file, fmt, output != "-")
        session = LiveSay(api, writer, output == "-")
        try:
            await session.run(pieces, args.voice, args.speed)
            if not session.spoken:
                raise CliError("the text is empty", USAGE)
        except BaseException:
            with contextlib.suppress(Exception):  # libsndfile lets go of the file it goes
                writer.close()
            raise
        writer.close()
    seconds = session.audio_ms / 1000
    where = f"; wrote {output}" if output != "-" else ""
    print(f"spoke {session.segments} segments, {seconds:.1f} s{where}", file=sys.stderr)
    return OK


async def _one(text: str) -> Any:
    yield text


async def _nothing() -> None:
    """Ctrl-C: closing the socket is what stops the session on the server."""
