"""What the engine tests share."""

from __future__ import annotations

from typing import Any

from core.queue.job import SynthesisRequest


def split(
    engine: Any, text: str, request: SynthesisRequest, language: str | None = None
) -> list[str]:
    """The texts of the segments `engine` cuts `text` into (its `pieces`, without offsets)."""
    return [segment for segment, _, _ in engine.pieces(text, request, language)]
