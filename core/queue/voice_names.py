"""Voices a name alone says, with no registry: built-in names, seeds (`seed_2222`, or `2222` as
ChatTTS users share them), weighted blends of those (`en_female(2)+seed_2222(1)`) and a voice per
language (`en_female|zh_female`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.queue.job import MAX_SEED
from core.queue.voices import BUILTIN_BY_NAME, OPENAI_VOICES, PAIR, by_language
from core.text.languages import language_runs, mostly_mandarin

SEED_PREFIX = "seed_"
MAX_BLEND_PARTS = 4
MAX_WEIGHT = 100.0
_SEED = re.compile(r"(?:seed_)?(\d{1,10})")
# One part of a blend, as Kokoro's clients write it: a name, and its weight in parentheses.
_PART = re.compile(r"\s*([A-Za-z0-9_.-]{1,40})\s*(?:\(\s*(\d{1,3}(?:\.\d{1,3})?)\s*\))?\s*")
# Kokoro's voice names: the first letter its language, the second its gender. Its clients send
# these; each is read by our built-in voice of its gender in the text's language, in its accent
# where that is English.
KOKORO_ACCENTS = {"a": "en-US", "b": "en-GB", "z": "zh-CN"}
_KOKORO = re.compile(r"([abz])([fm])_[a-z]{2,20}")


class VoiceNameError(ValueError):
    """A blend or seed that cannot be read; the message says what to send instead."""


@dataclass(frozen=True)
class Blend:
    """Built-in or seed voices mixed by weight (ChatTTS: their speaker embeddings)."""

    parts: tuple[tuple[str, float], ...]

    @property
    def name(self) -> str:
        return "+".join(f"{part}({weight:g})" for part, weight in self.parts)


def seed_of(name: str) -> int | None:
    """The seed a seed voice is drawn from (None: not a seed voice)."""
    match = _SEED.fullmatch(name)
    if match is None or (not name.startswith(SEED_PREFIX) and name != match.group(1)):
        return None
    seed = int(match.group(1))
    return seed if seed <= MAX_SEED else None


def blend_of(name: str) -> Blend | None:
    """A blend's parts (None: `name` has no '+', or a weight alone on one voice)."""
    if "+" not in name and "(" not in name:
        return None
    parts: list[tuple[str, float]] = []
    for piece in name.split("+"):
        match = _PART.fullmatch(piece)
        if match is None:
            raise VoiceNameError(
                f"cannot read the voice blend {name[:80]!r}: write voices joined by '+', each "
                "with an optional weight, e.g. 'en_female(2)+seed_2222(1)'"
            )
        weight = float(match.group(2)) if match.group(2) else 1.0
        if not 0 < weight <= MAX_WEIGHT:
            raise VoiceNameError(f"a blend's weights are above 0 and at most {MAX_WEIGHT:g}")
        parts.append((match.group(1), weight))
    if len(parts) > MAX_BLEND_PARTS:
        raise VoiceNameError(f"a blend mixes at most {MAX_BLEND_PARTS} voices")
    return Blend(tuple(parts))


def pair_of(name: str) -> tuple[str, str] | None:
    """A voice per language's English and Mandarin voices (None: `name` has no '|')."""
    if PAIR not in name:
        return None
    voices = [BUILTIN_BY_NAME.get(part.strip()) for part in name.split(PAIR)]
    english = [v.name for v in voices if v is not None and v.language.startswith("en")]
    mandarin = [v.name for v in voices if v is not None and v.language.startswith("zh")]
    if len(voices) != 2 or len(english) != 1 or len(mandarin) != 1:
        raise VoiceNameError(
            f"cannot read the voice per language {name[:80]!r}: write an English and a Mandarin "
            "built-in voice joined by '|', e.g. 'en_female|zh_female' (GET /v1/voices)"
        )
    return english[0], mandarin[0]


def voice_runs(name: str, text: str) -> list[tuple[str, int, int]]:
    """Who reads which characters of `text`: a voice per language, each run of sentences in its
    language's voice; any other voice, all of it. (voice, start, end), in order."""
    pair = pair_of(name) if PAIR in name else None  # inline: every job's path
    if pair is None:
        return [(name, 0, len(text))]
    english, mandarin = pair
    return [(mandarin if lang == "zh" else english, a, b) for lang, a, b in language_runs(text)]


def is_derived(name: str) -> bool:
    """A name the engines speak without the registry: built-in, seed, blend or a voice per
    language (as canonical)."""
    if name in BUILTIN_BY_NAME or seed_of(name) is not None:  # inline: every submit's path
        return True
    try:
        blend = blend_of(name)
        pair = pair_of(name)
    except VoiceNameError:
        return False
    if pair is not None:
        return True
    return blend is not None and all(_plain(part) for part, _ in blend.parts)


def _plain(name: str) -> bool:
    return name in BUILTIN_BY_NAME or seed_of(name) is not None


def alias(name: str, text: str) -> str | None:
    """Ours for another service's name, by the text's language (of each sentence's, when it has
    both: a voice per language): OpenAI's by its table, Kokoro's by its gender, in its accent
    where that is English (None: neither)."""
    lowered = name.strip().lower()
    mapped = OPENAI_VOICES.get(lowered)
    if mapped is not None:
        return by_language(*mapped, text)
    kokoro = _KOKORO.fullmatch(lowered)
    if kokoro is not None:
        gender = "female" if kokoro.group(2) == "f" else "male"
        suffix = "_2" if KOKORO_ACCENTS[kokoro.group(1)] == "en-GB" else ""
        return by_language(f"en_{gender}{suffix}", f"zh_{gender}", text)
    return None


def canonical(name: str, text: str) -> str:
    """A request's voice as the queue keeps it: aliases mapped, a bare seed as `seed_N`, a blend
    written out with its weights; any other name as given (a registered voice, or unknown)."""
    name = name.strip()
    seed = seed_of(name)
    if seed is not None:
        return f"{SEED_PREFIX}{seed}"
    pair = pair_of(name) if PAIR in name else None  # inline: every submit's path
    if pair is not None:
        return PAIR.join(pair)
    blend = blend_of(name)
    if blend is None:
        return alias(name, text) or name
    parts = tuple((_single(part, text), weight) for part, weight in blend.parts)
    if len(parts) == 1:
        return parts[0][0]
    return Blend(parts).name


def _single(part: str, text: str) -> str:
    seed = seed_of(part)
    if seed is not None:
        return f"{SEED_PREFIX}{seed}"
    resolved = alias(part, text) or part
    if resolved not in BUILTIN_BY_NAME:
        raise VoiceNameError(
            f"a blend mixes built-in and seed voices; {part!r} is neither (GET /v1/voices)"
        )
    return resolved


def language_of(name: str, text: str) -> str:
    """The language a derived voice reads in: a built-in's own, a blend's first built-in's,
    else the text's ("zh" or "en")."""
    blend = blend_of(name)
    for part in [p for p, _ in blend.parts] if blend is not None else [name]:
        builtin = BUILTIN_BY_NAME.get(part)
        if builtin is not None:
            return "en" if builtin.language.startswith("en") else "zh"
    return "zh" if mostly_mandarin(text) else "en"
