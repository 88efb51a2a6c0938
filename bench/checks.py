"""How well the worker hears its own segments (workers/checks/): eSpeak NG reads a corpus of
English sentences; each is checked as made (a failure there is a false failure) and spoiled by
each fault a model makes (each one missed is a fault let through); and what hearing costs.

    python -m bench.checks [--sentences 240] [--voice en_female] [--seed 7] [--output checks.json]

The corpus's sentences come from a seed: 7 is the one the checks' thresholds were tuned on; any
other is a corpus they never saw.
"""

from __future__ import annotations

import asyncio
import re
import resource
import time
from collections import Counter
from typing import Any

import numpy as np

from bench.checks_corpus import sentences
from bench.lib import cli
from bench.lib.report import write_json
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from workers.checks.checker import Checker
from workers.checks.faults import spoil
from workers.checks.recognizers.pocketsphinx import Pocketsphinx
from workers.engines.base import SAMPLE_RATE, Segment
from workers.engines.espeak import EspeakEngine

# Spoiled copies of each sentence's audio, or the engine given a spoiled text; "one_word" (a word
# replaced) has no target yet.
FAULTS = (
    "short", "cut_end", "runon", "silence", "loop", "clip", "nan", "quiet", "noisy", "noise",
    "words", "twice", "phrase", "doubled", "left_out", "digits", "one_word",
)  # fmt: skip
UNTARGETED = frozenset({"one_word", "doubled", "left_out", "digits"})
FALSE_FAILURES_MAX = 0.02  # the targets
CATCH_MIN = 0.95


def _speak(engine: EspeakEngine, text: str, voice: str) -> np.ndarray:
    request = SynthesisRequest(text=text, voice=voice)
    audio: np.ndarray = engine.synthesize([Segment("bench", 0, text, request)])[0]
    return audio


def _spoken_instead(fault: str, text: str) -> str | None:
    """What the engine says instead of `text` for a fault of the words (None: not one, or the
    sentence has nothing it changes)."""
    words = text.split()
    middle = len(words) // 2
    if fault == "one_word":  # a word of its middle replaced
        return " ".join([*words[:middle], "elephant", *words[middle + 1 :]])
    if fault == "doubled":  # a word of its middle said twice
        return " ".join([*words[: middle + 1], words[middle].rstrip(",."), *words[middle + 1 :]])
    if fault == "left_out" and len(words) > 2:
        return " ".join([*words[:middle], *words[middle + 1 :]])
    if fault == "phrase" and len(words) >= 4:  # three words of its middle said three times
        start = max(0, middle - 1)
        phrase = " ".join(words[start : start + 3]).rstrip(",.")
        return " ".join([*words[: start + 3], f"{phrase}, {phrase}", *words[start + 3 :]])
    if fault == "digits" and re.search(r"\d", text):  # every digit another
        return re.sub(r"\d", lambda m: str((int(m.group(0)) + 5) % 10), text)
    return None


