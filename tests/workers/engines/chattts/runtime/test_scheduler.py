"""Continuous batching on the tiny checkpoint: ChatTTS's tokens, per-row determinism, rows that
join mid-run, cancels, refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.chattts.runtime.helpers import (
    TEXTS,
    VOICES,
    Rows,
    mixed_prompts,
    prompt,
    scheduler,
)
from workers.engines.chattts.runtime.scheduler import Sampling

pytestmark = [
    pytest.mark.chattts,
    requires_chattts,
    pytest.mark.filterwarnings("ignore:.*past_key_values.*:FutureWarning"),
]


def test_greedy_rows_give_chatttss_own_tokens_and_audio(engine: Any) -> None:
    """At a temperature that leaves one choice, our codes are ChatTTS's GPT.generate codes, row
    by row, in a batch of mixed voices; the audio is the decode of ChatTTS's hidden states."""
    import ChatTTS

    chat = engine.chat
    run = scheduler(chat)
    rows = Rows()
    voices = VOICES[:4]
    for i, voice in enumerate(voices):
        run.submit(
            rows.request(i, prompt(chat, TEXTS[i], voice), Sampling(1e-6, seed=i, max_new_token=48))
        )
    run.run()
    for i, voice in enumerate(voices):
        from core.voices.chattts import builtin_embeddings

        params = ChatTTS.Chat.InferCodeParams(
            prompt="[speed_5]",
            spk_emb=builtin_embeddings()[voice],
            temperature=1e-6,
            top_P=0.7,
            top_K=20,
            repetition_penalty=1.05,
            max_new_token=48,
            min_new_token=1,  # ours never ends at the first code either
            show_tqdm=False,
            ensure_non_empty=False,
            manual_seed=0,
        )
        text = chat.normalizer(TEXTS[i], True, True, None)
        expected = next(chat._infer_code([text], False, chat.device, True, params))
        result = rows.results[i]
        assert result.codes is not None
        np.testing.assert_array_equal(result.codes, expected.ids[0].numpy())
        reference = run.vocoder.decode(expected.hiddens[0])
        np.testing.assert_allclose(result.audio, reference, atol=1e-4)


def run_rows(
    chat: Any,
    prompts: list[torch.Tensor],
    samplings: list[Sampling],
    slots: int = 8,
    **options: Any,
) -> Rows:
    run = scheduler(chat, slots, **options)
    rows = Rows()
    for i, (p, s) in enumerate(zip(prompts, samplings, strict=True)):
        run.submit(rows.request(i, p, s))
    run.run()
    return rows


def test_a_seeded_row_draws_the_same_alone_in_any_batch_slot_or_join_step(
    endless_chat: Any,
) -> None:
    chat = endless_chat
    prompts = mixed_prompts(chat, 8)
    samplings = [Sampling(0.7, 0.9, 30, seed=100 + i, max_new_token=40) for i in range(8)]
    target = 5
    alone = run_rows(chat, [prompts[target]], [samplings[target]]).results[0]
    batched = run_rows(chat, prompts, samplings).results[target]
    reversed_slots = run_rows(chat, prompts[::-1], samplings[::-1]).results[7 - target]
    assert alone.codes is not None and alone.tokens == 40
    np.testing.assert_array_equal(batched.codes, alone.codes)
    np.testing.assert_array_equal(reversed_slots.codes, alone.codes)
    np.testing.assert_allclose(batched.audio, alone.audio, atol=1e-4)
    for join_after_chunk in (1, 3):  # the row joins a running batch at a later step
        run = scheduler(
            chat, first_chunk_tokens=4, stream_tokens=4, lookahead_tokens=0, sync_every=2
        )
        rows = Rows()
        for i in range(3):
            run.submit(rows.request(i, prompts[i], samplings[i]))
        late = rows.request("late", prompts[target], samplings[target])
        rows.triggers[(0, join_after_chunk)] = lambda late=late, run=run: run.submit(late)
        run.run()
        joined = rows.results["late"]
        np.testing.assert_array_equal(joined.codes, alone.codes)
        assert run.counters.peak_rows == 4


