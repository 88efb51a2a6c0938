"""What the live workers' engines can do, read from the capabilities in their heartbeats (never
from an engine's name), and the submit-time checks it implies.

When every live worker reads text through a normalizer this service knows (ChatTTS's:
core/text/normalizers.py), text they reduce to nothing (only scripts they cannot read, emoji,
symbols) is refused at submit with a clear error instead of failing later in a worker. The
engines in use are looked up at most once per `ENGINES_TTL_S`.
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
from core.text.normalizers import Normalizer, normalizer_named
from core.voices.formats import VoiceFormat, formats_for
from web.errors import ApiError

# A worker that starts or stops changes the answer within this long.
ENGINES_TTL_S = 1.5
# Normalizing this many characters takes a fraction of a millisecond; longer text runs off-loop.
_NORMALIZE_ON_LOOP = 256


@dataclass(frozen=True)
class LiveEngines:
    """The live workers' engines: their names (for messages), the formats of registered voices'
    data they speak, and the normalizer each reads text through (None: none the web tier knows)."""

    names: frozenset[str]
    voice_formats: frozenset[str]
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
    live = _live(await queue.fleet.heartbeats())
    _ENGINES[queue] = _Engines(live, now)
    return live


def _live(beats: list[dict[str, Any]]) -> LiveEngines:
    capabilities = [capabilities_of(beat) for beat in beats]
    return LiveEngines(
        names=frozenset(str(beat.get("engine", "unknown")) for beat in beats),
        voice_formats=frozenset(f for c in capabilities if (f := _named(c, "voice_data"))),
        blends=any(c.get("blends") is True for c in capabilities),
        normalizers=frozenset(_named(c, "normalizer") for c in capabilities),
    )


def capabilities_of(beat: dict[str, Any]) -> dict[str, Any]:
    """A heartbeat's engine capabilities ({} from a worker that publishes none)."""
    capabilities = beat.get("capabilities")
    return capabilities if isinstance(capabilities, dict) else {}


def _named(capabilities: dict[str, Any], what: str) -> str | None:
    name = capabilities.get(what)
    return name if isinstance(name, str) else None


async def voice_formats(queue: Queue) -> list[VoiceFormat]:
    """The formats a registration's data is checked against: the live workers' (every format
    this service knows while none of them speaks registered voices). Read afresh, not from
    the submit checks' cache: a registration is rare, and must not hold a stale view for them."""
    return formats_for(_live(await queue.fleet.heartbeats()).voice_formats)


def _speakable(normalizers: list[Normalizer], text: str, voice: str, spell: bool) -> bool:
    """Whether any of `normalizers` leaves anything to say, as an engine reads `voice` (`spell`:
    the request's `normalize`, numbers and symbols spelled out first)."""
    global _normalizer_loaded
    hint = language_of(voice, text) if is_derived(voice) else "zh"
    speakable = any(normalizer.speakable(text, hint, spell) for normalizer in normalizers)
    _normalizer_loaded = True
    return speakable


async def check_speakable(queue: Queue, text: str, voice: str, spell: bool = True) -> None:
    """422 when the live workers cannot speak this: a voice that would reach only workers that
    cannot speak it (a registered voice where no live worker's engine speaks registered voices,
    `voice_needs_chattts`: eSpeak NG's do not; a blend where none mixes voices,
    `voice_blend_unsupported`), or `text_not_speakable` when every live worker reads text
    through a normalizer this service knows (core/text/normalizers.py) and none would leave
    anything to say (`spell`: the request's `normalize`)."""
    live = await engines_in_use(queue)
    if not live.names:
        return  # no worker yet: the one that takes the job checks it (workers/intake.py)
    refusal = unspeakable(
        voice,
        ", ".join(sorted(live.names)),
        registered_voices=bool(live.voice_formats),
        blends=live.blends,
        who="the live workers run",
    )
    if refusal is not None:
        raise ApiError(422, refusal.message, code=refusal.code, param="voice")
    named = [normalizer_named(name) for name in sorted(live.normalizers, key=str)]
    normalizers = [normalizer for normalizer in named if normalizer is not None]
    if not normalizers or len(normalizers) < len(named):
        return  # no worker yet, or one reads text in a way not known here: it may speak it
    if _normalizer_loaded and len(text) <= _NORMALIZE_ON_LOOP:
        speakable = _speakable(normalizers, text, voice, spell)
    else:  # the first call imports the number libraries; long text takes milliseconds
        speakable = await asyncio.to_thread(_speakable, normalizers, text, voice, spell)
    if not speakable:
        message = normalizers[0].refusal(spell)
        raise ApiError(422, message, code="text_not_speakable", param="text")
