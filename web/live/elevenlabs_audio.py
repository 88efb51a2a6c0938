"""ElevenLabs' `output_format` (core/audio/catalog.py) looked up, and a context's 24 kHz PCM turned
into it piece by piece (one resampler and one encoder per context, so that the joints between
pieces are clean)."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.audio.catalog import ELEVENLABS_FORMATS, ELEVENLABS_NAMES, OutputFormat
from core.audio.formats import SAMPLE_RATE
from core.audio.stream_encode import StreamEncoder, load_av
from web.errors import ApiError

# μ-law (G.711): the bias added to a sample's magnitude, and the largest magnitude encoded.
_ULAW_BIAS, _ULAW_CLIP = 0x84, 32635


def output_format(name: str) -> OutputFormat:
    """The format `name` names (core/audio/catalog.py); 422 `unsupported_format` listing the
    ones served."""
    found = ELEVENLABS_FORMATS.get(name)
    if found is None:
        raise ApiError(
            422,
            f"output_format {name!r} is not served here; the formats are "
            f"{', '.join(ELEVENLABS_NAMES)}",
            code="unsupported_format",
            param="output_format",
        )
    return found


class AudioOut:
    """A context's audio in its output format: `feed` each 16-bit mono 24 kHz piece, then
    `close` once for the stream's last bytes (the resampler's and the encoder's tails)."""

    def __init__(self, fmt: OutputFormat) -> None:
        self.fmt = fmt
        self._av: Any = None
        self._resampler: Any = None
        if fmt.rate != SAMPLE_RATE:
            self._av = load_av()
            self._resampler = self._av.AudioResampler(format="s16", layout="mono", rate=fmt.rate)
        self._encoder: StreamEncoder | None = None
        if fmt.codec in ("mp3", "opus"):
            self._encoder = StreamEncoder(fmt.codec, fmt.rate, (fmt.kbps or 0) * 1000 or None)
        self._closed = False

    def feed(self, pcm: bytes) -> bytes:
        if not pcm:
            return b""
        return self._encode(self._resample(pcm))

    def close(self) -> bytes:
        if self._closed:
            return b""
        self._closed = True
        out = self._encode(self._resample(None)) if self._resampler is not None else b""
        if self._encoder is not None:
            out += self._encoder.close()
        return out

    def _resample(self, pcm: bytes | None) -> bytes:
        if self._resampler is None:
            return pcm or b""
        frame = None
        if pcm is not None:
            samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
            frame = self._av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate = SAMPLE_RATE
        frames = self._resampler.resample(frame)
        return b"".join(f.to_ndarray().astype("<i2", copy=False).tobytes() for f in frames)

    def _encode(self, pcm: bytes) -> bytes:
        if self._encoder is not None:
            return self._encoder.feed(pcm)
        if self.fmt.codec == "ulaw":
            return ulaw(pcm)
        return pcm


def ulaw(pcm: bytes) -> bytes:
    """16-bit little-endian PCM as G.711 μ-law bytes (one a sample)."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.int32)
    sign = np.where(samples < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(samples), _ULAW_CLIP) + _ULAW_BIAS
    exponent = np.floor(np.log2(magnitude)).astype(np.int32) - 7
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    encoded: bytes = (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()
    return encoded
