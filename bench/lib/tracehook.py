"""A module run as `python -m` runs it, with its Python allocations traced: how a benchmark looks
into a worker's memory without a line of the product's code changed.

`python -m bench.lib.tracehook MODULE [ARGS...]`, with TRACEHOOK_DIR naming a folder: tracemalloc
starts (keeping TRACEHOOK_FRAMES frames a block, default 10) before MODULE is imported, then MODULE
runs as `__main__` with ARGS, as `python -m MODULE ARGS` would. Nothing else changes; the signals
below are ones the service never uses.

* SIGUSR2: a line appended to DIR/memory.jsonl: the memory tracemalloc sees (traced, its peak),
  tracemalloc's own memory, the process's RSS, what C's malloc holds (in use, free, mapped).
* SIGUSR1: the same line, naming a snapshot, DIR/snapshot-N.pickle (N = 1, 2...), that a forked
  copy of the process writes (whole, then renamed) while the process goes on.

`growth(DIR)` compares the first snapshot with the last: what grew, by source line.
"""

from __future__ import annotations

import ctypes
import json
import linecache
import os
import re
import runpy
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

DIR_ENV, FRAMES_ENV = "TRACEHOOK_DIR", "TRACEHOOK_FRAMES"
DEFAULT_FRAMES = 10
MEMORY_LOG = "memory.jsonl"
CHILD_LIMIT_S = 240  # a snapshot's writer that takes longer is ended (SIGALRM)
# Not the traced program's: the import machinery's own, and tracemalloc's while it snapshots.
IGNORED = (
    "<frozen importlib._bootstrap>",
    "<frozen importlib._bootstrap_external>",
    "<unknown>",
    tracemalloc.__file__,
    linecache.__file__,
    __file__,
)


class _Mallinfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (2.33 and later)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
            *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
        )
    ]


def malloc_mb() -> dict[str, float]:
    """What C's malloc holds (glibc): in use (Python's blocks above 512 bytes, tracemalloc's own
    tables and every C library's allocations), free but kept by the allocator, and the large
    blocks it mapped on their own. Python's small objects live in arenas of their own, not here.
    Empty where the C library has no mallinfo2."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _Mallinfo2
    info = mallinfo2()
    return {
        "malloc_in_use_mb": info.uordblks / 1024**2,
        "malloc_free_mb": info.fordblks / 1024**2,
        "malloc_mmapped_mb": info.hblkhd / 1024**2,
    }


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Recorder:
    """The signal handlers: they run in the main thread, between two of its bytecodes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.snapshots = 0

    def reading(self) -> dict[str, Any]:
        traced, peak = tracemalloc.get_traced_memory()
        return {
            "time": time.time(),
            "traced_mb": traced / 1024**2,
            "traced_peak_mb": peak / 1024**2,
            "tracemalloc_own_mb": tracemalloc.get_tracemalloc_memory() / 1024**2,
            "rss_mb": rss_mb(),
            **malloc_mb(),
        }

    def write(self, line: dict[str, Any]) -> None:
        with (self.folder / MEMORY_LOG).open("a") as log:
            log.write(json.dumps(line) + "\n")

    def on_reading(self, signum: int, frame: FrameType | None) -> None:
        self.write(self.reading())

    def on_snapshot(self, signum: int, frame: FrameType | None) -> None:
        """A forked copy of the process writes the snapshot and exits: this one goes on at once,
        its memory untouched (a snapshot holds a tuple for every live block: tens of MB)."""
        line = self.reading()
        self.snapshots += 1
        path = self.folder / f"snapshot-{self.snapshots}.pickle"
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the copy: the traces as they were at the fork, its one thread
            try:
                signal.alarm(CHILD_LIMIT_S)
                partial = path.with_suffix(".partial")
                tracemalloc.take_snapshot().dump(str(partial))
                partial.replace(path)
            finally:
                os._exit(0)
        line.update(snapshot=path.name, fork_ms=(time.perf_counter() - started) * 1000)
        self.write(line)
        threading.Thread(target=os.waitpid, args=(pid, 0), name="tracehook", daemon=True).start()


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python -m bench.lib.tracehook MODULE [ARGS...] (with TRACEHOOK_DIR set)")
    folder = Path(os.environ[DIR_ENV])
    folder.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(int(os.environ.get(FRAMES_ENV, DEFAULT_FRAMES)))
    recorder = Recorder(folder)
    signal.signal(signal.SIGUSR1, recorder.on_snapshot)
    signal.signal(signal.SIGUSR2, recorder.on_reading)
    sys.argv = list(argv)
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


def snapshots(folder: Path) -> list[Path]:
    """The snapshots written whole so far, in order."""
    return sorted(folder.glob("snapshot-*.pickle"), key=lambda p: int(p.stem.split("-")[1]))


def readings(folder: Path) -> list[dict[str, Any]]:
    """The lines of DIR/memory.jsonl, in the order they were written."""
    path = folder / MEMORY_LOG
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _site(frame: tracemalloc.Frame) -> str:
    """file:line, the file relative to the repository, its package folder or the stdlib's."""
    name = frame.filename.removeprefix(str(Path.cwd()) + os.sep)
    name = re.split(r"/site-packages/|/lib/python3\.\d+/", name)[-1]
    return f"{name}:{frame.lineno}"


def growth(folder: Path, top: int = 15, callers: int = 3) -> list[dict[str, Any]]:
    """The `top` source lines whose live blocks grew most from the first snapshot to the last
    (size and count), each with its line of code; for each of the first `callers`, the call path
    (oldest frame first) that holds most of that growth."""
    paths = snapshots(folder)
    if len(paths) < 2:
        return []
    ignore = [tracemalloc.Filter(False, name) for name in IGNORED]
    first = tracemalloc.Snapshot.load(str(paths[0])).filter_traces(ignore)
    last = tracemalloc.Snapshot.load(str(paths[-1])).filter_traces(ignore)
    by_line = [d for d in last.compare_to(first, "lineno") if d.size_diff > 0][:top]
    by_path = last.compare_to(first, "traceback") if callers else []
    sites = []
    for n, diff in enumerate(by_line):
        frame = diff.traceback[-1]
        site: dict[str, Any] = {
            "site": _site(frame),
            "code": linecache.getline(frame.filename, frame.lineno).strip(),
            "grew_kb": diff.size_diff / 1024,
            "size_kb": diff.size / 1024,
            "blocks_grew": diff.count_diff,
            "blocks": diff.count,
        }
        if n < callers:
            held = [d for d in by_path if d.traceback[-1] == frame and d.size_diff > 0]
            if held:
                path = max(held, key=lambda d: d.size_diff)
                site["path"] = [_site(f) for f in path.traceback]
                site["path_grew_kb"] = path.size_diff / 1024
        sites.append(site)
    return sites


if __name__ == "__main__":
    main(sys.argv[1:])
