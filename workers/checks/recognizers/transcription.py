"""A transcription server beside the workers, spoken to as OpenAI's `/v1/audio/transcriptions`
(faster-whisper or SenseVoice behind speaches, whisper.cpp's server, vLLM): the languages its
model covers, on its own device, never in the engine's way."""

from __future__ import annotations

import asyncio
import math

import aiohttp
import numpy as np

from core.audio import formats as audio
from workers.checks.recognizers.base import Heard, Unheard
from workers.checks.words import Slot, words_of


class Transcription:
    # A transcript misses a word or two of correct speech now and then (names, numbers read
    # another way): three in a row, or a third of the words, fail a segment.
    fail_run = 3
    max_error_rate = 0.34
    max_extra_s = math.inf  # a transcript's extra words count as words
    calibrated = False  # a server's model hears voices alike; its start would wait on it

    def __init__(self, url: str, model: str, timeout_s: float, api_key: str | None = None) -> None:
        self.name = f"transcription {model}"
        self.url, self.model, self.timeout_s = url, model, timeout_s
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._session: aiohttp.ClientSession | None = None

    def covers(self, language: str) -> bool:
        return language in ("en", "zh")

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def hear(
        self, samples: np.ndarray, rate: int, expected: list[Slot], language: str
    ) -> Heard:
        if self._session is None:
            await self.start()
        assert self._session is not None
        wav = await asyncio.to_thread(audio.encode, samples, rate, "wav")
        form = aiohttp.FormData()
        form.add_field("file", wav, filename="segment.wav", content_type="audio/wav")
        form.add_field("model", self.model)
        form.add_field("language", language)
        form.add_field("response_format", "json")
        try:
            async with self._session.post(self.url, data=form, headers=self._headers) as answer:
                if answer.status != 200:
                    raise Unheard(f"{self.name} answered {answer.status}")
                body = await answer.json(content_type=None)
        except TimeoutError:
            raise Unheard(f"{self.name} took more than {self.timeout_s:g} s") from None
        except (aiohttp.ClientError, ValueError) as exc:
            raise Unheard(f"{self.name} is down: {exc}") from None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise Unheard(f"{self.name} answered no text")
        return Heard(words=words_of(text, language))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
