"""ElevenLabs' `output_format` (pcm_16000, mp3_22050_32, ulaw_8000, opus_48000_64, ...): parsed,
and a context's 24 kHz PCM turned into it piece by piece (one resampler and one encoder per
context, so that the joints between pieces are clean)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.audio.formats import SAMPLE_RATE
from core.audio.stream_encode import StreamEncoder, load_av
from web.errors import ApiError

PCM_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
# Sample rate -> the bit rates (kbit/s) ElevenLabs names for it; the first is the default.
MP3_RATES = {22050: (32,), 24000: (48,), 44100: (128, 32, 64, 96, 192)}
OPUS_RATES = {48000: (64, 32, 96, 128, 192)}
ULAW_RATES = (8000,)
_NAME = re.compile(r"(pcm|mp3|opus|ulaw)_(\d{4,5})(?:_(\d{2,3}))?")
# μ-law (G.711): the bias added to a sample's magnitude, and the largest magnitude encoded.
_ULAW_BIAS, _ULAW_CLIP = 0x84, 32635


@dataclass(frozen=True)
class OutputFormat:
    """An `output_format`: its codec, sample rate and (mp3, opus) bit rate in kbit/s."""

    name: str
    codec: str
    rate: int
    kbps: int | None = None


def supported_formats() -> list[str]:
    names = [f"pcm_{rate}" for rate in PCM_RATES]
    for codec, table in (("mp3", MP3_RATES), ("opus", OPUS_RATES)):
        names += [f"{codec}_{rate}_{kbps}" for rate, rates in table.items() for kbps in rates]
    return [*names, "ulaw_8000"]


def output_format(name: str) -> OutputFormat:
    """The format `name` names; 422 `unsupported_format` listing the ones served."""
    match = _NAME.fullmatch(name)
    if match is not None:
        codec, rate, kbps = match[1], int(match[2]), int(match[3]) if match[3] else None
        if kbps is None and codec in ("pcm", "ulaw") and rate in _rates(codec):
            return OutputFormat(name, codec, rate)
        bit_rates = MP3_RATES if codec == "mp3" else OPUS_RATES if codec == "opus" else {}
        if rate in bit_rates and (kbps is None or kbps in bit_rates[rate]):
            return OutputFormat(name, codec, rate, kbps or bit_rates[rate][0])
    raise ApiError(
        422,
        f"output_format {name!r} is not served here; the formats are "
        f"{', '.join(sorted(supported_formats()))}",
        code="unsupported_format",
        param="output_format",
    )


def _rates(codec: str) -> tuple[int, ...]:
    return PCM_RATES if codec == "pcm" else ULAW_RATES


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
