"""Whole files: libsndfile (soundfile) against FFmpeg's encoders (PyAV) for each compressed format,
on the same 30 s of speech-shaped audio: milliseconds per file, bytes, and whether the file
decodes back to the same duration. Behind the choice of one encoder stack (core/audio/).

    python -m bench.encoders [--seconds 30] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import soundfile as sf

from core.audio.catalog import AV_FORMATS
from core.audio.stream_encode import load_av, to_pcm16

RATE = 24_000
# libsndfile's container and subtype per format it writes.
SNDFILE = {
    "mp3": ("MP3", "MPEG_LAYER_III"),
    "opus": ("OGG", "OPUS"),
    "ogg": ("OGG", "VORBIS"),
    "flac": ("FLAC", "PCM_16"),
}
# FFmpeg's container, codec and bit rate for the one format the stream encoders lack.
AV_EXTRA = {"ogg": ("ogg", "vorbis", 64_000)}


def speech_like(seconds: float, seed: int = 0) -> np.ndarray:
    """Voiced bursts (a pitch with harmonics, syllable envelopes) and pauses, with some noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(RATE * seconds)) / RATE
    pitch = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = np.clip(np.sin(2 * np.pi * 3.5 * t), 0, None) * (np.sin(2 * np.pi * 0.3 * t) > -0.6)
    audio = 0.25 * voiced * envelope + 0.01 * rng.standard_normal(t.size)
    return audio.astype(np.float32)


def with_sndfile(samples: np.ndarray, fmt: str) -> bytes:
    container, subtype = SNDFILE[fmt]
    buffer = io.BytesIO()
    sf.write(buffer, samples, RATE, format=container, subtype=subtype)
    return buffer.getvalue()


def with_av(samples: np.ndarray, fmt: str) -> bytes:
    """One seekable file (its headers written at the end, as libsndfile's are)."""
    av = load_av()
    container_name, codec, bit_rate = AV_EXTRA.get(fmt) or AV_FORMATS[fmt]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container_name) as container:
        # FFmpeg's own Vorbis encoder (its wheels lack libvorbis) is marked experimental.
        options = {"strict": "experimental"} if codec == "vorbis" else {}
        stream = container.add_stream(codec, rate=RATE, layout="mono", options=options)
        if bit_rate:
            stream.bit_rate = bit_rate
        pcm = np.frombuffer(to_pcm16(samples), dtype="<i2").reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = RATE
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def decoded_seconds(data: bytes) -> float:
    av = load_av()
    with av.open(io.BytesIO(data)) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
    return float(samples) / RATE


def measure(
    encode: Callable[[np.ndarray, str], bytes], samples: np.ndarray, fmt: str, n: int
) -> tuple[float, int, float]:
    """Median milliseconds of `n` encodings, the file's bytes, its decoded seconds."""
    times: list[float] = []
    data = b""
    for _ in range(n):
        started = time.perf_counter()
        data = encode(samples, fmt)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, len(data), decoded_seconds(data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.encoders", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    samples = speech_like(args.seconds)
    print(f"{args.seconds:g} s of audio, median of {args.repeats}")
    print(f"{'format':6} {'stack':10} {'ms':>8} {'KB':>8} {'decoded s':>10}")
    for fmt in SNDFILE:
        for name, encode in (("soundfile", with_sndfile), ("pyav", with_av)):
            try:
                ms, size, seconds = measure(encode, samples, fmt, args.repeats)
            except Exception as exc:  # FFmpeg's Vorbis encoder takes stereo only
                print(f"{fmt:6} {name:10} unavailable: {exc}", flush=True)
                continue
            print(f"{fmt:6} {name:10} {ms:8.1f} {size / 1024:8.1f} {seconds:10.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
