"""The runtime of one ChatTTS engine: decoder, vocoder and scheduler built over the loaded modules.

The engine thread owns it (one model instance, one thread). `run` takes a batch of rows and
returns when all have ended; rows of any voices and parameters share its steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from workers.engines.chattts.runtime.decoder import StaticDecoder
from workers.engines.chattts.runtime.graphs import GraphedSteps, buckets_for
from workers.engines.chattts.runtime.scheduler import RowRequest, RowResult, Sampling, SlotScheduler
from workers.engines.chattts.runtime.vocoder import Vocoder
from workers.engines.chattts.runtime.weights import Transformer

log = logging.getLogger(__name__)

# A first chunk of a sixth of a second: the listener hears something soon (8 tokens + the
# lookahead after the prompt), the next chunks follow at CHATTTS_STREAM_TOKENS. The lookahead's
# accuracy is the same for a first chunk of 8 as of 24 tokens (bench/lookahead.py).
FIRST_CHUNK_TOKENS = 8
# Right context decoded with a chunk, per device (python -m bench.lookahead, full-size decoder and
# Vocos): 16 tokens put a chunk within 95 dB of the one-shot decode (exact, in practice) and cost
# 27 ms at 600 steps/s; a CPU at 30 steps/s would wait half a second for them, and 8 tokens
# (45 dB or better) cost a quarter of that.
LOOKAHEAD_TOKENS = {"cuda": 16, "cpu": 8}

# Positions a prompt may take besides its audio budget: a long segment's text (about 250 tokens)
# or a reference recording's codes (up to about 950 tokens for 20 s).
PROMPT_ALLOWANCE = 1024


@dataclass(frozen=True)
class RuntimeConfig:
    slots: int = 8
    context: int = 0  # positions per slot; 0: the budget plus PROMPT_ALLOWANCE
    stream_tokens: int = 24  # tokens per audio chunk: about half a second of speech
    first_chunk_tokens: int = 0  # 0: FIRST_CHUNK_TOKENS
    lookahead_tokens: int = -1  # right context before a chunk leaves; -1: per device (below)
    sync_every: int = 4  # steps between the host's looks at which rows ended
    graphs: bool = True  # on CUDA: capture the step in CUDA graphs at start-up
    dtype: str = "auto"  # of the transformer's weights and cache: auto, float32, bfloat16, float16
    headroom: float = 0.0  # while a stream runs, only rows this much faster than real time
    stream_rows: int = 0  # streams carried at once, when pinned; 0: measured


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """`auto`: bfloat16 on CUDA and on CPUs that multiply bfloat16 natively (AVX512-BF16, AMX:
    2.2x the steps/s of float32 on the development machine's EPYC, bench/chattts_bench.py),
    float32 elsewhere. Logits stay float32 either way. bfloat16 rounding depends on the kernel a
    batch size picks: a seeded row's codes may then depend on its batch-mates after a few tokens
    (float32 keeps them identical); see the README."""
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        return torch.bfloat16 if native else torch.float32
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in dtypes:
        raise ValueError(f"unknown dtype {name!r}: use auto, float32, bfloat16 or float16")
    return dtypes[name]


class Runtime:
    def __init__(self, model: Any, max_new_token: int, config: RuntimeConfig) -> None:
        """`model`: its `device`, `transformer` (weights.Transformer, on the CPU), `embed`,
        `decoder` and `vocos`."""
        transformer: Transformer = model.transformer
        device: torch.device = model.device
        self.config = config
        context = config.context or max_new_token + PROMPT_ALLOWANCE
        context = min(context, transformer.max_positions)
        dtype = resolve_dtype(config.dtype, device)
        self.decoder = StaticDecoder(transformer, model.embed, config.slots, context, dtype, device)
        self.vocoder = Vocoder(model.decoder, model.vocos)
        lookahead = config.lookahead_tokens
        if lookahead < 0:
            lookahead = LOOKAHEAD_TOKENS.get(device.type, LOOKAHEAD_TOKENS["cpu"])
        self.scheduler = SlotScheduler(
            self.decoder,
            self.vocoder,
            max_new_token,
            stream_tokens=config.stream_tokens,
            first_chunk_tokens=config.first_chunk_tokens or FIRST_CHUNK_TOKENS,
            lookahead_tokens=min(lookahead, self.vocoder.exact_tokens),
            sync_every=config.sync_every,
            headroom=config.headroom,
            stream_rows=config.stream_rows,
        )
        if device.type == "cuda" and config.graphs:
            try:
                self.scheduler.graphs = GraphedSteps(self.decoder, buckets_for(config.slots))
            except RuntimeError as exc:  # the eager step still works: slower, not wrong
                log.warning("CUDA graph capture failed (%s); stepping eagerly", exc)
        log.info(
            "decode runtime: %d slots of %d positions (%.0f MiB of cache each), %s, on %s",
            config.slots,
            context,
            self.decoder.bytes_per_slot() / 2**20,
            self.decoder.dtype,
            device,
        )

    def run(
        self,
        rows: list[tuple[torch.Tensor, Sampling]],
        on_chunk: Callable[[int, np.ndarray, bool], None] | None = None,
    ) -> list[RowResult]:
        """Synthesize rows (prompt embeddings [T, D], sampling) together; results in order.
        `on_chunk(row, audio, final)` receives each row's audio as it becomes ready."""
        results: dict[int, RowResult] = {}
        for i, (prompt, sampling) in enumerate(rows):
            self.scheduler.submit(RowRequest(i, prompt, sampling, results.__setitem__, on_chunk))
        self.scheduler.run()
        return [results[i] for i in range(len(rows))]

    def stats(self) -> dict[str, Any]:
        c = self.scheduler.counters
        return {
            "runtime_steps": c.steps,
            "runtime_shared_steps": c.shared_steps,
            "runtime_rows": c.admitted,
            "runtime_oom_shrinks": c.oom_shrinks,
            "runtime_max_rows": self.scheduler.max_rows,
            "runtime_preempted": c.preempted,
            **self.streams(),
        }

    def streams(self) -> dict[str, Any]:
        """What the runtime carries in real time now: `stream_capacity` streams (with the
        headroom asked for), each row's speed alone (`realtime_speed`, x real time; below 1 no
        stream can be carried) and at the capacity."""
        times = self.scheduler.step_times
        alone = times.speed(1)
        capacity = self.scheduler.stream_capacity
        full = times.speed(capacity) if capacity else None
        return {
            "stream_capacity": capacity,
            "realtime_speed": round(alone, 3) if alone is not None else None,
            "realtime_speed_at_capacity": round(full, 3) if full is not None else None,
        }
