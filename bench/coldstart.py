"""Where a ChatTTS worker's cold start goes: process start to a loaded, warmed-up engine, by phase.

    python -m bench.coldstart [--repeats 3] [--device cpu] [--drop-caches] [--against REV]
                              [--memory] [--split]

A child process per run imports, loads and warms up the engine on the full-size checkpoint with
random weights (built once, bench/chattts_bench.py's), timing each phase by the wall clock:
interpreter start, `import torch`, importing the engine, its load, its warm-up. Medians of the
runs, with their range.

`--against REV` measures that revision too (a git worktree in the temp directory), its runs
interleaved with these so that the machine's drift hits both alike. `--memory` then starts two
workers side by side on each and reports the second's private memory, what it adds to the host.
`--split` profiles the load (cProfile) into imports, random initialisation of parameters that the
checkpoint then overwrites, reading the files, moving to the device, the tokenizer, checksums and
the rest, scaled to the load's wall time; the profiler slows Python (imports most), so totals
are read from runs without it. `--drop-caches` empties the page cache before each run (root).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lib import cli
from bench.lib.checkpoints import random_checkpoint
from bench.lib.cli import REPO_ROOT as ROOT
from bench.lib.report import write_json

# The child: phase timestamps (wall clock, comparable with the parent's), the load's profile and,
# once ready, its memory (smaps_rollup); with "hold" it then waits for its stdin to close.
CHILD = r"""
import time, json, sys, cProfile, pstats, logging
t = {"start": float(sys.argv[4])}
t["python"] = time.time()
import torch
t["torch"] = time.time()
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[1])
from workers.engines.chattts import ChatTTSEngine
from core.infra.settings import Settings
t["engine"] = time.time()
engine = ChatTTSEngine(Settings.of(engine="chattts", model_dir=sys.argv[2], device=sys.argv[3]))
t["ours"] = time.time()
profile = cProfile.Profile()
if sys.argv[6] == "profile":
    profile.enable()
engine.load()
profile.disable()
t["load"] = time.time()
engine.warmup()
t["warmup"] = time.time()
stats = pstats.Stats(profile) if sys.argv[6] == "profile" else None
rows = {}
for (path, line, name), (cc, nc, tt, ct, callers) in getattr(stats, "stats", {}).items():
    rows[f"{path}:{name}"] = [tt, ct, [f"{p}:{n}" for (p, _, n) in callers]]
memory = {}
for line in open("/proc/self/smaps_rollup").read().splitlines()[1:]:
    key, value = line.split(":", 1)
    memory[key] = int(value.split()[0]) * 1024
print("REPORT " + json.dumps({"t": t, "profile": rows, "memory": memory}), flush=True)
if sys.argv[5] == "hold":
    sys.stdin.read()
