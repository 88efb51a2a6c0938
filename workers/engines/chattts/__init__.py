"""The ChatTTS engine (`pip install '.[chattts]'`): its light API here, the engine on first use.

Importing this module does not import torch: `find_weights` serves `create_engine("auto")`;
`create` (the engine registry's entry) and `ChatTTSEngine` load the engine on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workers.engines.base import Capabilities
from workers.engines.chattts.loading.loader import find_weights

if TYPE_CHECKING:
    from core.infra.settings import Settings
    from workers.engines.base import Engine
    from workers.engines.chattts.engine import ChatTTSEngine

__all__ = ["CAPABILITIES", "ChatTTSEngine", "create", "find_weights"]


# What ChatTTS does on our runtime (the library's `infer` hands each segment over whole).
CAPABILITIES = Capabilities(
    voice_data="chattts",
    blends=True,
    knobs=frozenset({"speed", "seed", "temperature", "top_p", "top_k", "refine", "prompt"}),
    streaming="chunks",
    alignment=False,
    deterministic=False,  # unseeded rows draw fresh randomness: no result cached for them
    normalizer="chattts",
)


def create(settings: Settings) -> Engine:
    """The engine registry's entry: our decode runtime, or ChatTTS's own `infer` behind the
    batch adapter (CHATTTS_RUNTIME=library)."""
    from workers.engines.base import EngineError

    if settings.chattts.runtime == "library":
        from workers.engines.batching import Batched
        from workers.engines.chattts.library_engine import LibraryEngine

        return Batched(LibraryEngine(settings))
    if settings.chattts.runtime != "ours":
        raise EngineError(
            f"unknown CHATTTS_RUNTIME {settings.chattts.runtime!r}: use ours or library"
        )
    from workers.engines.chattts.engine import ChatTTSEngine

    return ChatTTSEngine(settings)


def __getattr__(name: str) -> Any:
    if name == "ChatTTSEngine":
        from workers.engines.chattts.engine import ChatTTSEngine

        return ChatTTSEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