def _spoiled(
    fault: str, engine: EspeakEngine, voice: str, corpus: list[str], audio: list[np.ndarray], i: int
) -> np.ndarray | None:
    """Sentence `i`'s audio spoiled by `fault` (None: the fault does not apply to it)."""
    text, samples = corpus[i], audio[i]
    if fault == "words":  # another sentence of the corpus said instead
        return audio[(i + len(corpus) // 2) % len(corpus)]
    if fault == "twice":
        return np.concatenate([samples, np.zeros(SAMPLE_RATE // 4, np.float32), samples])
    if fault == "cut_end":
        return samples[: int(samples.size * 0.6)]
    if fault == "noise":  # noise alone, as long and as loud as the speech
        power = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
        noise = power * np.random.default_rng(i).standard_normal(samples.size)
        return noise.astype(np.float32)
    if fault in ("one_word", "doubled", "left_out", "phrase", "digits"):
        instead = _spoken_instead(fault, text)
        return None if instead is None else _speak(engine, instead, voice)
    return spoil(fault, samples, SAMPLE_RATE)


async def _lag(stop: asyncio.Event, worst: list[float]) -> None:
    """The event loop's worst lag while the checks run (the recognizer must not stall it)."""
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], time.perf_counter() - start - 0.005)


async def run(count: int, voice: str, seed: int = 7) -> dict[str, Any]:
    engine = EspeakEngine(Settings())
    engine.load()
    corpus = sentences(count, seed)
    audio = [_speak(engine, text, voice) for text in corpus]
    checker = Checker(Pocketsphinx(timeout_s=30))
    await checker.start()
    stop, worst = asyncio.Event(), [0.0]
    ticker = asyncio.create_task(_lag(stop, worst))
    verdicts: Counter[str] = Counter()
    false_failures = []
    started, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
    for text, samples in zip(corpus, audio, strict=True):
        verdict = await checker.check(samples, SAMPLE_RATE, text)
        verdicts[verdict.state] += 1
        if verdict.state != "passed":
            false_failures.append({"text": text, **verdict.public()})
    clean_s = time.perf_counter() - started
    stop.set()  # the lag is the checks' alone (the faults below are made in this loop)
    await ticker
    audio_s = sum(a.size for a in audio) / SAMPLE_RATE
    web_cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu0
    caught: dict[str, float] = {}
    reasons: dict[str, Counter[str]] = {}
    for fault in FAULTS:
        hits = tried = 0
        reasons[fault] = Counter()
        for i, text in enumerate(corpus):
            spoiled = _spoiled(fault, engine, voice, corpus, audio, i)
            if spoiled is None:
                continue
            verdict = await checker.check(spoiled, SAMPLE_RATE, text)
            tried += 1
            hits += verdict.state == "failed"
            reasons[fault].update(verdict.reasons or [verdict.state])
        caught[fault] = round(hits / max(1, tried), 3)
    await checker.close()
    child_cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    return {
        "voice": voice,
        "sentences": count,
        "audio_s": round(audio_s, 1),
        "verdicts": dict(verdicts),
        "false_failure_rate": round(verdicts["failed"] / count, 4),
        "false_failures": false_failures,
        "seed": seed,
        "caught": caught,
        "reasons": {fault: dict(counts) for fault, counts in reasons.items()},
        "check_ms_per_audio_s": round(1000 * clean_s / audio_s, 1),
        # The recognizer's process (every check, faults included) and the caller's share.
        "recognizer_cpu_s": round(child_cpu, 2),
        "caller_cpu_ms_per_audio_s": round(1000 * web_cpu / audio_s, 1),
        "event_loop_worst_lag_ms": round(1000 * worst[0], 1),
    }


def report(figures: dict[str, Any]) -> str:
    lines = [
        f"{figures['sentences']} sentences (seed {figures['seed']}), {figures['audio_s']} s of "
        f"eSpeak NG speech ({figures['voice']}), heard by pocketsphinx",
        f"  false failures     {100 * figures['false_failure_rate']:5.1f} %   (target <= "
        f"{100 * FALSE_FAILURES_MAX:.0f} %)  {figures['verdicts']}",
    ]
    for fault, rate in figures["caught"].items():
        target = "" if fault in UNTARGETED else f"(target >= {100 * CATCH_MIN:.0f} %)"
        lines.append(f"  caught {fault:<11} {100 * rate:5.1f} %   {target}")
    lines += [
        f"  time per second of audio   {figures['check_ms_per_audio_s']} ms (wall, one at a time)",
        f"  worker's own CPU per second of audio   {figures['caller_cpu_ms_per_audio_s']} ms",
        f"  event loop's worst lag     {figures['event_loop_worst_lag_ms']} ms",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = cli.parser("bench.checks", __doc__, output="")
    parser.add_argument("--sentences", type=int, default=240)
    parser.add_argument("--voice", default="en_female", help="eSpeak NG's voice (en_female)")
    parser.add_argument("--seed", type=int, default=7, help="the corpus's seed (7: the tuning one)")
    args = parser.parse_args()
    figures = asyncio.run(run(args.sentences, args.voice, args.seed))
    print(report(figures))
    if args.output:
        write_json(args.output, figures)


if __name__ == "__main__":
    main()
