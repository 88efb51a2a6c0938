"""The ChatTTS engine on a tiny random-weight checkpoint, loaded through the production loader."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from core.queue.job import SynthesisRequest
from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.helpers import split, synthesize
from workers.engines.base import EngineError, Segment, run_segments

pytestmark = [
    pytest.mark.chattts,
    requires_chattts,
    # transformers >= 5 announces (per call) the removal of the API ChatTTS 0.2.5 uses.
    pytest.mark.filterwarnings("ignore:.*past_key_values.*:FutureWarning"),
]

TEXTS = ["你好世界。", "今天天气很好。", "我们欢迎你。", "Hello world."]
SAMPLES_PER_TOKEN = 512  # two mel frames of 256 samples per audio token
# How far (in samples) the tiny decoder and vocoder see around a frame: a row decoded next to
# padding differs from its solo decode only this close to its end.
RECEPTIVE_SAMPLES = 16 * 256


def assert_same_audio(row: np.ndarray, alone: np.ndarray) -> None:
    """Same length; same samples except within the decoders' reach of the row's end."""
    assert row.size == alone.size
    keep = max(0, row.size - RECEPTIVE_SAMPLES)
    np.testing.assert_allclose(row[:keep], alone[:keep], atol=1e-4)


def segments(texts: list[str], seed: int | None = 7, **request: Any) -> list[Segment]:
    """One segment per job, as the worker hands them over from different jobs."""
    out = []
    for i, text in enumerate(texts):
        req = SynthesisRequest(text=text, seed=None if seed is None else seed + i, **request)
        out.append(Segment(f"job{i}", 0, text, req))
    return out


def rows_at_once(engine: Any, segs: list[Segment]) -> tuple[list[np.ndarray], int]:
    """The segments' audio through the engine's boundary, and the most rows that shared a step."""
    counters = engine.runtime.scheduler.counters
    counters.peak_rows = 0
    audio = synthesize(engine, segs)
    return audio, counters.peak_rows


def test_segments_of_many_jobs_run_as_one_batch(engine: Any, library_engine: Any) -> None:
    audio, rows = rows_at_once(engine, segments(TEXTS))
    assert rows == len(TEXTS)
    assert len(audio) == len(TEXTS)
    assert all(a.dtype == np.float32 and a.ndim == 1 and a.size > 0 for a in audio)
    before = library_engine.infer_calls
    audio = library_engine.synthesize(segments(TEXTS))
    assert library_engine.last_batch_sizes == [len(TEXTS)]
    assert library_engine.infer_calls - before == 1 and len(audio) == len(TEXTS)


def test_each_row_is_trimmed_to_its_own_length(engine: Any) -> None:
    truncations = engine.truncations
    results = run_segments(engine, segments(TEXTS))
    audio, tokens = [r.audio for r in results], [r.tokens for r in results]
    assert engine.truncations == truncations
    assert len(set(tokens)) > 1, "rows of one batch should end at different lengths"
    # The vocoder yields (2n - 1) hops for n tokens: exactly what the row alone decodes to.
    assert [a.size for a in audio] == [(2 * n - 1) * SAMPLES_PER_TOKEN // 2 for n in tokens]
    for row in (int(np.argmin(tokens)), int(np.argmax(tokens))):
        [result] = run_segments(engine, segments(TEXTS)[row : row + 1])
        alone = [result.audio]
        assert result.tokens == tokens[row]
        assert_same_audio(audio[row], alone[0])
    # The longest row had no padding to trim: it is its solo decode, sample for sample.
    np.testing.assert_allclose(audio[row], alone[0], atol=1e-4)


def test_same_seed_same_audio_different_seed_different_audio(engine: Any) -> None:
    first = synthesize(engine, segments(TEXTS[:2], seed=11))
    again = synthesize(engine, segments(TEXTS[:2], seed=11))
    other = synthesize(engine, segments(TEXTS[:2], seed=12))
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(
        a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(first, other, strict=True)
    )


def test_a_row_sounds_the_same_whatever_it_is_batched_with(engine: Any) -> None:
    [alone] = synthesize(engine, segments(TEXTS[:1], seed=21))
    batched = synthesize(engine, segments(TEXTS, seed=21))
    assert_same_audio(batched[0], alone)


def test_requests_never_touch_the_global_rng(engine: Any) -> None:
    import torch

    state = torch.get_rng_state()
    synthesize(engine, segments(TEXTS[:2], seed=None))
    synthesize(engine, segments(TEXTS[:2], seed=3))
    assert torch.equal(state, torch.get_rng_state())


def test_library_defaults_are_not_mutated(engine: Any) -> None:
    import ChatTTS

    defaults = ChatTTS.Chat.infer.__defaults__
    code = next(d for d in defaults if isinstance(d, ChatTTS.Chat.InferCodeParams))
    synthesize(engine, segments(TEXTS[:1], speed=1.5, temperature=0.5))
    assert (code.prompt, code.spk_emb, code.spk_smp, code.temperature, code.manual_seed) == (
        "[speed_5]",
        None,
        None,
        0.3,
        None,
    )


def test_out_of_memory_halves_the_batch_until_it_fits(library_engine: Any) -> None:
    engine = library_engine
    expected = synthesize(engine, segments(TEXTS, seed=31))
    splits = engine.oom_splits
    engine.inject_oom(1)  # the GPT now raises a real torch.OutOfMemoryError above one row
    audio = synthesize(engine, segments(TEXTS, seed=31))
    assert engine.last_batch_sizes == [1, 1, 1, 1]
    assert engine.oom_splits - splits == 3  # 4 -> 2 + 2 -> 1 + 1 + 1 + 1
    for a, b in zip(audio, expected, strict=True):  # per-row seeds: the same audio
        assert_same_audio(a, b)


def test_out_of_memory_shrinks_the_runtime_until_it_fits(engine: Any) -> None:
    """A real torch.OutOfMemoryError in a step halves the rows that may run at once; the rows
    put back start again and, their draws being counter-based, make the same audio."""
    expected = synthesize(engine, segments(TEXTS, seed=31))
    scheduler = engine.runtime.scheduler
    shrinks = scheduler.counters.oom_shrinks
    engine.inject_oom(1)  # the decoder now raises a real torch.OutOfMemoryError above one row
    audio = synthesize(engine, segments(TEXTS, seed=31))
    assert scheduler.max_rows == 1
    assert scheduler.counters.oom_shrinks - shrinks == 2  # 4 -> 2 -> 1
    for a, b in zip(audio, expected, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("runtime", ["ours", "library"])
def test_out_of_memory_on_one_segment_is_a_retryable_error(
    runtime: str, engine: Any, library_engine: Any
) -> None:
    engine = engine if runtime == "ours" else library_engine
    engine.inject_oom(0)
    with pytest.raises(EngineError, match="out of memory") as info:
        synthesize(engine, segments(TEXTS[:1]))
    assert info.value.retryable


@pytest.mark.parametrize("runtime", ["ours", "library"])
def test_a_truncated_segment_is_cut_and_reported(
    runtime: str, engine: Any, library_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """One rule for both runtimes: a segment that hits its budget keeps its audio, cut, and
    says so (a warning naming it, the `truncations` counter)."""
    engine = engine if runtime == "ours" else library_engine
    engine.max_new_token = 1  # no row ends at its first token: every row is cut
    truncations = engine.truncations
    [audio] = synthesize(engine, segments(["今天天气很好，我们欢迎你。"]))
    assert audio.size == SAMPLES_PER_TOKEN // 2  # one token: (2 * 1 - 1) hops
    assert engine.truncations - truncations == 1
    warnings = [r.getMessage() for r in caplog.records if "its audio is cut" in r.getMessage()]
    assert len(warnings) == 1 and "job0 segment 0" in warnings[0]


def test_refine_runs_the_refinement_pass(engine: Any) -> None:
    audio, rows = rows_at_once(engine, segments(TEXTS[:2], refine=True))
    assert rows == 2 and all(a.size for a in audio)


def test_registered_voices_embedding_and_recording(engine: Any) -> None:
    from core.voices.chattts import recording_voice_data, validate_voice_data
    from workers.engines.chattts.library.params import draw_speaker

    embedding = draw_speaker(engine.chat.config.spk_stat, 99)
    t = np.arange(16_000 * 2) / 16_000
    recording = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    sample = engine.voice_from_recording(recording, 16_000, "这是我的声音")
    assert validate_voice_data(sample) == "sample"
    packed = recording_voice_data(recording, 16_000, "这是我的声音")
    for data in (embedding, sample, packed):
        segs = [
            Segment(
                f"j{i}", 0, text, SynthesisRequest(text=text, voice="mine", seed=i), voice_data=data
            )
            for i, text in enumerate(TEXTS[:2])
        ]
        audio, rows = rows_at_once(engine, segs)
        assert rows == 2 and all(a.size for a in audio)


def test_invalid_voice_data_and_unknown_voice_are_permanent_errors(engine: Any) -> None:
    req = SynthesisRequest(text="你好", voice="mine")
    with pytest.raises(EngineError) as info:
        synthesize(engine, [Segment("j", 0, "你好", req, voice_data="not a voice")])
    assert not info.value.retryable
    with pytest.raises(EngineError, match="unknown voice"):
        synthesize(engine, [Segment("j", 0, "你好", req)])


def test_split_normalizes_then_cuts_sentences(engine: Any) -> None:
    request = SynthesisRequest(text="x", voice="zh_female")
    parts = split(engine, "我有3个苹果。" * 40, request)
    assert len(parts) > 1 and all(len(p) <= 120 for p in parts)
    assert "三" in parts[0] and "3" not in "".join(parts)
    with pytest.raises(EngineError, match="nothing"):
        split(engine, "😀 !!!", request)


def test_batch_key_ignores_seed_but_not_parameters(library_engine: Any) -> None:
    engine = library_engine
    a = SynthesisRequest(text="x", seed=1)
    assert engine.batch_key(a) == engine.batch_key(SynthesisRequest(text="y", seed=2))
    assert engine.batch_key(a) != engine.batch_key(SynthesisRequest(text="x", temperature=0.5))
    assert engine.batch_key(a) != engine.batch_key(SynthesisRequest(text="x", voice="en_male"))


def test_mixed_voices_in_one_call_run_as_one_infer_per_voice(library_engine: Any) -> None:
    segs = segments(TEXTS[:2]) + segments(TEXTS[2:], voice="en_male")
    audio = library_engine.synthesize(segs)
    assert sorted(library_engine.last_batch_sizes[:2]) == [2, 2] and len(audio) == 4


def test_any_mix_of_requests_shares_one_runtime_batch(engine: Any) -> None:
    """Voices, speeds, temperatures, top-P/K and seeds all differ: one batch, shared steps."""
    mixed = [
        *segments(TEXTS[:1]),
        *segments(TEXTS[1:2], voice="en_male", speed=1.4),
        *segments(TEXTS[2:3], voice="zh_male_2", temperature=0.7, top_p=0.9),
        *segments(TEXTS[3:], voice="en_female", top_k=5, seed=99),
    ]
    counters = engine.runtime.scheduler.counters
    shared = counters.shared_steps
    audio, rows = rows_at_once(engine, mixed)
    assert rows == 4 and all(a.size for a in audio)
    assert counters.shared_steps > shared
    for i, segment in enumerate(mixed):  # and each row is what it would be alone
        [alone] = synthesize(engine, [segment])
        np.testing.assert_allclose(audio[i], alone, atol=1e-4)


def test_speed_maps_onto_chattts_speed_levels() -> None:
    from workers.engines.chattts.library.params import speed_level

    assert [speed_level(s) for s in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)] == [0, 2, 5, 6, 7, 9]


def test_a_registered_voice_normalizes_in_its_own_language(engine: Any) -> None:
    request = SynthesisRequest(text="x", voice="my_voice")
    english = "".join(split(engine, "I have 3 cats.", request, "en-GB"))
    assert "three" in english.lower() and "3" not in english
    mandarin = "".join(split(engine, "我有3个苹果。", request, "zh-CN"))
    assert "三" in mandarin
    # Without a language tag (older registrations): Mandarin, as before.
    assert "三" in "".join(split(engine, "3", request))


def test_the_runtime_in_bfloat16_speaks_every_row(tiny_checkpoint: Any) -> None:
    """The default on CUDA and on CPUs with native bfloat16: weights and cache in bfloat16,
    logits in float32; the same rows come out whole (their codes may differ from float32's)."""
    import torch

    from core.infra.settings import Settings
    from workers.engines.chattts.engine import ChatTTSEngine

    settings = Settings.of(
        model_dir=str(tiny_checkpoint), device="cpu", max_batch=4, dtype="bfloat16"
    )
    engine = ChatTTSEngine(settings)
    engine.load()
    assert engine.runtime is not None and engine.runtime.decoder.dtype == torch.bfloat16
    assert engine.runtime.decoder.k_cache.dtype == torch.bfloat16
    audio = synthesize(engine, segments(TEXTS))
    assert all(a.size > 0 and np.isfinite(a).all() for a in audio)


def test_a_seed_voice_is_chatttsuis_voice_of_that_number(engine: Any) -> None:
    """ChatTTS-ui draws voice N as `torch.manual_seed(N)`, then `randn * std + mean`: a seed
    users share is the same speaker here, and it speaks."""
    import torch

    from core.voices.chattts import b14_decode, decode_embedding

    stat = np.frombuffer(b14_decode(engine.chat.config.spk_stat), dtype=np.float16)
    std, mean = torch.from_numpy(stat.astype(np.float32)).chunk(2)
    torch.manual_seed(2222)
    theirs = (torch.randn(std.numel()) * std + mean).half().numpy()
    request = SynthesisRequest(text="你好", voice="seed_2222", seed=3)
    voice = engine._speakers.voice(Segment("j", 0, "你好", request))
    assert np.array_equal(decode_embedding(voice.spk_emb), theirs)
    other = engine._speakers.voice(
        Segment("j", 0, "你好", request.model_copy(update={"voice": "seed_7"}))
    )
    assert other.spk_emb != voice.spk_emb
    audio, rows = rows_at_once(engine, [Segment("j", 0, "你好", request)])
    assert rows == 1 and audio[0].size


def test_a_blend_is_the_weighted_mean_of_its_speakers(engine: Any) -> None:
    from core.voices.chattts import decode_embedding

    def embedding(voice: str) -> np.ndarray:
        request = SynthesisRequest(text="你好", voice=voice)
        spk_emb = engine._speakers.voice(Segment("j", 0, "你好", request)).spk_emb
        return decode_embedding(spk_emb).astype(np.float32)

    mixed = embedding("zh_female(3)+seed_11(1)")
    expected = 0.75 * embedding("zh_female") + 0.25 * embedding("seed_11")
    assert np.allclose(mixed, expected, atol=1e-2)
    request = SynthesisRequest(text="你好", voice="zh_female(3)+seed_11(1)", seed=1)
    audio, rows = rows_at_once(engine, [Segment("j", 0, "你好", request)])
    assert rows == 1 and audio[0].size
