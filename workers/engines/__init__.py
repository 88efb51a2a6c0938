"""Synthesis engines. `create_engine` picks one by name; `auto` prefers ChatTTS when usable."""

from __future__ import annotations

import logging

from core.infra.settings import Settings
from workers.engines.base import Engine, EngineError, Segment

__all__ = ["Engine", "EngineError", "Segment", "create_engine"]

log = logging.getLogger(__name__)


def create_engine(settings: Settings) -> Engine:
    """Instantiate (not load) the engine named by `settings.engine`."""
    name = settings.engine
    if name == "auto":
        reason = _chattts_unavailable(settings)
        if reason is None:
            name = "chattts"
        else:
            log.info("engine auto: using espeak because %s", reason)
            name = "espeak"
    if name == "espeak":
        from workers.engines.espeak import EspeakEngine

        return EspeakEngine(settings)
    if name == "chattts":
        from workers.engines.chattts import ChatTTSEngine  # type: ignore[import-not-found,unused-ignore]

        engine: Engine = ChatTTSEngine(settings)
        return engine
    raise ValueError(f"unknown engine {name!r}: use auto, espeak or chattts")


def _chattts_unavailable(settings: Settings) -> str | None:
    """Why the ChatTTS engine cannot run here, or None when it can."""
    import importlib.util

    if importlib.util.find_spec("ChatTTS") is None or importlib.util.find_spec("torch") is None:
        return "the chattts extra is not installed (pip install 'chattts-online[chattts]')"
    try:
        from workers.engines.chattts import find_weights  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        return f"the ChatTTS engine cannot be imported: {exc}"
    problem: str | None = find_weights(settings.model_dir)
    return problem
