"""The decode step captured in CUDA graphs, one per bucket of row counts, at start-up: a step
replays one recorded launch sequence instead of a few hundred kernel launches from Python.

Rows are padded up to their bucket. Padded rows are free slots (active rows occupy a prefix of the
cache), so what they compute and write is overwritten when a row is prefilled there. Attention
spans the whole context (a static shape), masked to each row's own positions. Inputs and output
live in static buffers; the steady state allocates nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from workers.engines.chattts.runtime.decoder import StaticDecoder

log = logging.getLogger(__name__)
WARMUP_STEPS = 2  # eager passes on a side stream before capture (cuBLAS workspaces, autotuning)


def buckets_for(slots: int) -> list[int]:
    """1, 2, 4, ... up to the slot count (included)."""
    out, b = [], 1
    while b < slots:
        out.append(b)
        b *= 2
    return [*out, slots]


class GraphedSteps:
    def __init__(self, decoder: StaticDecoder, buckets: list[int]) -> None:
        self.decoder = decoder
        # rows -> (graph, its embeddings input, its positions input, its output)
        self.graphs: dict[int, tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        pool = None
        device = decoder.device
        with torch.inference_mode():
            for rows in sorted(set(buckets), reverse=True):  # the largest first: one pool
                embeds = torch.zeros((rows, decoder.hidden), dtype=decoder.dtype, device=device)
                positions = torch.zeros(rows, dtype=torch.long, device=device)
                side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    for _ in range(WARMUP_STEPS):
                        decoder.step(embeds, positions, decoder.context)
                torch.cuda.current_stream(device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    out = decoder.step(embeds, positions, decoder.context)
                pool = graph.pool()
                self.graphs[rows] = (graph, embeds, positions, out)
        log.info("decode step captured in CUDA graphs for %s rows", sorted(self.graphs))

    def step(self, embeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rows = embeds.size(0)
        bucket = min(b for b in self.graphs if b >= rows)
        graph, static_embeds, static_positions, out = self.graphs[bucket]
        static_embeds[:rows].copy_(embeds)
        static_positions[:rows].copy_(positions)
        static_positions[rows:].zero_()
        graph.replay()
        return out[:rows].clone()
