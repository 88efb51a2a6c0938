"""Measurement 6 of the suite: ChatTTS decoding, our runtime against ChatTTS's own loop (the
baseline column), by bench/chattts_bench.py (the full-size architecture with random weights; every
row runs exactly --tokens generation steps): steps/s of one row, audio-seconds/s of eight rows,
and time to first audio of eight rows. Skipped, not failed, where ChatTTS or torch is missing.

    python -m bench.batching [--quick] [--output PATH] [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.lib import cli, harness, report
from bench.lib.cli import REPO_ROOT
from bench.lib.report import Row
from bench.lib.stats import BenchError

SECTION = "6. ChatTTS batching"  # (the suite's name for it since before the runtime)
SCRIPT = REPO_ROOT / "bench" / "chattts_bench.py"
TIMEOUT_S = 1200


def missing() -> str | None:
    """Why ChatTTS cannot run here, or None."""
    for module in ("torch", "ChatTTS"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{module} is not installed (pip install '.[chattts]')"
    return None


def rows(result: dict[str, Any]) -> list[Row]:
    paths = result.get("runtimes", {})
    if set(paths) != {"ours", "library"}:
        raise BenchError(f"chattts_bench reported paths {sorted(paths)}, not ours and library")
    ours = {r["batch"]: r for r in paths["ours"]}
    lib = {r["batch"]: r for r in paths["library"]}
    if not ({1, 8} <= set(ours) and {1, 8} <= set(lib)):
        raise BenchError(f"chattts_bench reported batches {sorted(ours)}, not 1 and 8")
    for path, by_batch in (("ours", ours), ("library", lib)):
        if not all(by_batch[b]["audio_s_per_s"] > 0 for b in (1, 8)):
            raise BenchError(f"chattts_bench reported no audio for {path}")
    where = f"{result['device']}, {result['threads']} threads, {result['tokens_per_row']} tokens"
    steps = ours[1]["steps_per_s"] / lib[1]["steps_per_s"]
    first = ours[8]["first_audio_s"] / lib[8]["first_audio_s"]
    return [
        Row(
            SECTION,
            f"steps/s, 1 row, our runtime (baseline column: ChatTTS's loop), {where}",
            ours[1]["steps_per_s"],
            "steps/s",
            lib[1]["steps_per_s"],
            ">= 1.5x ChatTTS's loop",
            steps >= 1.5,
        ),
        Row(
            SECTION,
            "audio-s/s, 8 rows of 8 voices, our runtime (baseline column: ChatTTS's loop)",
            ours[8]["audio_s_per_s"],
            "audio-s/s",
            lib[8]["audio_s_per_s"],
        ),
        Row(
            SECTION,
            "time to first audio, 8 rows, our runtime (baseline column: ChatTTS's loop)",
            ours[8]["first_audio_s"],
            "s",
            lib[8]["first_audio_s"],
            "<= 1/10 of ChatTTS's loop",
            first <= 0.1,
        ),
    ]


async def measure(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    tokens = args.tokens or (8 if args.quick else 0)  # 0: the script's default (48 CPU, 256 GPU)
    repeats = 1 if args.quick else 2
    with tempfile.TemporaryDirectory(prefix="chattts-batching-") as tmp:
        out = Path(tmp) / "chattts.json"
        command = [
            sys.executable,
            str(SCRIPT),
            "--batches",
            "1,8",
            "--repeats",
            str(repeats),
            "--device",
            args.device,
            "--no-cold-start",
            "--json",
            str(out),
        ]
        if tokens:
            command += ["--tokens", str(tokens)]
        print(f"batching: {' '.join(command[1:])}", flush=True)
        done = await asyncio.to_thread(
            subprocess.run, command, timeout=TIMEOUT_S, check=False, cwd=REPO_ROOT
        )
        if done.returncode != 0 or not out.exists():
            raise BenchError(f"chattts_bench.py exited {done.returncode}")
        result: dict[str, Any] = json.loads(out.read_text())
    return rows(result), result


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(
        "bench.batching", __doc__, quick="fewer jobs (tests, CI)", output="batching", logs=True,
        log_level=True, baseline=True,
    )  # fmt: skip
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (auto)")
    p.add_argument("--tokens", type=int, default=0, help="tokens per row (48 CPU, 256 GPU)")
    args = p.parse_args(argv)
    why = missing()
    if why is not None:
        report.write(Path(args.output), [], {}, skipped=why)
        print(f"batching skipped: {why}")
        return 0
    return harness.main("batching", args, measure)


if __name__ == "__main__":
    sys.exit(main())
