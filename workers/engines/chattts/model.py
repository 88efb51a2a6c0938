"""What both ChatTTS runtimes share (`ChatTTSModel`): the weights loaded once per worker
(`loading/`), ChatTTS's Chat built on first use, voices (`voices/speakers.py`), text cut into
segments, and the one truncation rule.

Imported only when the engine is created (it imports torch); see `__init__.py` for the light API.
"""

from __future__ import annotations

import os

# Set before torch initialises CUDA: expandable segments keep the variable-length batches of a
# TTS server from fragmenting the caching allocator. An operator's own setting wins.
if "PYTORCH_CUDA_ALLOC_CONF" not in os.environ and "PYTORCH_ALLOC_CONF" not in os.environ:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import dataclasses
import gc
import logging
import time
from importlib.metadata import version
from typing import Any

import numpy as np
import torch

from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.voices import BUILTIN_VOICES, Voice
from workers.engines.base import SAMPLE_RATE, EngineError, Pieces, Segment
from workers.engines.chattts import CAPABILITIES
from workers.engines.chattts import segments as text_segments
from workers.engines.chattts.faults import FAULT_OOM_ENV, InjectedOom
from workers.engines.chattts.library import infer as library
from workers.engines.chattts.library.sampling import MAX_NEW_TOKEN
from workers.engines.chattts.loading import assembly, imports, loader
from workers.engines.chattts.runtime.runtime import Runtime
from workers.engines.chattts.voices.speakers import Speakers

log = logging.getLogger(__name__)

# The warm-up is one row of a few tokens: enough to run every module once (the normalizer's
# compiled code, the tokenizer, a prefill, steps, the vocoder), whose first calls cost what later
# ones do not. On a CPU that is all it buys: two rows of 16 tokens took 3.6 s more at start-up and
# left the first job no faster than this one does (one process, the development CPU).
WARMUP_MAX_NEW_TOKEN = 4


class ChatTTSModel:
    """What both runtimes share: the loaded modules, ChatTTS's Chat (built on first use, for
    refinement and the library runtime), voices, text cutting, counters. All methods run in the
    worker's single engine thread.

    Counters for tests and stats: `truncations` (segments cut at their budget), `oom_splits`,
    `load_seconds`.
    """

    name = "chattts"
    sample_rate = SAMPLE_RATE
    capabilities = CAPABILITIES
    runtime_name = "ours"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.max_batch = max(1, settings.engine.max_batch)
        self.max_new_token = MAX_NEW_TOKEN
        self.model_version = f"ChatTTS {version('ChatTTS')}"
        self.model: assembly.Model | None = None
        self._chat: Any = None  # ChatTTS's Chat (chat.BatchChat), built on first use
        self.device = torch.device("cpu")
        self.oom_splits = 0
        self.truncations = 0
        self.load_seconds: float | None = None
        self._speakers = Speakers()
        self._oom = InjectedOom()
        self.runtime: Runtime | None = None  # ours only

    # --- lifecycle ------------------------------------------------------------------------------

    def load(self) -> None:
        started = time.perf_counter()
        checkpoint = loader.locate(self.settings.engine.model_dir)
        device = loader.resolve_device(self.settings.engine.device)
        imports.partial()  # before anything imports ChatTTS: only what start-up uses
        library.quiet_libraries()
        library.cache_compiled_normalizer()
        if self.settings.chattts.compile and device.type != "cuda":
            log.info("CHATTTS_COMPILE is used on CUDA only; running %s uncompiled", device)
        model = loader.load_model(checkpoint, device, library.library_logger())
        self._speakers = Speakers(model, library.builtin_voices(model.config))
        self.model, self.device = model, device
        if checkpoint.sha256 is not None:
            self.model_version += f" ({checkpoint.description})"
        if checkpoint.description.startswith("random-weight"):  # loading/checkpoint.py
            self.capabilities = dataclasses.replace(self.capabilities, speech=False)
        if checkpoint.max_new_token:
            self.max_new_token = checkpoint.max_new_token
        self._loaded(model)
        if os.environ.get(FAULT_OOM_ENV):
            self.inject_oom(int(os.environ[FAULT_OOM_ENV]))
        self.load_seconds = time.perf_counter() - started
        log.info(
            "ChatTTS loaded from %s on %s in %.1f s", checkpoint.root, device, self.load_seconds
        )

    def _loaded(self, model: assembly.Model) -> None:
        """What the runtime builds once the modules are loaded."""

    @property
    def chat(self) -> Any:
        """ChatTTS's Chat over the loaded modules (built now if it was not); None before load."""
        return self.whole_chat() if self.model is not None else None

    def whole_chat(self) -> Any:
        """ChatTTS's Chat, for refinement and the library runtime: built
        the first time one needs it (importing the rest of ChatTTS: 1-5 s, once per process),
        around the modules already loaded."""
        if self._chat is None:
            if self.model is None:
                raise EngineError("the chattts engine was not loaded", retryable=True)
            started = time.perf_counter()
            chat = assembly.chat_around(
                self.model, self.settings.chattts.compile, library.library_logger()
            )
            self._chat = chat
            self._oom.hook(chat)
            log.info("ChatTTS's Chat built in %.1f s", time.perf_counter() - started)
        return self._chat

    def warmup(self) -> None:
        saved, self.max_new_token = self.max_new_token, WARMUP_MAX_NEW_TOKEN
        try:
            request = SynthesisRequest(text="你好", voice="zh_female", seed=0)
            self._warm(Segment("warmup", 0, request.text, request))
        finally:
            self.max_new_token = saved

    def _warm(self, segment: Segment) -> None:
        raise NotImplementedError

    def inject_oom(self, above_batch: int | None) -> None:
        """Fault injection: make the GPT raise torch.OutOfMemoryError on batches above a size."""
        self._oom.set(above_batch, self.runtime, self._chat)

    def stats(self) -> dict[str, Any]:
        """Counters for the worker's heartbeat and metrics."""
        return {
            "device": str(self.device),
            "oom_splits": self.oom_splits,
            "truncations": self.truncations,
            "load_seconds": self.load_seconds,
            "max_new_token": self.max_new_token,
            "runtime": self.runtime_name,
            **(self.runtime.stats() if self.runtime is not None else {}),
        }

    def voices(self) -> list[Voice]:
        return list(BUILTIN_VOICES)

    def pieces(self, text: str, request: SynthesisRequest, language: str | None = None) -> Pieces:
        return text_segments.pieces(text, request, language)

    def truncated(self, segment: Segment) -> None:
        """A segment hit its token budget: its audio is kept, cut, and said so (the one rule for
        both runtimes: docs/engines.md)."""
        self.truncations += 1
        log.warning(
            "job %s segment %d hit max_new_token: its audio is cut",
            *(segment.job_id, segment.index),
            extra={"job_id": segment.job_id},
        )

    def release_memory(self, collect: bool = False) -> None:
        if collect:
            gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # --- voices ---------------------------------------------------------------------------------

    def voice_from_recording(self, audio: np.ndarray, sample_rate: int, transcript: str) -> str:
        """Voice data (a ChatTTS sample prompt with its transcript) from a reference recording."""
        return self._speakers.from_recording(audio, sample_rate, transcript)
