"""Whole files: libsndfile (soundfile) against FFmpeg's encoders (PyAV) for each compressed format,
on the same 30 s of speech-shaped audio: milliseconds per file, bytes, and whether the file
decodes back to the same duration. Behind the choice of one encoder stack (core/audio/).
`--document-minutes`: a document's file in each format, encoded the worker's way (its parts
through one stream encoder, a batch at a time: workers/documents.py), each in a process of its
own: seconds per hour of speech, MB per hour, and the process's peak memory growth.

    python -m bench.encoders [--seconds 30] [--repeats 5] [--document-minutes 20]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import soundfile as sf

from bench.lib import cli
from core.audio.catalog import AV_FORMATS, CATALOG, JOINED_FORMATS
from core.audio.stream_encode import StreamEncoder, load_av, to_pcm16
from workers.documents import PARTS_PER_READ

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


PART_S = 10.0  # a document's part: one segment, a few sentences


def document_file(fmt: str, minutes: float) -> dict[str, float]:
    """One document's file encoded from its parts as the worker does (the output counted, not
    kept: the worker hands it on in pieces)."""
    part = to_pcm16(speech_like(PART_S))
    parts = int(minutes * 60 / PART_S)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, size = time.perf_counter(), 0
    encoder = StreamEncoder(fmt, RATE)
    for first in range(0, parts, PARTS_PER_READ):
        size += len(encoder.feed(part * min(PARTS_PER_READ, parts - first)))
    size += len(encoder.close())
    elapsed = time.perf_counter() - started
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    hours = parts * PART_S / 3600
    return {
        "s_per_hour": elapsed / hours,
        "mb_per_hour": size / 1e6 / hours,
        "peak_mb": grown / 1024,
    }


def documents(minutes: float) -> None:
    print(f"\na document's file, {minutes:g} minutes in parts of {PART_S:g} s, a process each")
    print(f"{'format':6} {'s per hour':>11} {'MB per hour':>12} {'peak MB':>8}")
    wav_mb = 2 * RATE * 3600 / 1e6
    print(f"{'wav':6} {'0 (joined)':>11} {wav_mb:12.1f} {'0':>8}")
    for fmt in (f for f in CATALOG if f not in JOINED_FORMATS):
        out = subprocess.run(
            [sys.executable, "-m", "bench.encoders", "--one-document", fmt, str(minutes)],
            capture_output=True,
            check=True,
            text=True,
        )
        got = json.loads(out.stdout)
        print(
            f"{fmt:6} {got['s_per_hour']:11.1f} {got['mb_per_hour']:12.1f} {got['peak_mb']:8.1f}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("bench.encoders", __doc__, repeats=5)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--document-minutes", type=float, default=0.0)
    p.add_argument("--one-document", nargs=2, metavar=("FORMAT", "MINUTES"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one_document:
        print(json.dumps(document_file(args.one_document[0], float(args.one_document[1]))))
        return 0
    if args.document_minutes:
        documents(args.document_minutes)
        return 0
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
