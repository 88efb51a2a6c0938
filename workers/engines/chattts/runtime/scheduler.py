"""Continuous batching over a fixed pool of slots: rows join between steps, leave when they end.

Each row is one segment with its own prompt (voice included) and sampling parameters, so any mix
of requests shares a step. Between steps, waiting rows are prefilled into free slots; every
`sync_every` steps the host reads which rows ended (the device tracks ends and budgets itself),
sends out the audio chunks that became ready, and frees the slots of ended or cancelled rows.
Which waiting rows take the free slots, and which rows give theirs up, is slots.py's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import Any

import numpy as np
import torch

from workers.engines.chattts.runtime.admission import Admission
from workers.engines.chattts.runtime.capacity import StepTimes
from workers.engines.chattts.runtime.decoder import StaticDecoder, zeros
from workers.engines.chattts.runtime.graphs import GraphedSteps
from workers.engines.chattts.runtime.requests import Counters, RowRequest, RowResult, Sampling
from workers.engines.chattts.runtime.sampler import PENALTY_WINDOW, draw, process_logits
from workers.engines.chattts.runtime.slots import SlotAdmission
from workers.engines.chattts.runtime.vocoder import SAMPLE_RATE, Vocoder

__all__ = ["Counters", "RowRequest", "RowResult", "Sampling", "SlotScheduler"]

log = logging.getLogger(__name__)


class SlotScheduler(SlotAdmission):
    def __init__(
        self,
        decoder: StaticDecoder,
        vocoder: Vocoder,
        max_new_token: int,
        stream_tokens: int = 24,
        first_chunk_tokens: int = 24,
        lookahead_tokens: int | None = None,
        sync_every: int = 4,
        headroom: float = 0.0,
        stream_rows: int = 0,
    ) -> None:
        """`headroom`: while a stream runs, at most the rows each stepped this many times faster
        than real time (`stream_rows` of them, when set; else as measured); 0: no such limit."""
        self.decoder, self.vocoder = decoder, vocoder
        self.stream_tokens, self.first_chunk_tokens = stream_tokens, first_chunk_tokens
        self.lookahead = vocoder.exact_tokens if lookahead_tokens is None else lookahead_tokens
        self.sync_every = max(1, sync_every)
        self.max_rows = decoder.slots
        self.counters = Counters()
        # A chunk decodes about its context each side with it (vocoder.py).
        overhead = (2 * vocoder.exact_tokens + stream_tokens) / max(1, stream_tokens)
        self.step_times = StepTimes(decoder.slots, vocoder.tokens_per_s, chunk_overhead=overhead)
        self.admission = Admission(self.step_times, headroom, stream_rows)
        self._decode_s = 0.0  # this round's vocoder time (left out of the step times)
        self.graphs: GraphedSteps | None = None  # CUDA: the step replayed from captured graphs
        self.eos = decoder.num_audio_tokens - 1
        slots, dev, q = decoder.slots, decoder.device, decoder.num_vq
        i64: dict[str, Any] = {"dtype": torch.long, "device": dev}
        f32: dict[str, Any] = {"dtype": torch.float32, "device": dev}
        self.seed = torch.zeros(slots, **i64)
        self.temperature = torch.ones(slots, **f32)
        self.penalty = torch.ones(slots, **f32)
        self.top_p = torch.ones(slots, **f32)
        self.top_k = torch.ones(slots, **i64)
        self.budget = torch.ones(slots, **i64)
        self.prompt_len = torch.zeros(slots, **i64)
        self.generated = torch.zeros(slots, **i64)
        self.finished = torch.zeros(slots, dtype=torch.bool, device=dev)
        self.truncated = torch.zeros(slots, dtype=torch.bool, device=dev)
        self.history = torch.zeros((slots, q, PENALTY_WINDOW), **i64)
        self.history_len = torch.zeros(slots, **i64)
        self.pending = torch.zeros((slots, decoder.hidden), dtype=decoder.dtype, device=dev)
        # Zeroed lazily (50 MB for 8 slots of 2048 tokens, written only as rows reach them).
        self.hiddens = zeros((slots, max_new_token, decoder.hidden), torch.float32, dev)
        self.codes = torch.zeros((slots, max_new_token, q), **i64)
        self.rows: list[RowRequest] = []  # rows[i] occupies slot i
        self.position_bound: list[int] = []  # per row: its position can be no higher
        self._waiting: deque[RowRequest] = deque()
        self._cancelled: set[Hashable] = set()
        self._lock = threading.Lock()
        self._per_row = [  # what moves with a row when it changes slot (_release)
            *(self.seed, self.temperature, self.penalty, self.top_p, self.top_k, self.budget),
            *(self.prompt_len, self.generated, self.finished, self.truncated, self.history),
            *(self.history_len, self.pending),
        ]

    # -- from any thread -------------------------------------------------------------------------

    def submit(self, request: RowRequest) -> None:
        with self._lock:
            self._waiting.append(request)

    def cancel(self, key: Hashable) -> None:
        with self._lock:
            self._cancelled.add(key)

    @property
    def busy(self) -> bool:
        return bool(self.rows or self._waiting)

    # -- the loop (one thread) -------------------------------------------------------------------

    def run(self) -> None:
        """Step until every submitted row has ended."""
        while self.busy:
            self.run_round()

    def run_round(self) -> None:
        """Admit waiting rows into free slots, step `sync_every` times, then look. The round's
        time, per step, is the measure of capacity (capacity.py)."""
        started = time.perf_counter()
        self._admit()
        if not self.rows:
            return
        rows, steps = len(self.rows), 0
        for _ in range(self.sync_every):
            if not self._iterate():
                break
            steps += 1
        self._decode_s = 0.0
        self._sync()
        # The vocoder's share is measured per second of audio (_emit), the steps' per step.
        self.step_times.record(rows, steps, time.perf_counter() - started - self._decode_s)

    @property
    def stream_capacity(self) -> int:
        """Streamed rows this runtime carries in real time with headroom now (0: not one)."""
        return self.admission.capacity(self.max_rows)

    def _admit(self) -> None:
        self._make_way()
        while True:
            request = self._take_waiting()
            if request is None:
                return
            problem = request.problem(self.decoder.context)
            if problem is not None:
                self._finish(request, RowResult.failed(problem))
                continue
            self._fit(request.sampling.max_new_token)
            slot = len(self.rows)
            try:
                hidden = self.decoder.prefill(slot, request.prompt)
            except torch.OutOfMemoryError as exc:
                if not self.rows:  # alone and still too big: this row cannot run here
                    error = f"out of memory on a single row: {str(exc).splitlines()[0]}"
                    self._finish(request, RowResult.failed(error))
                    continue
                self._out_of_memory(requeue=request)
                return
            self._start_row(slot, request, hidden)

    def _fit(self, budget: int) -> None:
        """Room for `budget` audio tokens a row, when it is larger than any before."""
        if budget > self.hiddens.size(1):
            shape = (self.decoder.slots, budget, self.decoder.hidden)
            grown = zeros(shape, torch.float32, self.decoder.device)
            grown[:, : self.hiddens.size(1)] = self.hiddens
            codes = self.codes.new_zeros((self.decoder.slots, budget, self.decoder.num_vq))
            codes[:, : self.codes.size(1)] = self.codes
            self.hiddens, self.codes = grown, codes

    def _start_row(self, slot: int, request: RowRequest, hidden: torch.Tensor) -> None:
        s = request.sampling
        values = {
            "seed": s.seed & ((1 << 63) - 1),
            "temperature": s.temperature,
            "penalty": s.repetition_penalty,
            "top_p": s.top_p,
            "top_k": s.top_k,
            "budget": s.max_new_token,
            "prompt_len": request.prompt.size(0),
        }
        for name, value in values.items():
            getattr(self, name)[slot] = value
        self.generated[slot] = 0
        self.finished[slot] = False
        self.truncated[slot] = False
        self.history[slot] = 0
        self.history_len[slot] = 0
        self.pending[slot] = hidden
        self.rows.append(request)
        self.position_bound.append(request.prompt.size(0) - 1)
        self.counters.admitted += 1
        self.counters.peak_rows = max(self.counters.peak_rows, len(self.rows))

    def _iterate(self) -> bool:
        rows = len(self.rows)
        try:
            self._step(rows)
        except torch.OutOfMemoryError:
            self._out_of_memory()
            return False
        self.counters.steps += 1
        self.counters.shared_steps += rows > 1
        self.position_bound = [min(p + 1, self.decoder.context - 1) for p in self.position_bound]
        return True

    @torch.inference_mode()
    def _step(self, rows: int) -> None:
        """Sample every row's next codes from its pending hidden state, then run those codes
        through the transformer: the next pending hidden states. No host synchronisation.

        Nothing is committed before the transformer pass succeeds: a pass that raises (out of
        memory) leaves every row as it was, to be retried."""
        d, r = self.decoder, slice(0, rows)
        generated = self.generated[r]
        logits = process_logits(
            d.code_logits(self.pending[r]),
            self.history[r],
            self.history_len[r],
            self.temperature[r],
            self.penalty[r],
            self.top_p[r],
            self.top_k[r],
            generated == 0,
            self.eos,
            max(row.sampling.top_k for row in self.rows),
        )
        codes = draw(logits, self.seed[r], generated)
        ends = (codes == self.eos).any(1)
        live = ~self.finished[r]
        keep = live & ~ends
        advanced = generated + keep.long()
        positions = self.prompt_len[r] + (advanced - 1).clamp(min=0)
        span = min(max(self.position_bound[:rows]) + 2, d.context)
        embeds = d.embed_codes(codes)
        if self.graphs is not None:
            pending = self.graphs.step(embeds, positions)
        else:
            pending = d.step(embeds, positions, span)
        # Commit: the hidden state behind each kept code, the penalty window, the counts.
        index = torch.arange(rows, device=d.device)
        at = generated.clamp(max=self.hiddens.size(1) - 1)
        current = self.hiddens[index, at]
        self.hiddens[index, at] = torch.where(keep.view(rows, 1), self.pending[r].float(), current)
        self.codes[index, at] = torch.where(keep.view(rows, 1), codes, self.codes[index, at])
        shifted = torch.cat((self.history[r, :, 1:], codes.unsqueeze(-1)), dim=-1)
        self.history[r] = torch.where(keep.view(rows, 1, 1), shifted, self.history[r])
        self.history_len[r] = (self.history_len[r] + keep.long()).clamp(max=PENALTY_WINDOW)
        self.generated[r] = advanced
        out_of_budget = keep & (advanced >= self.budget[r])
        self.truncated[r] |= out_of_budget
        self.finished[r] |= (live & ends) | out_of_budget
        self.pending[r] = pending

    def _sync(self) -> None:
        """The host's look: chunks that are ready go out; ended and cancelled rows leave."""
        with self._lock:
            cancelled = {row.key for row in self.rows} & self._cancelled
            self._cancelled -= cancelled
        state = torch.stack(
            (
                self.generated[: len(self.rows)],
                self.finished[: len(self.rows)].long(),
                self.truncated[: len(self.rows)].long(),
            )
        ).cpu()
        leaving: list[int] = []
        for slot, row in enumerate(self.rows):
            generated, finished, truncated = (int(v) for v in state[:, slot])
            if row.key in cancelled:
                self._finish(row, RowResult.failed("cancelled", generated))
                leaving.append(slot)
                continue
            self._emit(slot, row, generated, bool(finished))
            if row.on_chunk is not None and not row.playing:
                self._release_held(row, generated, bool(finished))
            if finished:
                audio = np.concatenate(row.chunks) if row.chunks else np.zeros(0, np.float32)
                codes = self.codes[slot, :generated].cpu().numpy().copy()  # the slot is reused
                self._finish(row, RowResult(audio, generated, bool(truncated), None, codes))
                leaving.append(slot)
        for slot in sorted(leaving, reverse=True):
            self._release(slot)

    def _emit(self, slot: int, row: RowRequest, generated: int, finished: bool) -> None:
        """Send what of the row's audio is ready; the vocoder's time is measured apart from the
        steps' (capacity.py), per second of audio, chunked or whole."""
        if row.on_chunk is None and not finished:
            return  # nobody listens: decoded once, whole, when it ends (the one-shot decode)
        hiddens = self.hiddens[slot, :generated]
        while True:
            start = row.cursor.emitted
            size = self.admission.chunk_tokens(
                row.cursor.emitted, row.last_chunk, self.first_chunk_tokens, self.stream_tokens
            )
            began = time.perf_counter()
            audio = self.vocoder.chunk(hiddens, row.cursor, size, self.lookahead, finished)
            if audio is None:
                return
            spent = time.perf_counter() - began
            self._decode_s += spent
            self.step_times.decoded(row.on_chunk is not None, spent, audio.size / SAMPLE_RATE)
            row.last_chunk = row.cursor.emitted - start
            row.chunks.append(audio)
            row.made_s += audio.size / SAMPLE_RATE
            if row.playing:
                self._send(row, finished)
            if finished:
                return

    def _release_held(self, row: RowRequest, generated: int, finished: bool) -> None:
        """A held stream starts playing once what it made carries it to its end (admission.py),
        or when it ends: what it made goes out at once, and the rest as it is made."""
        rest_s = 0.0 if finished else self._rest_s_of(row, generated)
        if finished or self.admission.releases(len(self.rows), row.made_s, rest_s):
            row.playing = True
            self._send(row, finished)

    def _send(self, row: RowRequest, finished: bool) -> None:
        """Hand the row's chunks not sent yet to its listener, the last with `finished`."""
        assert row.on_chunk is not None
        pending, row.sent_chunks = row.chunks[row.sent_chunks :], len(row.chunks)
        row.sent_s += sum(audio.size for audio in pending) / SAMPLE_RATE
        for i, audio in enumerate(pending):
            final = finished and i == len(pending) - 1
            if audio.size or final:
                row.on_chunk(row.key, audio, final)

    def _release(self, slot: int) -> None:
        """Free a slot: the last row moves into it, so active rows stay in slots 0..n-1."""
        last = len(self.rows) - 1
        if slot != last:
            length = self.position_bound[last] + 2
            self.decoder.move(last, slot, min(length, self.decoder.context))
            for tensor in self._per_row:
                tensor[slot] = tensor[last]
            generated = int(self.generated[slot])
            self.hiddens[slot, :generated] = self.hiddens[last, :generated]
            self.codes[slot, :generated] = self.codes[last, :generated]
            self.rows[slot] = self.rows[last]
            self.position_bound[slot] = self.position_bound[last]
        self.rows.pop()
        self.position_bound.pop()

    def _finish(self, row: RowRequest, result: RowResult) -> None:
        row.on_done(row.key, result)

    def _out_of_memory(self, requeue: RowRequest | None = None) -> None:
        """A real out-of-memory error: fewer rows from now on; the newest rows go back to wait.
        They start again from their prompt and, their draws being counter-based, mostly retrace
        their codes; the audio they had already sent is not sent again (their cursor stays)."""
        self.counters.oom_shrinks += 1
        rows = len(self.rows)
        keep = max(1, rows // 2) if requeue is None else max(1, rows)
        self.max_rows = max(1, min(self.max_rows, keep))
        evicted: list[RowRequest] = [requeue] if requeue is not None else []
        while len(self.rows) > self.max_rows:
            evicted.append(self.rows[-1])
            self._release(len(self.rows) - 1)
        with self._lock:
            self._waiting.extendleft(reversed(evicted))
        if self.decoder.device.type == "cuda":
            torch.cuda.empty_cache()
        log.warning(
            "out of memory with %d rows: at most %d rows from now on (%d rows wait again)",
            rows + (requeue is not None),
            self.max_rows,
            len(evicted),
        )
