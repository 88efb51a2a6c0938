"""Encoding float32 mono audio into the formats clients ask for, with their MIME types."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from core.audio.catalog import CATALOG
from core.audio.stream_encode import encode_whole, to_pcm16, wav_header, write_sliced

# Every engine delivers 24 kHz mono: ChatTTS's native rate, one of Opus's rates, OpenAI's pcm rate.
SAMPLE_RATE = 24_000
# Silence between segments of one job: a natural sentence pause (the worker, and clients that
# join streamed segments, insert the same).
SEGMENT_GAP_S = 0.12


def encode(audio: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """Encode mono float32 samples in [-1, 1] as `fmt`, with its one encoder (catalog.py)."""
    clipped = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    found = CATALOG[fmt]
    if found.av is not None:
        return encode_whole(clipped, sample_rate, fmt)
    if found.sndfile is None:  # written here: a job's PCM is exactly its WAV's samples
        pcm = to_pcm16(clipped)
        return pcm if fmt == "pcm" else wav_header(len(pcm) // 2, sample_rate) + pcm
    container, subtype = found.sndfile
    buffer = io.BytesIO()
    with sf.SoundFile(buffer, "w", sample_rate, 1, format=container, subtype=subtype) as out:
        write_sliced(out, clipped)
    return buffer.getvalue()


# Layer III bit rates (kbit/s) by MPEG version (1; 2 and 2.5), and sample rates by version.
_MP3_KBPS = {
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MP3_RATES = {3: (44_100, 48_000, 32_000), 2: (22_050, 24_000, 16_000), 0: (11_025, 12_000, 8_000)}


def bare_mp3(data: bytes) -> bytes:
    """An MP3 file as bare audio frames: its ID3v2 tag and its Xing/Info frame (LAME's header
    frame, which libsndfile writes) removed, so that files join by concatenation, as a stream
    does. Stored files keep the frame: a player reads a VBR file's duration from it. By hand:
    mutagen removes tags but not that frame, and the frame is one header away."""
    if data[:3] == b"ID3" and len(data) >= 10:
        size = (data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9]
        data = data[10 + size :]
    if len(data) < 4 or data[0] != 0xFF or data[1] & 0xE0 != 0xE0:
        return data
    version, layer = (data[1] >> 3) & 3, (data[1] >> 1) & 3
    kbps_index, rate_index = data[2] >> 4, (data[2] >> 2) & 3
    if layer != 1 or version == 1 or rate_index == 3 or kbps_index in (0, 15):
        return data
    kbps = _MP3_KBPS[1 if version == 3 else 2][kbps_index]
    per_frame = 144 if version == 3 else 72  # bytes per (kbit/s / Hz): 1152 or 576 samples
    length = per_frame * kbps * 1000 // _MP3_RATES[version][rate_index] + ((data[2] >> 1) & 1)
    head = data[:length]
    return data[length:] if b"Xing" in head[:64] or b"Info" in head[:64] else data


def concatenate(parts: list[np.ndarray], sample_rate: int, gap_s: float = 0.0) -> np.ndarray:
    """Join segments, with `gap_s` of silence between them."""
    if not parts:
        return np.zeros(0, np.float32)
    gap = np.zeros(int(sample_rate * gap_s), np.float32)
    joined = [piece for part in parts for piece in (gap, part.astype(np.float32, copy=False))]
    return np.concatenate(joined[1:])
