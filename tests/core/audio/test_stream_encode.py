"""Streams of every format (core/audio/stream_encode.py): fed a piece at a time, each piece's
bytes sent as they come, the whole decodes back to every piece's duration; Vorbis included."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from core.audio.catalog import FORMATS
from core.audio.formats import SAMPLE_RATE
from core.audio.stream_encode import StreamEncoder, _SoundSink, flac_with_total, load_av, to_pcm16
from tests.core.audio.test_formats import _decoded_seconds


def _ffmpeg_seconds(data: bytes) -> float:
    av = load_av()
    with av.open(io.BytesIO(data)) as container:
        return sum(frame.samples for frame in container.decode(audio=0)) / SAMPLE_RATE


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_stream_fed_in_pieces_decodes_to_every_piece(fmt: str) -> None:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    second = to_pcm16((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32))
    encoder = StreamEncoder(fmt, SAMPLE_RATE)
    sent = [encoder.feed(second) for _ in range(5)]
    sent.append(encoder.close())
    assert sum(1 for piece in sent[:-1] if piece) >= 2, "bytes left before the end"
    if fmt == "wav":  # a stream's header says "until the end": read as the samples after it
        assert abs((len(b"".join(sent)) - 44) / 2 / SAMPLE_RATE - 5.0) < 0.001
        return
    # A streamed FLAC's length is "unknown" (libsndfile cannot read it whole): FFmpeg reads it.
    decoded = _ffmpeg_seconds if fmt == "flac" else _decoded_seconds
    assert abs(decoded(b"".join(sent), *([fmt] if fmt != "flac" else [])) - 5.0) < 0.1, fmt


def test_a_flac_streams_length_written_once_known() -> None:
    """A document's FLAC is a stream whose length is known at its end: written into its
    STREAMINFO, libsndfile reads it as any file."""
    pcm = to_pcm16(np.zeros(SAMPLE_RATE * 3 + 123, np.float32))
    encoder = StreamEncoder("flac", SAMPLE_RATE)
    data = encoder.feed(pcm) + encoder.close()
    whole = flac_with_total(data, len(pcm) // 2)
    assert len(whole) == len(data)
    assert sf.info(io.BytesIO(whole)).frames == SAMPLE_RATE * 3 + 123
    assert sf.read(io.BytesIO(whole))[0].size == SAMPLE_RATE * 3 + 123


def test_libsndfiles_output_refuses_to_go_back() -> None:
    sink = _SoundSink()
    sink.write(b"OggS page")
    assert sink.seek(0, 2) == sink.tell() == 9  # where it is: allowed
    assert sink.take() == b"OggS page"
    sink.seek(0)  # in libsndfile's callback: an exception there would be swallowed
    with pytest.raises(OSError, match="already sent"):
        sink.take()
