"""Which voices an engine can speak: the one rule the web tier checks at submit, against the live
workers' engines, and a worker checks again when it takes the job, against its own."""

from __future__ import annotations

from dataclasses import dataclass

from core.queue.voice_names import blend_of, is_derived


@dataclass(frozen=True)
class Unspeakable:
    """Why the engines named cannot speak a voice: `code` for an API error, `message` to show."""

    code: str
    message: str


def unspeakable(
    voice: str, engines: str, *, registered_voices: bool, blends: bool, who: str
) -> Unspeakable | None:
    """None when engines that speak registered voices (or not) and mix voices (or not) can speak
    `voice`; `engines` names them and `who` says whose they are ("the live workers run")."""
    derived = is_derived(voice)
    if not derived and not registered_voices:
        return Unspeakable(
            "voice_needs_chattts",
            f"voice {voice!r} is a registered ChatTTS voice, and {who} {engines}, which speaks "
            "the built-in voices only: use a built-in voice (GET /v1/voices), or run a worker "
            "whose engine speaks registered voices (chattts)",
        )
    if derived and not blends and blend_of(voice) is not None:
        return Unspeakable(
            "voice_blend_unsupported",
            f"voice {voice!r} is a blend, and {who} {engines}, which cannot mix voices: name one "
            "voice, or run a worker whose engine blends them (chattts)",
        )
    return None
