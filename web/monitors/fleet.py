"""What the live workers' engines can do, read from the capabilities in their heartbeats (never
from an engine's name), and the submit-time checks it implies.

When every live worker reads text through ChatTTS's normalizer, text it reduces to nothing (only
scripts it cannot read, emoji, symbols) is refused at submit with a clear error instead of failing
later in a worker. The engines in use are looked up at most once per `ENGINES_TTL_S`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from core.queue.speakers import unspeakable
from core.queue.store import Queue
from core.queue.voice_names import is_derived, language_of
from web.errors import ApiError

# A worker that starts or stops changes the answer within this long.
ENGINES_TTL_S = 1.5
# Normalizing this many characters takes a fraction of a millisecond; longer text runs off-loop.
_NORMALIZE_ON_LOOP = 256


@dataclass(frozen=True)
class LiveEngines:
    """The live workers' engines: their names (for messages), whether any speaks registered
    voices, and the normalizer each reads text through (None: none the web tier knows)."""

    names: frozenset[str]
    registered_voices: bool
    blends: bool
    normalizers: frozenset[str | None]


@dataclass
class _Engines:
    live: LiveEngines
    at: float


# One entry per Queue (one Queue per application), dropped with it.
_ENGINES: WeakKeyDictionary[Queue, _Engines] = WeakKeyDictionary()
_normalizer_loaded = False


async def engines_in_use(queue: Queue) -> LiveEngines:
    """What the live workers' engines can do (cached for ENGINES_TTL_S)."""
    now = time.monotonic()
    cached = _ENGINES.get(queue)
    if cached is not None and now - cached.at < ENGINES_TTL_S:
        return cached.live
    beats = await queue.fleet.heartbeats()
    capabilities = [capabilities_of(beat) for beat in beats]
    live = LiveEngines(
        names=frozenset(str(beat.get("engine", "unknown")) for beat in beats),
        registered_voices=any(c.get("registered_voices") is True for c in capabilities),
        blends=any(c.get("blends") is True for c in capabilities),
        normalizers=frozenset(_normalizer(c) for c in capabilities),
    )
    _ENGINES[queue] = _Engines(live, now)
    return live


def capabilities_of(beat: dict[str, Any]) -> dict[str, Any]:
    """A heartbeat's engine capabilities ({} from a worker that publishes none)."""
    capabilities = beat.get("capabilities")
    return capabilities if isinstance(capabilities, dict) else {}


def _normalizer(capabilities: dict[str, Any]) -> str | None:
    normalizer = capabilities.get("normalizer")
    return normalizer if isinstance(normalizer, str) else None


def chattts_speakable(text: str, voice: str, spell: bool = True) -> bool:
    """Whether ChatTTS's normalization leaves anything to say (as its engine reads `voice`;
    `spell`: the request's `normalize`, numbers and symbols spelled out first)."""
    global _normalizer_loaded
    from core.text.normalize import is_speakable  # its first import takes a while: see below

    hint = language_of(voice, text) if is_derived(voice) else "zh"
    speakable = is_speakable(text, hint, spell=spell)
    _normalizer_loaded = True
    return speakable


async def check_voice_speakable(queue: Queue, voice: str) -> None:
    """422 when the voice would reach only workers that cannot speak it: a registered voice
    where no live worker's engine speaks registered voices (`voice_needs_chattts`: eSpeak NG's
    do not), a blend where none mixes voices (`voice_blend_unsupported`)."""
    live = await engines_in_use(queue)
    if not live.names:
        return  # no worker yet: the one that takes the job checks it (workers/intake.py)
    refusal = unspeakable(
        voice,
        ", ".join(sorted(live.names)),
        registered_voices=live.registered_voices,
        blends=live.blends,
        who="the live workers run",
    )
    if refusal is not None:
        raise ApiError(422, refusal.message, code=refusal.code, param="voice")


async def check_speakable(queue: Queue, text: str, voice: str, spell: bool = True) -> None:
    """422 `text_not_speakable` when every live worker reads text through ChatTTS's normalizer
    and it would say nothing (`spell`: the request's `normalize`)."""
    live = await engines_in_use(queue)
    if live.normalizers != {"chattts"}:
        return
    if _normalizer_loaded and len(text) <= _NORMALIZE_ON_LOOP:
        speakable = chattts_speakable(text, voice, spell)
    else:  # the first call imports the number libraries; long text takes milliseconds
        speakable = await asyncio.to_thread(chattts_speakable, text, voice, spell)
    if not speakable:
        if spell:
            message = (
                "'text' has nothing ChatTTS can speak: it reads Chinese and English (letters, "
                "numbers, dates, money and common symbols are spelled out); other scripts, emoji "
                "and lone symbols are dropped"
            )
        else:
            message = (
                "'text' has nothing ChatTTS can speak with 'normalize': false: it reads Chinese "
                "characters and English letters only; digits, symbols, other scripts and emoji "
                "are dropped (send 'normalize': true to have numbers and symbols spelled out)"
            )
        raise ApiError(422, message, code="text_not_speakable", param="text")
