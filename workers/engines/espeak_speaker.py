"""eSpeak NG in a process of its own that speaks each segment in a fresh fork of itself: nothing one
segment leaves in the library's globals reaches the next, and a native crash fails one segment.

The library keeps state from one synthesis to the next (its wave generator's phase and buffers,
its random generator seeded from the clock) and has no call that resets it, so the same text in
the same voice came out differently depending on what was spoken before. Reloading it for each
segment leaks what it allocated for the voice (3 KB a segment); a fork of a process that has
loaded the library and never spoken starts every segment from the same memory, and takes its
leftovers with it when it exits. The process runs this file as a script, importing only the
standard library and `espeakng_loader`, so that it stays small and each fork cheap.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import IO, Any

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_CHARS_UTF8 = 1
_PARAM_RATE, _PARAM_PITCH = 1, 3
_RANDOM_SEED = 1  # eSpeak's small random variations, the same for every segment
_EVENT_LIST_TERMINATED, _EVENT_WORD = 0, 1


class SpeakerError(Exception):
    """What eSpeak NG said it could not do, or that its process died (worth another try: the
    next call starts a new one)."""

    def __init__(self, message: str, died: bool = False) -> None:
        super().__init__(message)
        self.died = died


class Speaker:
    """The client: one speaking process, started when first needed and again after it died.
    Blocking calls from one thread (the engine's)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.native_rate = 0
        self.version = ""

    def start(self) -> None:
        with self._lock:
            self._started()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        weakref.finalize(self, _stop, process)
        assert process.stdout is not None
        hello = _read_header(process.stdout)
        if hello is None or hello.get("error"):
            _stop(process)
            reason = hello.get("error") if hello else "its process exited"
            raise SpeakerError(f"eSpeak NG did not start: {reason}")
        self._process, self.native_rate, self.version = process, hello["rate"], hello["version"]
        return process

    def speak(self, voice: bytes, rate: int, pitch: int, text: str) -> tuple[bytes, list[Any]]:
        """16-bit PCM at `native_rate` and the words' (1-based character, millisecond) starts."""
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            request = {"voice": voice.decode(), "rate": rate, "pitch": pitch, "text": text}
            header, pcm = None, b""
            try:
                process.stdin.write(json.dumps(request).encode() + b"\n")
                process.stdin.flush()
                header = _read_header(process.stdout)
                pcm = process.stdout.read(header.get("bytes", 0)) if header else b""
            except (OSError, ValueError):  # its pipe closed, or what came back was cut
                header = None
            if header is None or len(pcm) != header.get("bytes", 0):
                _stop(process)
                self._process = None
                raise SpeakerError("the eSpeak NG process died", died=True)
            if header.get("error"):
                raise SpeakerError(header["error"])
            return pcm, header["words"]


def _read_header(stream: IO[bytes]) -> dict[str, Any] | None:
    line = stream.readline()
    return json.loads(line) if line.endswith(b"\n") else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Its input closed (it exits when it reads the end), then waited for."""
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- the speaking process ----------------------------------------------------------------------


class _Event(ctypes.Structure):
    """espeak_EVENT (speak_lib.h)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # the word's first character, 1-based
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # milliseconds into this synthesis
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Loads the library and says its rate and version; then each request line is handed to a
    fork made ahead of it, which speaks it, writes its reply and exits, while the next is made."""
    import espeakng_loader

    pcm: list[bytes] = []
    words: list[tuple[int, int]] = []

    def collect(wav: Any, count: int, events: Any) -> int:
        if count > 0:
            pcm.append(ctypes.string_at(wav, count * 2))
        i = 0
        while events and events[i].type != _EVENT_LIST_TERMINATED:
            if events[i].type == _EVENT_WORD:
                words.append((events[i].text_position, events[i].audio_position))
            i += 1
        return 0

    callback = _CALLBACK(collect)  # kept referenced: C holds the pointer
    try:
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
    except OSError as exc:
        return _reply(replies, {"error": f"cannot load the eSpeak NG library: {exc}"})
    data_path = espeakng_loader.get_data_path().encode()
    rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path, 0)
    if rate <= 0:
        return _reply(replies, {"error": f"it failed to initialise with data at {data_path!r}"})
    lib.espeak_SetSynthCallback(callback)
    lib.espeak_Info.restype = ctypes.c_char_p
    info = lib.espeak_Info(ctypes.byref(ctypes.c_char_p()))
    _reply(replies, {"rate": rate, "version": info.decode() if info else "unknown"})

    voice = ""  # the voice loaded here, which each fork starts with (loading one speaks nothing)

    def speak(request: dict[str, Any]) -> bytes:
        if request["voice"] != voice and lib.espeak_SetVoiceByName(request["voice"].encode()):
            return _header({"error": f"eSpeak NG has no voice {request['voice']!r}"})
        return _speak(lib, request, pcm, words)

    spare = _Fork(speak, replies)
    for line in requests:
        speaking, request = spare, json.loads(line)
        speaking.hand(line)
        if request["voice"] != voice:  # for the forks to come
            loaded = lib.espeak_SetVoiceByName(request["voice"].encode()) == 0
            voice = request["voice"] if loaded else ""
        spare = _Fork(speak, replies)
        speaking.wait()
    spare.hand(b"")


def _speak(lib: Any, request: dict[str, Any], pcm: list[bytes], words: list[Any]) -> bytes:
    """In a fork: the request spoken, as a reply."""
    lib.espeak_ng_SetRandSeed(ctypes.c_long(_RANDOM_SEED))
    lib.espeak_SetParameter(_PARAM_RATE, request["rate"], 0)
    lib.espeak_SetParameter(_PARAM_PITCH, request["pitch"], 0)
    data = request["text"].encode()
    status = lib.espeak_Synth(
        ctypes.c_char_p(data), len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None
    )
    if status != 0:
        return _header({"error": f"eSpeak NG synthesis failed with status {status}"})
    samples = b"".join(pcm)
    return _header({"bytes": len(samples), "words": words}) + samples


class _Fork:
    """A child that waits for one request, writes its reply where the speaking process writes
    its own, and exits (an empty request: it exits at once)."""

    def __init__(self, speak: Any, replies: IO[bytes]) -> None:
        self._replies = replies
        read_end, self._requests = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: it never returns from here
            os.close(self._requests)
            code = 1
            try:
                with os.fdopen(read_end, "rb") as requests:
                    line = requests.read()
                if line:
                    _write_all(replies.fileno(), speak(json.loads(line)))
                code = 0
            finally:
                os._exit(code)
        os.close(read_end)

    def hand(self, line: bytes) -> None:
        _write_all(self._requests, line)
        os.close(self._requests)

    def wait(self) -> None:
        """Waited for; a child that died before it replied is replied for."""
        _, status = os.waitpid(self._pid, 0)
        if status != 0:
            why = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else "an error"
            _reply(self._replies, {"error": f"eSpeak NG failed on this segment ({why})"})


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _header(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields).encode() + b"\n"


def _reply(replies: IO[bytes], fields: dict[str, Any]) -> None:
    replies.write(_header(fields))
    replies.flush()


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the worker decides when to stop, and this process
    # ends when the worker closes its input (or dies).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _serve(sys.stdin.buffer, sys.stdout.buffer)
