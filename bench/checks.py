"""How well the worker hears its own segments (workers/checks/): eSpeak NG reads a corpus of
English sentences; each is checked as made (a failure there is a false failure) and spoiled by
each fault a model makes (each one missed is a fault let through); and what hearing costs.

    python -m bench.checks [--sentences 240] [--output checks.json]
"""

from __future__ import annotations

import asyncio
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

FAULTS = ("short", "runon", "silence", "loop", "clip", "nan", "words", "one_word")
FALSE_FAILURES_MAX = 0.02  # the targets
CATCH_MIN = 0.95


def _speak(engine: EspeakEngine, text: str, voice: str) -> np.ndarray:
    request = SynthesisRequest(text=text, voice=voice)
    audio: np.ndarray = engine.synthesize([Segment("bench", 0, text, request)])[0]
    return audio


def _one_word_swapped(text: str) -> str:
    """`text` with one word of its middle replaced (what the audio then says instead)."""
    words = text.split()
    words[len(words) // 2] = "elephant"
    return " ".join(words)


async def _lag(stop: asyncio.Event, worst: list[float]) -> None:
    """The event loop's worst lag while the checks run (the recognizer must not stall it)."""
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], time.perf_counter() - start - 0.005)


async def run(count: int, voice: str) -> dict[str, Any]:
    engine = EspeakEngine(Settings())
    engine.load()
    corpus = sentences(count)
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
    for fault in FAULTS:
        hits = 0
        for i, (text, samples) in enumerate(zip(corpus, audio, strict=True)):
            if fault == "words":  # another sentence of the corpus said instead
                spoiled = audio[(i + count // 2) % count]
            elif fault == "one_word":
                spoiled = _speak(engine, _one_word_swapped(text), voice)
            else:
                spoiled = spoil(fault, samples, SAMPLE_RATE)
            verdict = await checker.check(spoiled, SAMPLE_RATE, text)
            hits += verdict.state == "failed"
        caught[fault] = round(hits / count, 3)
    await checker.close()
    child_cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    return {
        "voice": voice,
        "sentences": count,
        "audio_s": round(audio_s, 1),
        "verdicts": dict(verdicts),
        "false_failure_rate": round(verdicts["failed"] / count, 4),
        "false_failures": false_failures,
        "caught": caught,
        "check_ms_per_audio_s": round(1000 * clean_s / audio_s, 1),
        # The recognizer's process (every check, faults included) and the caller's share.
        "recognizer_cpu_s": round(child_cpu, 2),
        "caller_cpu_ms_per_audio_s": round(1000 * web_cpu / audio_s, 1),
        "event_loop_worst_lag_ms": round(1000 * worst[0], 1),
    }


def report(figures: dict[str, Any]) -> str:
    lines = [
        f"{figures['sentences']} sentences, {figures['audio_s']} s of eSpeak NG speech "
        f"({figures['voice']}), heard by pocketsphinx",
        f"  false failures     {100 * figures['false_failure_rate']:5.1f} %   (target <= "
        f"{100 * FALSE_FAILURES_MAX:.0f} %)  {figures['verdicts']}",
    ]
    for fault, rate in figures["caught"].items():
        target = "" if fault == "one_word" else f"(target >= {100 * CATCH_MIN:.0f} %)"
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
    args = parser.parse_args()
    figures = asyncio.run(run(args.sentences, args.voice))
    print(report(figures))
    if args.output:
        write_json(args.output, figures)


if __name__ == "__main__":
    main()
