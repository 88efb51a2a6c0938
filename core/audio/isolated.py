"""Whole files encoded by native code (libsndfile's and FFmpeg's encoders) in a child process: an
encoder that crashes fails that one file (CodecCrashed), never the process that asked for it,
as the recognizer's child does for the speech checks (workers/checks/recognizers/)."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import numpy as np

from core.audio.formats import encode
from core.audio.stream_encode import StreamEncoder

T = TypeVar("T")
# Encoded where they are asked for: PCM is a copy, WAV a copy after a 44-byte header (libsndfile
# writes it, a loop with no codec in it). They are most files, and a child would cost each of
# them a copy through a pipe.
IN_PROCESS = frozenset({"pcm", "wav"})


class CodecCrashed(Exception):
    """The child running a codec died (a native crash): that file failed, nothing else."""


def stream_file(pcm: bytes, rate: int, fmt: str) -> bytes:
    """16-bit PCM as one file of `fmt` from the incremental encoder (a document's part is encoded
    as the document's own file is: workers/documents.py)."""
    encoder = StreamEncoder(fmt, rate)
    return encoder.feed(pcm) + encoder.close()


class CodecProcess:
    """One child process, started at the first file that needs it (and again after a crash),
    running codecs on one file at a time. Blocking calls: run them in a thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self.crashes = 0

    def encode(self, samples: np.ndarray, rate: int, fmt: str) -> bytes:
        """`samples` (float, mono) as a whole file of `fmt` (core/audio/formats.py's encode)."""
        return self._encode(encode, samples, samples.size / rate, rate, fmt)

    def encode_pcm(self, pcm: bytes, rate: int, fmt: str) -> bytes:
        """16-bit PCM as one file of `fmt`, by the incremental encoder (stream_file)."""
        return self._encode(stream_file, pcm, len(pcm) / 2 / rate, rate, fmt)

    def _encode(
        self, fn: Callable[..., bytes], audio: Any, seconds: float, rate: int, fmt: str
    ) -> bytes:
        if fmt in IN_PROCESS:
            return fn(audio, rate, fmt)
        return self.run(f"the {fmt} encoder on {seconds:.0f} s of audio", fn, audio, rate, fmt)

    def run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the child (a module-level function, its arguments and result picklable);
        CodecCrashed, naming `what`, when the child dies under it
        twice. (A crash fails every file the child had been given: each is tried once more in a
        new child, where only the one that crashes it crashes it again.)"""
        for attempt in (1, 2):
            pool = self._current()
            try:
                return pool.submit(fn, *args).result()
            except BrokenProcessPool:
                self._discard(pool)
                if attempt == 2:
                    raise CodecCrashed(f"{what} crashed its process") from None
        raise AssertionError("unreachable")

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
                self.crashes += 1
        pool.shutdown(wait=False)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # Spawned, not forked: the asking process has threads (and, in a worker, torch).
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(1, mp_context=context)
            return self._pool
