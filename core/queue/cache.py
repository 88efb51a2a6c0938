"""The result cache: identical requests on the same engine and model share one stored result."""

from __future__ import annotations

import hashlib

import orjson

from core.queue.job import SynthesisRequest

# The parameters that change the audio: every one but these (the text is hashed normalized, apart;
# the rest say how and when the same audio is delivered).
_NOT_AUDIO = frozenset({"text", "cache", "stream", "stream_start", "stream_check", "priority"})
_AUDIO_FIELDS = tuple(name for name in SynthesisRequest.model_fields if name not in _NOT_AUDIO)


def cache_digest(
    engine: str,
    model_version: str,
    request: SynthesisRequest,
    segments: list[str],
    voice_data: str | None,
    deterministic: bool,
    scope: str = "",
) -> str | None:
    """A digest naming the result of this request, or None when it must not be cached.

    A sampling engine's output is only reproducible with a seed: without one, each request asks
    for a fresh sample and is never answered from the cache. `scope` (a client) keeps a result
    to whoever asked first: an instant answer would tell another client that someone already
    submitted that text.
    """
    if not request.cache or (not deterministic and request.seed is None):
        return None
    identity = {
        "engine": engine,
        "model": model_version,
        "params": {name: getattr(request, name) for name in _AUDIO_FIELDS},
        "voice_data": hashlib.sha256(voice_data.encode()).hexdigest() if voice_data else None,
        "segments": segments,  # the text as the engine will speak it (normalized, split)
        "scope": scope,
    }
    return hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()
