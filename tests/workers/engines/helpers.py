"""What the engine tests share."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from workers.engines import base
from workers.engines.base import Segment


@functools.cache
def espeak() -> Any:
    """The test process's one eSpeak NG engine, loaded: the library calls back into the engine
    that loaded it last, so a second engine that is freed would leave it a dangling callback."""
    from workers.engines.espeak import EspeakEngine

    engine = EspeakEngine(Settings())
    engine.load()
    return engine


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
