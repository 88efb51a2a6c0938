"""The benchmark suite: every measurement of docs/performance.md, ours against the baseline on
this machine, in one table.

    python -m bench.suite [--quick] [--only 1,2,...] [--repeats N] [--skip-baseline]
    make bench                  # the same as python -m bench.suite
    chattts-online bench        # likewise

Each measurement module runs as its own process, one after the other (the machine's cores are
shared by the systems under test and the load generator), `--repeats` times; a module that takes
`--repeats` itself runs once with it (its rows are its own medians), the ChatTTS one once (it
keeps the best of its own repeats). Each writes its rows to a JSON file. The table
holds the medians over the repeats, their ratio and the targets judged on the medians. It is
printed and written to bench/results/suite.json and suite.md. A module that fails makes the
suite exit 1, after the table of what did run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib import cli
from bench.lib.cli import REPO_ROOT
from bench.lib.report import Row
from bench.summary import Line, fold, markdown_table, section_number, text_table
from core.infra.embedded_redis import find_redis_server

SECTIONS = {
    1: "1. submit throughput",
    2: "2. completion notice",
    3: "3. pipeline overhead",
    4: "4. jobs/s end to end",
    5: "5. SSE capacity",
    6: "6. ChatTTS batching",
    7: "7. fair share",
    8: "8. streams",
    9: "9. live sessions",
}


@dataclass(frozen=True)
class Module:
    name: str  # python -m NAME [--quick] --output PATH
    sections: tuple[int, ...]
    once: bool = False  # run once whatever --repeats says


MODULES = (
    Module("bench.submit", (1,)),
    Module("bench.notice", (2, 3)),
    Module("bench.endtoend", (4,)),
    Module("bench.sse_capacity", (5,)),
    Module("bench.batching", (6,), once=True),
    Module("bench.fairness", (7,)),
    Module("bench.players", (8,), once=True),
    Module("bench.live", (9,), once=True),
)
# Options passed on to the modules whose --help lists them. A module that takes --repeats
# folds its own repeats into medians: it runs once, with the suite's --repeats.
PASSED = ("--skip-baseline", "--baseline-dir", "--ours-url", "--repeats")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = cli.parser(
        "bench.suite", __doc__, quick="each module's quick variant", repeats="3; --quick: 1"
    )
    p.add_argument(
        "--only",
        type=lambda s: {int(n) for n in s.split(",") if n.strip()},
        help="these measurements only, e.g. 2,3 (default: all)",
    )
    p.add_argument("--skip-baseline", action="store_true", help="measure ours alone")
    p.add_argument("--baseline-dir", help="another copy of the baseline (bench/baseline)")
    p.add_argument("--ours-url", help="modules that can: measure ours running there")
    p.add_argument("--results", default=str(REPO_ROOT / "bench" / "results"), help="output dir")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per module run (1800)")
    args = p.parse_args(argv)
    if args.only and not args.only <= set(SECTIONS):
        p.error(f"--only: choose among {', '.join(map(str, SECTIONS))}")
    args.repeats = args.repeats or (1 if args.quick else 3)
    return args


def accepted(module: str) -> set[str]:
    """Which of PASSED the module's command line takes (asked with --help)."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=60,
    )
    return {flag for flag in PASSED if flag in done.stdout}


def command(module: Module, args: argparse.Namespace, output: Path, flags: set[str]) -> list[str]:
    cmd = [sys.executable, "-m", module.name, "--output", str(output)]
    if args.quick:
        cmd.append("--quick")
    wanted = {
        "--skip-baseline": [] if not args.skip_baseline else ["--skip-baseline"],
        "--baseline-dir": [] if not args.baseline_dir else ["--baseline-dir", args.baseline_dir],
        "--ours-url": [] if not args.ours_url else ["--ours-url", args.ours_url],
        "--repeats": ["--repeats", str(args.repeats)],
    }
    for flag in sorted(flags):
        cmd += wanted[flag]
    return cmd


