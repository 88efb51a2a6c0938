"""The expected size of a job's audio, from its text: what storage admission charges."""

from __future__ import annotations

from core.audio.sizes import (
    BYTES_PER_S,
    MIN_STREAM_S,
    expected_bytes,
    speech_seconds,
    stream_bytes,
)


def test_speech_seconds_count_scripts_and_pauses() -> None:
    assert speech_seconds("a" * 120) == 10.0  # other scripts at 12 characters a second
    assert speech_seconds("你" * 40) == 10.0  # Mandarin at 4
    assert speech_seconds("[break_7]" * 10) == 7.0  # pauses at their lengths, not characters
    assert speech_seconds("[lbreak] hi") == 0.6 + 3 / 12


def test_a_document_keeps_one_copy_other_jobs_two() -> None:
    text = "a" * 1200  # 100 s
    assert expected_bytes(text, "wav", document=True) == 100 * BYTES_PER_S["wav"]
    assert expected_bytes(text, "wav", document=False) == 2 * 100 * BYTES_PER_S["wav"]
    assert expected_bytes(text, "mp3", document=False) == expected_bytes(text, "wav", False) / 3


def test_a_stream_is_charged_for_a_few_seconds_at_least() -> None:
    """A text of a letter and a mark: read out, it is longer than its characters' estimate."""
    assert speech_seconds("â)") < 1.0
    assert stream_bytes("â)") == MIN_STREAM_S * BYTES_PER_S["pcm"]
    long = "This sentence takes a few seconds to read. " * 10
    assert stream_bytes(long) == int(speech_seconds(long) * BYTES_PER_S["pcm"])
