"""A document job's file, joined from its parts when it is served: its size and WAV header.

A document (a job longer than CHATTTS_MAX_TEXT_CHARS, up to hours of speech) keeps its audio as
parts, 16-bit PCM per segment with the pause before it (workers/queue/lua/progress.lua), so no
single Redis value grows with it. Its file is `pcm`, the parts joined, or `wav`, the same after
a 44-byte header: known in size before a byte is read, so HTTP ranges work.
"""

from __future__ import annotations

import struct

from .formats import SAMPLE_RATE

DOCUMENT_FORMATS = ("wav", "pcm")
WAV_HEADER_BYTES = 44
BYTES_PER_SAMPLE = 2  # 16-bit mono


def document_size(samples: int, fmt: str) -> int:
    """Bytes of a document's file of `samples` samples."""
    data = samples * BYTES_PER_SAMPLE
    return data + WAV_HEADER_BYTES if fmt == "wav" else data


def wav_header(samples: int, rate: int = SAMPLE_RATE) -> bytes:
    """The canonical 44-byte header of 16-bit mono PCM. Written here: the standard library's
    `wave` and libsndfile both write a header only along with the samples themselves."""
    data = samples * BYTES_PER_SAMPLE
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + data,
        b"WAVE",
        b"fmt ",
        16,  # the fmt chunk's size
        1,  # PCM
        1,  # mono
        rate,
        rate * BYTES_PER_SAMPLE,  # bytes per second
        BYTES_PER_SAMPLE,  # block align
        16,  # bits per sample
        b"data",
        data,
    )
