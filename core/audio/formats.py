"""Encoding float32 mono audio into the formats clients ask for, with their MIME types."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from core.audio.catalog import CATALOG
from core.audio.stream_encode import encode_whole, to_pcm16

# Every engine delivers 24 kHz mono: ChatTTS's native rate, one of Opus's rates, OpenAI's pcm rate.
SAMPLE_RATE = 24_000
# Silence between segments of one job: a natural sentence pause (the worker, and clients that
# join streamed segments, insert the same).
SEGMENT_GAP_S = 0.12


def mime_type(fmt: str) -> str:
    return CATALOG[fmt].mime


def extension(fmt: str) -> str:
    return CATALOG[fmt].extension


def encode(audio: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """Encode mono float32 samples in [-1, 1] as `fmt`."""
    sndfile = CATALOG[fmt].sndfile
    clipped = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    if fmt == "pcm":
        # Converted as the WAV would be: a job's PCM (and its streamed chunks) are exactly the
        # samples of the same job's WAV.
        return to_pcm16(clipped)
    if sndfile is None:
        return encode_whole(clipped, sample_rate, fmt)
    container, subtype = sndfile
    buffer = io.BytesIO()
    sf.write(buffer, clipped, sample_rate, format=container, subtype=subtype)
    return buffer.getvalue()


def concatenate(parts: list[np.ndarray], sample_rate: int, gap_s: float = 0.0) -> np.ndarray:
    """Join segments, with `gap_s` of silence between them."""
    if not parts:
        return np.zeros(0, np.float32)
    gap = np.zeros(int(sample_rate * gap_s), np.float32)
    joined: list[np.ndarray] = []
    for i, part in enumerate(parts):
        if i and gap.size:
            joined.append(gap)
        joined.append(part.astype(np.float32, copy=False))
    return np.concatenate(joined)