def run_once(
    module: Module, args: argparse.Namespace, output: Path, flags: set[str]
) -> list[Row] | str:
    """The module's rows, or why there are none: 'skipped: ...' / 'FAILED: ...'."""
    output.unlink(missing_ok=True)
    cmd = command(module, args, output, flags)
    print(f"\n== {' '.join(cmd[1:])}", flush=True)
    try:
        done = subprocess.run(cmd, cwd=REPO_ROOT, timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"FAILED: {module.name} ran past {args.timeout:.0f} s"
    if done.returncode != 0:
        return f"FAILED: {module.name} exited {done.returncode}"
    try:
        data = json.loads(output.read_text())
        rows = [Row.from_json(r) for r in data["rows"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"FAILED: {module.name} wrote no readable rows ({exc})"
    if data.get("skipped"):
        return f"skipped: {data['skipped']}"
    bad = [r for r in rows if not (r.ours == r.ours and r.ours >= 0)]  # NaN or negative
    if not rows or bad:
        return f"FAILED: {module.name} measured nothing ({len(rows)} rows, {len(bad)} empty)"
    return rows


def machine() -> dict[str, Any]:
    def first(path: str, key: str) -> str:
        with contextlib.suppress(OSError):
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        return "?"

    redis_version = "?"
    with contextlib.suppress(OSError, RuntimeError, subprocess.SubprocessError):
        binary = find_redis_server()
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
        version = [p for p in out.stdout.split() if p.startswith("v=")]
        redis_version = f"{version[0][2:] if version else '?'} ({binary})"
    mem_kb = first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "cpu": first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "ram_gb": round(int(mem_kb) / 2**20, 1) if mem_kb.isdigit() else None,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "redis": redis_version,
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }


def describe(info: dict[str, Any]) -> str:
    return (
        f"{info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM, {info['os']}, "
        f"Python {info['python']}, Redis {info['redis']}; load average before "
        f"{', '.join(map(str, info['loadavg_before']))}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = args.only or set(SECTIONS)
    results = Path(args.results)
    (results / "runs").mkdir(parents=True, exist_ok=True)
    info = machine()
    started = time.perf_counter()
    lines: list[Line] = []
    failures: list[str] = []
    per_run: dict[str, list[list[dict[str, Any]]]] = {}
    try:
        for module in MODULES:
            sections = [s for s in module.sections if s in wanted]
            if not sections:
                continue
            titles = [SECTIONS[s] for s in sections]
            if importlib.util.find_spec(module.name) is None:
                print(f"\n== {module.name}: not there yet, skipped", flush=True)
                lines += [
                    Line(t, note=f"skipped: {module.name} is not written yet") for t in titles
                ]
                continue
            runs: list[list[Row]] = []
            note = ""
            flags = accepted(module.name)
            times = 1 if module.once or "--repeats" in flags else args.repeats
            for i in range(times):
                out = results / "runs" / f"{module.name}-{i + 1}.json"
                got = run_once(module, args, out, flags)
                if isinstance(got, str):
                    note = got
                    break
                runs.append(got)
            if note.startswith("FAILED"):
                failures.append(note)
            per_run[module.name] = [[r.to_json() for r in run] for run in runs]
            folded = [r for r in fold(runs) if section_number(r.section) in sections]
            if note or not folded:
                lines += [Line(t, note=note or "no rows") for t in titles]
                if note.startswith("FAILED") and runs:
                    lines += [Line(r.section, r) for r in folded]  # earlier repeats did run
                continue
            lines += [Line(r.section, r) for r in folded]
    except KeyboardInterrupt:
        failures.append("interrupted")
    lines.sort(key=lambda line: section_number(line.section) or 0)
    elapsed = time.perf_counter() - started
    cmd = "python -m bench.suite " + " ".join(sys.argv[1:] if argv is None else argv)
    report = {
        "command": cmd.strip(),
        "machine": info,
        "repeats": args.repeats,
        "quick": args.quick,
        "elapsed_s": elapsed,
        "rows": [line.row.to_json() for line in lines if line.row is not None],
        "not_run": {line.section: line.note for line in lines if line.row is None},
        "failures": failures,
        "runs": per_run,
    }
    (results / "suite.json").write_text(json.dumps(report, indent=2) + "\n")
    md = (
        f"{markdown_table(lines)}\n\nMachine: {describe(info)}.\n\n"
        f"Command: `{report['command']}` ({elapsed / 60:.1f} min; medians over "
        f"{args.repeats} run(s) of each measurement).\n"
    )
    (results / "suite.md").write_text(md)
    print("\n" + text_table(lines))
    print(f"\nmachine: {describe(info)}")
    print("ratio = ours / baseline; medians over the runs; 'met' is the target on the medians")
    print(f"written to {results / 'suite.json'} and {results / 'suite.md'} ({elapsed:.0f} s)")
    if failures:
        print("\n" + "\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
