"""ChatTTS voice data: built-in embeddings, validation, reference recordings. No model needed."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from core.queue.voices import BUILTIN_VOICES
from core.voices.chattts import (
    SPEAKER_DIM,
    b14_decode,
    builtin_embeddings,
    decode_embedding,
    parse_voice_data,
    recording_voice_data,
    validate_voice_data,
)


def test_every_builtin_voice_has_a_stored_embedding() -> None:
    stored = builtin_embeddings()
    assert {v.name for v in BUILTIN_VOICES} <= set(stored)
    values = [decode_embedding(e) for e in stored.values()]
    assert all(v.size == SPEAKER_DIM and np.isfinite(v).all() for v in values)
    assert len({v.tobytes() for v in values}) == len(values)  # all different speakers


def test_base16384_matches_the_library_chattts_uses() -> None:
    b14 = pytest.importorskip("pybase16384") if not os.environ.get("CI") else None
    if b14 is None:
        import pybase16384 as b14
    for n in [*range(30), 1000, 1537]:
        data = os.urandom(n)
        assert b14_decode(b14.encode_to_string(data)) == data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("", "empty"),
        ("hello", "not base16384"),
        ("{}", "chattts"),
        ("{not json", "JSON"),
        (json.dumps({"chattts": "sample", "spk_smp": "x"}), "spk_smp and txt_smp"),
        (json.dumps({"chattts": "recording", "sample_rate": 8000, "pcm16": ""}), "24000"),
    ],
)
def test_invalid_voice_data_is_explained(data: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_voice_data(data)


def test_embedding_of_another_width_is_refused() -> None:
    embedding = builtin_embeddings()["zh_female"]
    assert validate_voice_data(embedding) == "embedding"
    with pytest.raises(ValueError, match="512 values"):
        parse_voice_data(embedding, speaker_dim=512)


def test_recording_voice_data_round_trip() -> None:
    t = np.arange(44_100 * 2) / 44_100
    audio = (0.5 * np.sin(2 * np.pi * 330 * t)).astype(np.float32)
    data = recording_voice_data(audio, 44_100, "你好，我是3号")
    voice = parse_voice_data(data)
    assert voice.kind == "recording" and voice.txt_smp == "你好，我是三号"
    assert voice.recording is not None and abs(voice.recording.size - 48_000) <= 1
    int16 = (audio * 32767).astype(np.int16)
    assert validate_voice_data(recording_voice_data(int16, 44_100, "hello")) == "recording"


@pytest.mark.parametrize(
    ("seconds", "amplitude", "transcript", "message"),
    [
        (0.5, 0.5, "hi", "lasts 0.5 s"),
        (21, 0.5, "hi", "lasts 21.0 s"),
        (2, 0.0, "hi", "silent"),
        (2, 0.5, "😀", "transcript"),
    ],
)
def test_bad_recordings_are_refused(
    seconds: float, amplitude: float, transcript: str, message: str
) -> None:
    audio = amplitude * np.sin(np.arange(int(24_000 * seconds)) / 5.0)
    with pytest.raises(ValueError, match=message):
        recording_voice_data(audio, 24_000, transcript)
