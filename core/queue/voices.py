"""Voices: the built-in names every engine provides, and the registry of voices clients register
(metadata, data and each owner's accounting, kept in Redis and shared by every worker)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from core.infra.redis_client import RedisClient
from core.infra.settings import Settings
from core.queue import scripts
from core.queue.durable import run_replicated
from core.queue.keys import Keys
from core.text.languages import language_runs

# The account of every registered voice together (no client's id has this form).
QUEUE_ACCOUNT = "queue:all"


class VoiceQuotaReached(Exception):
    """A registration past its owner's, its address's or the queue's (`per`) voices (`kind`
    "count") or bytes ("bytes"), `used` of them already."""

    def __init__(self, kind: str, per: str, used: int) -> None:
        super().__init__(f"{kind} quota of the {per}")
        self.kind, self.per, self.used = kind, per, used


@dataclass(frozen=True)
class Voice:
    name: str
    language: str  # BCP 47
    gender: str
    description: str
    builtin: bool = True

    def public(self) -> dict[str, Any]:
        return asdict(self)


# Built-in voices. Every engine maps each name to its own voice (eSpeak variant, ChatTTS speaker
# embedding), so a client's choice works whichever engine serves it.
BUILTIN_VOICES: tuple[Voice, ...] = (
    Voice("zh_female", "zh-CN", "female", "Mandarin, female"),
    Voice("zh_male", "zh-CN", "male", "Mandarin, male"),
    Voice("en_female", "en-US", "female", "English, female"),
    Voice("en_male", "en-US", "male", "English, male"),
    Voice("zh_female_2", "zh-CN", "female", "Mandarin, female, brighter"),
    Voice("zh_male_2", "zh-CN", "male", "Mandarin, male, deeper"),
    Voice("en_female_2", "en-GB", "female", "English (British), female"),
    Voice("en_male_2", "en-GB", "male", "English (British), male"),
)
BUILTIN_BY_NAME = {v.name: v for v in BUILTIN_VOICES}
DEFAULT_VOICE = "zh_female"  # what Mandarin text is read by when a job names no voice
# A job that names no voice is read in its text's language (by_language), on every API.
DEFAULT_VOICES = {"zh": DEFAULT_VOICE, "en": "en_female"}
# OpenAI voice -> (our voice for English text, our voice for Mandarin text), taken by every API
# that takes a voice. README has the table.
OPENAI_VOICES: dict[str, tuple[str, str]] = {
    "alloy": ("en_female", "zh_female"),
    "ash": ("en_male", "zh_male"),
    "ballad": ("en_male_2", "zh_male_2"),
    "coral": ("en_female_2", "zh_female_2"),
    "echo": ("en_male", "zh_male"),
    "fable": ("en_male_2", "zh_male_2"),
    "onyx": ("en_male_2", "zh_male_2"),
    "nova": ("en_female", "zh_female"),
    "sage": ("en_female_2", "zh_female_2"),
    "shimmer": ("en_female_2", "zh_female"),
    "verse": ("en_male", "zh_male"),
    "marin": ("en_female", "zh_female_2"),
    "cedar": ("en_male", "zh_male_2"),
}


# Two built-in voices joined, 'en_female|zh_female': a voice per language, each run of sentences
# read by the voice of its language (core/queue/voice_names.py reads it).
PAIR = "|"


def by_language(english: str, mandarin: str, text: str) -> str:
    """The voice that reads `text`: the English or the Mandarin one by its language, or both, a
    voice per language, when its sentences are of both."""
    languages = {language for language, _, _ in language_runs(text)}
    if len(languages) > 1:
        return f"{english}{PAIR}{mandarin}"
    return mandarin if "zh" in languages else english


def default_voice(text: str) -> str:
    """The voice for a job that names none: the built-in one of its text's language (of each
    sentence's, when it has both)."""
    return by_language(DEFAULT_VOICES["en"], DEFAULT_VOICES["zh"], text)