def test_a_row_submitted_mid_run_streams_before_the_first_row_ends(endless_chat: Any) -> None:
    chat = endless_chat
    [first, second] = mixed_prompts(chat, 2)
    run = scheduler(chat, first_chunk_tokens=4, stream_tokens=4, lookahead_tokens=2, sync_every=2)
    order: list[tuple[str, int]] = []
    rows = Rows()
    long = rows.request("long", first, Sampling(seed=1, max_new_token=64))
    short = rows.request("short", second, Sampling(seed=2, max_new_token=12))
    chunk = long.on_chunk
    assert chunk is not None

    def note(key: Any, audio: np.ndarray, final: bool) -> None:
        order.append(("long", len(rows.chunks.get("long", []))))
        chunk(key, audio, final)

    long.on_chunk = note
    rows.triggers[("long", 2)] = lambda: run.submit(short)
    run.submit(long)
    run.run()
    assert rows.results["short"].tokens == 12 and rows.results["long"].tokens == 64
    assert run.counters.shared_steps >= 12  # the short row ran inside the long one's steps
    assert len(rows.chunks["short"]) >= 2 and len(rows.chunks["long"]) > len(rows.chunks["short"])
    # Every chunk joins into the row's audio.
    for key in ("long", "short"):
        np.testing.assert_array_equal(np.concatenate(rows.chunks[key]), rows.results[key].audio)


def test_cancel_stops_a_row_and_frees_its_slot(endless_chat: Any) -> None:
    chat = endless_chat
    prompts = mixed_prompts(chat, 3)
    run = scheduler(
        chat, slots=2, first_chunk_tokens=4, stream_tokens=4, lookahead_tokens=0, sync_every=1
    )
    rows = Rows()
    for i in range(3):
        run.submit(rows.request(i, prompts[i], Sampling(seed=i, max_new_token=100)))
    rows.triggers[(0, 1)] = lambda: run.cancel(0)
    run.run()
    assert rows.results[0].error == "cancelled" and rows.results[0].tokens < 100
    # The third row waited for a slot and got the cancelled row's.
    assert rows.results[1].tokens == rows.results[2].tokens == 100
    assert run.counters.peak_rows == 2 and not run.rows


def test_bad_rows_are_refused_and_the_others_carry_on(engine: Any) -> None:
    chat = engine.chat
    good = prompt(chat, TEXTS[0])
    broken = good.clone()
    broken[3, 7] = float("nan")
    results = run_rows(
        chat,
        [good, broken, good],
        [
            Sampling(seed=1, max_new_token=64),
            Sampling(seed=2, max_new_token=64),
            Sampling(seed=3, max_new_token=10_000),
        ],
    ).results
    assert results[0].error is None and results[0].tokens > 0
    assert "NaN" in (results[1].error or "")
    assert "exceeds the context" in (results[2].error or "")


def test_rows_that_leave_early_keep_their_codes_when_others_move_into_their_slots(
    endless_chat: Any,
) -> None:
    """Rows of different budgets leave at different looks; the last row moves into each freed
    slot. Every result is still its own row's (what it would be alone)."""
    chat = endless_chat
    prompts = mixed_prompts(chat, 5)
    budgets = [6, 30, 10, 30, 18]
    samplings = [Sampling(seed=40 + i, max_new_token=b) for i, b in enumerate(budgets)]
    together = run_rows(chat, prompts, samplings, sync_every=1).results
    for i, budget in enumerate(budgets):
        alone = run_rows(chat, [prompts[i]], [samplings[i]]).results[0]
        assert together[i].tokens == alone.tokens == budget
        np.testing.assert_array_equal(together[i].codes, alone.codes)
        np.testing.assert_allclose(together[i].audio, alone.audio, atol=1e-4)
