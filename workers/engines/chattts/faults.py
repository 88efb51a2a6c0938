"""Fault injection for tests through the whole service: ChatTTS's GPT and the runtime's decoder
raise a real torch.OutOfMemoryError on any pass over more rows than a limit."""

from __future__ import annotations

import logging
from typing import Any

import torch

FAULT_OOM_ENV = "CHATTTS_FAULT_OOM_ABOVE_BATCH"
log = logging.getLogger(__name__)


class InjectedOom:
    """The limit, applied to the runtime's decoder and to ChatTTS's Chat (built later, maybe)."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self._hook: Any = None

    def set(self, limit: int | None, runtime: Any, chat: Any) -> None:
        self.limit = limit
        if runtime is not None:
            runtime.decoder.oom_above = limit
        self.hook(chat)
        if limit is not None:
            log.warning("fault injection: out-of-memory on batches above %d rows", limit)

    def hook(self, chat: Any) -> None:
        """The limit on `chat`'s GPT (the library runtime, refinement); None: no Chat yet."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        limit = self.limit
        if limit is None or chat is None:
            return

        def before_forward(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
            rows = kwargs["inputs_embeds"].size(0)
            if rows > limit:
                raise torch.OutOfMemoryError(f"injected: {rows} rows > {limit} ({FAULT_OOM_ENV})")

        self._hook = chat.gpt.gpt.register_forward_pre_hook(before_forward, with_kwargs=True)
