"""Synthesis engines: the registry `create_engine` picks from by name; `auto` prefers ChatTTS
when it is usable. An engine is one module with a `create(settings) -> Engine` (it reads its
knobs from the settings' engine section), and a line here."""

from __future__ import annotations

import importlib
import logging

from core.infra.settings import Settings
from workers.engines.base import Engine, EngineError, Segment

__all__ = ["ENGINES", "Engine", "EngineError", "Segment", "create_engine"]

log = logging.getLogger(__name__)

# Name -> the module whose `create(settings)` makes it (imported only when chosen: ChatTTS
# imports torch). CHATTTS_ENGINE may also name an engine outside this tree as "package.module".
ENGINES = {
    "espeak": "workers.engines.espeak",
    "chattts": "workers.engines.chattts",
}


def chosen_engine(settings: Settings) -> tuple[str, str | None]:
    """The engine CHATTTS_ENGINE names, `auto` resolved here, and why it is not ChatTTS when
    `auto` fell back (None otherwise)."""
    name = settings.engine.name
    if name != "auto":
        return name, None
    reason = _chattts_unavailable(settings)
    return ("chattts", None) if reason is None else ("espeak", reason)


def create_engine(settings: Settings) -> Engine:
    """Instantiate (not load) the engine CHATTTS_ENGINE names (`settings.engine.name`)."""
    name, fallback = chosen_engine(settings)
    if fallback is not None:
        log.info("engine auto: using espeak because %s", fallback)
    module_name = ENGINES.get(name, name if "." in name else None)
    if module_name is None:
        known = ", ".join(["auto", *ENGINES])
        raise ValueError(f"unknown engine {name!r}: use {known}, or a module path")
    module = importlib.import_module(module_name)
    engine: Engine = module.create(settings)
    return engine


def _chattts_unavailable(settings: Settings) -> str | None:
    """Why the ChatTTS engine cannot run here, or None when it can."""
    import importlib.util

    if importlib.util.find_spec("ChatTTS") is None or importlib.util.find_spec("torch") is None:
        return "the chattts extra is not installed (pip install 'chattts-online[chattts]')"
    try:
        from workers.engines.chattts import find_weights  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        return f"the ChatTTS engine cannot be imported: {exc}"
    problem: str | None = find_weights(settings.engine.model_dir)
    return problem
