"""A document job's file, joined from its parts when it is served: its size (its WAV header is
`stream_encode.wav_header`'s, with the document's sizes).

A document (a job longer than CHATTTS_MAX_TEXT_CHARS, up to hours of speech) keeps its audio as
parts, 16-bit PCM per segment with the pause before it (core/queue/lua/progress.lua), so no
single Redis value grows with it. Its file is `pcm`, the parts joined, or `wav`, the same after
a 44-byte header: known in size before a byte is read, so HTTP ranges work.
"""

from __future__ import annotations

WAV_HEADER_BYTES = 44
BYTES_PER_SAMPLE = 2  # 16-bit mono


def document_size(samples: int, fmt: str) -> int:
    """Bytes of a document's file of `samples` samples."""
    data = samples * BYTES_PER_SAMPLE
    return data + WAV_HEADER_BYTES if fmt == "wav" else data
