"""A reference recording decoded to mono, every format, its header checked first; a damaged MP3
refused in words, with nothing written past the logs."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from core.voices.formats import FORMATS
from web.intake import recordings

SPAN = FORMATS["chattts"].recording_s


def mp3(seconds: float, rate: int = 44_100, channels: int = 2) -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    buffer = io.BytesIO()
    sf.write(buffer, np.stack([tone] * channels, axis=1), rate, format="MP3")
    return buffer.getvalue()


def damaged(data: bytes) -> bytes:
    """Frame sync words with nothing behind them, in the middle: a decoder complains per frame."""
    return data[:5000] + b"\xff\xfb\x00\x12" * 50 + data[5000:]


@pytest.mark.parametrize("fmt", ["WAV", "FLAC", "OGG", "MP3"])
def test_every_format_decodes_to_mono_at_its_rate(fmt: str) -> None:
    rate = 22_050
    t = np.arange(rate * 3) / rate
    stereo = np.stack([np.sin(2 * np.pi * 200 * t), np.zeros_like(t)], axis=1) * 0.4
    buffer = io.BytesIO()
    sf.write(buffer, stereo.astype(np.float32), rate, format=fmt)
    recordings.probe(buffer.getvalue(), SPAN)
    mono, got_rate = recordings.decode(buffer.getvalue(), SPAN)
    assert got_rate == rate and mono.ndim == 1 and mono.dtype == np.float32
    assert abs(mono.size / rate - 3) < 0.1
    assert 0.15 < np.abs(mono).max() < 0.25  # the two channels averaged


def test_a_long_mp3_is_refused_from_its_header() -> None:
    with pytest.raises(ValueError, match=r"lasts 25\.0 s"):
        recordings.probe(mp3(25, channels=1), SPAN)


def test_a_damaged_mp3_is_read_as_a_player_reads_it_and_writes_nothing_to_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    data = damaged(mp3(3))
    # libsndfile's MP3 decoder writes a line per bad frame to the process's stderr.
    with sf.SoundFile(io.BytesIO(data)) as f:
        for _ in f.blocks(blocksize=f.samplerate):
            pass
    assert "libmpg123" in capfd.readouterr().err
    recordings.probe(data, SPAN)  # its header is sound
    mono, rate = recordings.decode(data, SPAN)  # its bad frames skipped
    assert abs(mono.size / rate - 3) < 0.2
    cut = mp3(3)[:6000]  # an upload cut short: what came is read
    assert 1 < recordings.decode(cut, SPAN)[0].size / 44_100 < 2
    assert capfd.readouterr().err == ""


def test_what_is_no_audio_is_refused_in_words() -> None:
    for data in (b"not audio at all", b"ID3" + b"\x00" * 64, b"\xff\xfb" + b"\x00" * 10):
        with pytest.raises(ValueError, match="could not be decoded as audio"):
            recordings.probe(data, SPAN)