"""

# Profile rows (by file and function name) that make each share of the load, first match wins.
SHARES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("imports", ("importlib._bootstrap>:_find_and_load",)),
    ("random init (then overwritten)", ("torch/nn/init.py:", ":reset_parameters")),
    ("reading the files", ("safetensors/", ":load_state_dict", ":_load_from_state_dict")),
    ("moving to the device", ("torch/nn/modules/module.py:_apply",)),
    ("tokenizer", ("tokenization_utils", "tokenizers/")),
    ("checksums", ("hashlib", ":sha256", "check_all_assets", "sha256_file")),
)


def start(
    root: Path, model_dir: Path, device: str, hold: bool, split: bool = False
) -> subprocess.Popen[str]:
    started = time.time()
    argv = [str(root), str(model_dir), device, str(started), "hold" if hold else "exit"]
    argv.append("profile" if split else "plain")
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def report(child: subprocess.Popen[str]) -> dict[str, Any]:
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("REPORT "):
            result: dict[str, Any] = json.loads(line[7:])
            return result
    raise RuntimeError(f"the child exited ({child.wait()}) without a report")


def measure(root: Path, model_dir: Path, device: str, drop: bool, split: bool) -> dict[str, float]:
    if drop:
        drop_caches()
    child = start(root, model_dir, device, hold=False, split=split)
    result = report(child)
    child.wait()
    return phases(result, split)


def drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def phases(report: dict[str, Any], split: bool) -> dict[str, float]:
    t = report["t"]
    load = t["load"] - t["ours"]
    out = {
        "interpreter start": t["python"] - t["start"],
        "import torch": t["torch"] - t["python"],
        "import the engine (ChatTTS, ...)": t["engine"] - t["torch"],
    }
    if split:
        out.update(split_load(report["profile"], load))
    else:
        out["load (building the model)"] = load
    out["warm-up"] = t["warmup"] - t["load"]
    out["total: process start to ready"] = t["warmup"] - t["start"]
    return out


def two_workers(root: Path, model_dir: Path, device: str) -> dict[str, float]:
    """Memory of a first worker, ready, and of a second started beside it (MB): the second's
    private pages are what it adds to the host; pages of the files both map count once."""
    first = start(root, model_dir, device, hold=True)
    one = report(first)["memory"]
    second = start(root, model_dir, device, hold=True)
    two = report(second)["memory"]
    for child in (first, second):
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    mb = 1e6

    def private(m: dict[str, int]) -> float:
        return (m["Private_Clean"] + m["Private_Dirty"]) / mb

    return {
        "first worker: RSS": one["Rss"] / mb,
        "first worker: of it, mapped files": (one["Rss"] - one["Anonymous"]) / mb,
        "second worker: RSS": two["Rss"] / mb,
        "second worker: private (what it adds)": private(two),
        "added, of the first's RSS (%)": 100 * private(two) / (one["Rss"] / mb),
    }


def split_load(profile: dict[str, Any], load_s: float) -> dict[str, float]:
    """The load's wall time split by share: the cumulative time of the outermost calls of each
    share's functions (a call made from another of the same share is not counted twice),
    scaled from the profile's total to the wall time."""
    total = sum(tt for tt, _, _ in profile.values()) or 1.0

    def share(key: str) -> str | None:
        return next((name for name, needles in SHARES if any(n in key for n in needles)), None)

    spent: dict[str, float] = {name: 0.0 for name, _ in SHARES}
    for key, (_, ct, callers) in profile.items():
        name = share(key)
        if name is not None and not any(share(c) == name for c in callers):
            spent[name] += ct
    out = {f"load: {name}": load_s * seconds / total for name, seconds in spent.items()}
    out["load: building modules and the rest"] = load_s - sum(out.values())
    return out


def main() -> int:
    p = cli.parser("bench.coldstart", __doc__, repeats=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--drop-caches", action="store_true", help="cold page cache (root)")
    p.add_argument("--against", metavar="REV", help="also measure this git revision, interleaved")
    p.add_argument("--memory", action="store_true", help="and two workers side by side")
    p.add_argument("--split", action="store_true", help="profile the load into its shares")
    p.add_argument(
        "--model-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chattts-full-random",
        help="the full-size random checkpoint (built there when missing)",
    )
    args = p.parse_args()
    model_dir = random_checkpoint("full", root=args.model_dir)
    size = sum(f.stat().st_size for f in (model_dir / "asset").rglob("*") if f.is_file())
    trees = {"now": ROOT}
    if args.against:
        trees = {args.against: worktree(args.against), "now": ROOT}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.repeats):  # interleaved: the machine's drift hits both alike
        for name, root in trees.items():
            runs[name].append(measure(root, model_dir, args.device, args.drop_caches, args.split))
    cache = "cold" if args.drop_caches else "warm"
    print(f"cold start, {size / 1e9:.2f} GB checkpoint, {args.device}, page cache {cache}:")
    summary: dict[str, Any] = {}
    for name, results in runs.items():
        summary[name] = table(name, results, "s")
    if args.memory:
        for name, root in trees.items():
            summary[f"memory {name}"] = table(
                f"memory, {name}", [two_workers(root, model_dir, args.device)], "MB"
            )
    out = ROOT / "bench" / "results" / f"coldstart-{args.device}-{cache}.json"
    write_json(out, {"checkpoint_gb": size / 1e9, "runs": summary})
    return 0


def table(name: str, results: list[dict[str, float]], unit: str) -> dict[str, Any]:
    print(f"{name}:")
    summary: dict[str, Any] = {}
    for key in results[0]:
        values = [r[key] for r in results]
        median = statistics.median(values)
        summary[key] = {"median": median, "min": min(values), "max": max(values)}
        shown = "%" if key.endswith("(%)") else unit
        print(f"  {key:45} {median:8.2f} {shown}  ({min(values):.2f} to {max(values):.2f})")
    return summary


def worktree(rev: str) -> Path:
    """A checkout of `rev` beside the repository (git worktree), made once."""
    path = Path(tempfile.gettempdir()) / f"chattts-online-{rev}"
    if not (path / "workers").is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
            check=True,
            capture_output=True,
        )
    return path


if __name__ == "__main__":
    sys.exit(main())
