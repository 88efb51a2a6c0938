"""The result cache's digest: every request field that changes the audio changes it."""

from __future__ import annotations

from typing import Any

import pytest

from core.queue.cache import cache_digest
from core.queue.job import SynthesisRequest


def _digest(**fields: Any) -> str | None:
    request = SynthesisRequest(text="你好", seed=1, **fields)
    return cache_digest("chattts", "v", request, ["你好"], None, deterministic=False)


@pytest.mark.parametrize(
    "change",
    [
        {"voice": "en_male"},
        {"speed": 1.5},
        {"temperature": 0.5},
        {"refine": True},
        {"refine": True, "prompt": "[oral_2][laugh_0][break_6]"},
        {"prompt": "[oral_2]"},
        {"normalize": False},
        {"format": "mp3"},
    ],
)
def test_fields_that_change_the_audio_change_the_digest(change: dict[str, Any]) -> None:
    assert _digest(**change) != _digest()


def test_the_same_request_has_the_same_digest() -> None:
    assert _digest(prompt="[oral_2]", normalize=False) == _digest(
        prompt="[oral_2]", normalize=False
    )
    assert _digest(refine=True, prompt="[oral_2]") != _digest(refine=True, prompt="[oral_3]")
    assert _digest(stream=True) == _digest()  # how it is delivered is not what it sounds like
    assert _digest(cache=False) is None
