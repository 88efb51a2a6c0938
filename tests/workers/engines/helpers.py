"""What the engine tests share."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.queue.job import SynthesisRequest
from workers.engines import base
from workers.engines.base import Segment


def split(
    engine: Any, text: str, request: SynthesisRequest, language: str | None = None
) -> list[str]:
    """The texts of the segments `engine` cuts `text` into (its `pieces`, without offsets)."""
    return [segment for segment, _, _ in engine.pieces(text, request, language)]


def synthesize(engine: Any, segments: list[Segment]) -> list[np.ndarray]:
    """The segments' audio: a whole-segment engine's own call (its `synthesize`), else made
    through the one boundary (`base.synthesize`)."""
    if hasattr(engine, "batch_key"):
        audio: list[np.ndarray] = engine.synthesize(segments)
        return audio
    return base.synthesize(engine, segments)
