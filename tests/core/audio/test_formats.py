"""Whole files of every format (core/audio/formats.py), each by the encoder the catalog names for
it: each decodes back to the samples' duration."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.audio.catalog import FORMATS
from core.audio.formats import SAMPLE_RATE, encode
from core.audio.stream_encode import load_av


def _decoded_seconds(data: bytes, fmt: str) -> float:
    if fmt == "pcm":
        return len(data) / 2 / SAMPLE_RATE
    if fmt != "aac":  # libsndfile reads every other format, whichever encoder wrote it
        samples, rate = sf.read(io.BytesIO(data))
        return len(samples) / rate
    av = load_av()
    with av.open(io.BytesIO(data)) as container:
        return sum(frame.samples for frame in container.decode(audio=0)) / SAMPLE_RATE


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_decodes_back_to_its_duration(fmt: str) -> None:
    t = np.arange(SAMPLE_RATE * 2) / SAMPLE_RATE
    audio = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    data = encode(audio, SAMPLE_RATE, fmt)
    assert data
    # Lossy codecs pad to whole frames: within 60 ms.
    assert abs(_decoded_seconds(data, fmt) - 2.0) < 0.06, fmt


LONG_S = 100  # past the 87.4 s at 24 kHz that one libsndfile Vorbis write crashes at

_ENCODE_LONG = f"""
import numpy as np
from core.audio.formats import SAMPLE_RATE, encode
from core.audio.stream_encode import StreamEncoder, to_pcm16

t = np.arange(SAMPLE_RATE * {LONG_S}) / SAMPLE_RATE
audio = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
for fmt in {list(FORMATS)!r}:
    whole = encode(audio, SAMPLE_RATE, fmt)
    encoder = StreamEncoder(fmt, SAMPLE_RATE)
    streamed = encoder.feed(to_pcm16(audio)) + encoder.close()
    print(fmt, len(whole), len(streamed))
"""


def test_a_long_write_is_handed_to_every_encoder_in_slices() -> None:
    """100 s handed over at once, whole and as a stream, in every format: in a child process, so
    that an encoder that crashes fails this test rather than the run."""
    run = subprocess.run(
        [sys.executable, "-c", _ENCODE_LONG],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    assert len(run.stdout.splitlines()) == len(FORMATS), run.stdout
