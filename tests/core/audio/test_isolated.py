"""Whole files of native encoders made in a child process: the same bytes as in the asking
process, and a crash of the child fails that file alone (the next one is made in a new child)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from core.audio.formats import SAMPLE_RATE, encode
from core.audio.isolated import CodecCrashed, CodecProcess, stream_file
from core.audio.stream_encode import to_pcm16


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_a_child_makes_the_same_file() -> None:
    encoder = CodecProcess()
    try:
        audio = tone(3.0)
        for fmt in ("mp3", "flac", "wav"):
            assert encoder.encode(audio, SAMPLE_RATE, fmt) == encode(audio, SAMPLE_RATE, fmt)
        pcm = to_pcm16(audio)
        assert encoder.encode_pcm(pcm, SAMPLE_RATE, "flac") == stream_file(pcm, SAMPLE_RATE, "flac")
    finally:
        encoder.close()


def test_a_crash_fails_that_file_and_the_next_one_is_made() -> None:
    encoder = CodecProcess()
    try:
        with pytest.raises(CodecCrashed, match="a native crash"):
            encoder.run("a native crash", ctypes.string_at, 0)  # reads address 0: SIGSEGV
        assert encoder.crashes == 2  # tried once more in a new child: it crashed that one too
        audio = tone(1.0)
        assert encoder.encode(audio, SAMPLE_RATE, "mp3") == encode(audio, SAMPLE_RATE, "mp3")
    finally:
        encoder.close()
