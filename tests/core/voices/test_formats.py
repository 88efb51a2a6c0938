"""The voice-data formats by the names engines give: known ones found, unknown ones fall back."""

from __future__ import annotations

import numpy as np
import pytest

from core.voices.formats import FORMATS, formats_for


def test_the_live_workers_formats_are_the_ones_checked() -> None:
    assert formats_for(frozenset({"chattts"})) == [FORMATS["chattts"]]


def test_with_no_known_format_live_every_known_format_is_checked() -> None:
    assert formats_for(frozenset()) == list(FORMATS.values())
    assert formats_for(frozenset({"a_newer_engines_format"})) == list(FORMATS.values())


def test_a_format_checks_data_and_packs_recordings_it_takes() -> None:
    chattts = FORMATS["chattts"]
    with pytest.raises(ValueError, match="not base16384"):
        chattts.check("no voice at all")
    shortest, _ = chattts.recording_s
    tone = 0.3 * np.sin(np.arange(int(24_000 * (shortest + 1))) / 10)
    assert chattts.check(chattts.from_recording(tone, 24_000, "hello there")) == "recording"
