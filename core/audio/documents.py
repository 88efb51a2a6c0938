"""A document job's file: its size when joined from its parts, and the size of the pieces its
encoded file is kept in.

A document (a job longer than CHATTTS_MAX_TEXT_CHARS, up to hours of speech) keeps its audio as
parts, 16-bit PCM per segment with the pause before it (core/queue/lua/progress.lua), so no
single Redis value grows with it. Its file in `pcm` is the parts joined, in `wav` the same after
a 44-byte header (`stream_encode.wav_header`'s): known in size before a byte is read, so HTTP
ranges work. In any other format, the worker encodes the parts once, in order, when the document
ends (workers/documents.py), and keeps the file in pieces of FILE_PIECE_BYTES: a range is read
from the pieces that hold it.
"""

from __future__ import annotations

WAV_HEADER_BYTES = 44
BYTES_PER_SAMPLE = 2  # 16-bit mono
# An encoded file's pieces (the last one shorter): one web-tier read of a file served in pieces
# (web/replies/sending.py) is one Redis value or store object.
FILE_PIECE_BYTES = 512 * 1024


def document_size(samples: int, fmt: str) -> int:
    """Bytes of a document's file of `samples` samples."""
    data = samples * BYTES_PER_SAMPLE
    return data + WAV_HEADER_BYTES if fmt == "wav" else data
