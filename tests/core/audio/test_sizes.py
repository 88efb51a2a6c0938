"""The expected size of a job's audio, from its text: what storage admission charges."""

from __future__ import annotations

from core.audio.sizes import BYTES_PER_S, expected_bytes, speech_seconds


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