class VoiceRegistry:
    """Registered voices of one queue: metadata in `keys.voices`, data in `keys.voice_data`,
    sizes per owner in `keys.owned_voices`."""

    def __init__(self, redis: RedisClient, keys: Keys, settings: Settings) -> None:
        self._redis, self._keys, self._settings = redis, keys, settings
        self._register = scripts.Script(redis, "voice_register")

    async def exists(self, name: str) -> bool:
        return bool(await self._redis.hexists(self._keys.voices, name))

    async def metadata(self, name: str) -> bytes | None:
        """A registered voice's metadata record (JSON), never its data."""
        raw: bytes | None = await self._redis.hget(self._keys.voices, name)  # type: ignore[assignment]
        return raw

    async def data(self, name: str) -> tuple[bytes | None, bytes | None]:
        """A registered voice's metadata record and its data (None, None: not registered)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hget(self._keys.voices, name)
            pipe.hget(self._keys.voice_data, name)
            raw, data = await pipe.execute()
        return raw, data

    async def all(self) -> dict[str, bytes]:
        """Every registered voice's metadata record, by name."""
        raw: Any = await self._redis.hgetall(self._keys.voices)
        return {k.decode(): v for k, v in raw.items()}

    async def names(self) -> list[str]:
        raw: Any = await self._redis.hkeys(self._keys.voices)
        return sorted(n.decode() for n in raw)

    async def owned(self, owner: str) -> dict[str, int]:
        """The voices `owner` registered, with their sizes in bytes."""
        raw: Any = await self._redis.hgetall(self._keys.owned_voices(owner))
        return {k.decode(): int(v) for k, v in raw.items()}

    async def register(
        self,
        name: str,
        owner: str,
        record: bytes,
        data: str,
        source: str | None = None,
        quotas: tuple[tuple[int, int], ...] = (),
    ) -> bool:
        """Register `name` (False: taken), counted under `owner` and `source` (the address it
        came from) and the queue's account within `quotas` ((most voices, most bytes) for each,
        in that order; VoiceQuotaReached past one); confirmed by CHATTTS_REDIS_MIN_REPLICAS
        replicas (NotReplicated otherwise)."""
        k = self._keys
        # Each account with its quota: the owner's, its address's, the queue's (voices live in
        # Redis: their bytes in all have a budget of their own).
        named = [("owner", owner), ("address", source), ("queue", QUEUE_ACCOUNT)]
        pairs = [
            (per, k.owned_voices(name), quota)
            for (per, name), quota in zip(named, (*quotas, (0, 0), (0, 0), (0, 0)), strict=False)
            if name
        ]
        size = len(record) + len(data.encode())
        keys, args = self._register.signature.order(
            {"voices": k.voices, "voice_data": k.voice_data, "accounts": [k for _, k, _ in pairs]},
            {
                "name": name,
                "metadata": record,
                "data": data,
                "size": size,
                "quotas": [n for _, _, quota in pairs for n in quota],
            },
        )
        result = await run_replicated(
            self._redis,
            self._register.registered,
            keys,
            args,
            self._settings.redis.redis_min_replicas,
            self._settings.redis.redis_replica_wait_ms,
            changed=lambda r: r == 1,
        )
        if isinstance(result, list):
            raise VoiceQuotaReached(
                scripts.as_text(result[0]), pairs[int(result[1]) - 1][0], int(result[2])
            )
        return bool(result)

    async def delete(self, name: str, owner: str | None, source: str | None = None) -> bool:
        """Remove `name` with its data and its owner's (and source's) accounting; False if it
        was not there."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.voices, name)
            pipe.hdel(self._keys.voice_data, name)
            for account in (owner, source, QUEUE_ACCOUNT):
                if account is not None:
                    pipe.hdel(self._keys.owned_voices(account), name)
            deleted, *_ = await pipe.execute()
        return bool(deleted)
