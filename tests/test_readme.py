"""The README a newcomer reads: short, a first job early, and a package table kept complete."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.infra.embedded_redis import free_port
from tests.support.commands import command, run_env, start_run

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
TOP = ("cli", "core", "web", "workers", "testing", "bench")


def _package_rows() -> dict[str, str]:
    """The `## Packages` table: package path (no trailing slash) -> the rest of its row."""
    section = README.split("## Packages", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([a-z_/]+)/` \|(.*)", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _packages() -> list[str]:
    found = []
    for top in TOP:
        for init in sorted((ROOT / top).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT)
            if "baseline" not in rel.parts:
                found.append(rel.as_posix())
    return found


def test_the_table_lists_every_package_and_no_other() -> None:
    rows, packages = _package_rows(), _packages()
    assert sorted(rows) == sorted(packages), (
        f"missing from README: {sorted(set(packages) - set(rows))}; "
        f"no such package: {sorted(set(rows) - set(packages))}"
    )


def test_each_row_names_every_module_of_its_package() -> None:
    rows = _package_rows()
    stale = {}
    for package, row in rows.items():
        if package == "bench":  # the benchmarks are listed in docs/performance.md
            continue
        modules = [p.stem for p in (ROOT / package).glob("*.py") if not p.stem.startswith("__")]
        missing = [m for m in modules if not re.search(rf"\b{m}\b", row)]
        if missing:
            stale[package] = missing
    assert not stale, f"README's package rows leave out modules: {stale}"


def test_short_with_a_first_job_early() -> None:
    lines = README.splitlines()
    assert len(lines) <= 260, f"the README has {len(lines)} lines: move detail to docs/"
    first_curl = next(
        i for i, line in enumerate(lines) if line.startswith("curl") or "curl " in line
    )
    first_python = next(i for i, line in enumerate(lines) if line.startswith("import json"))
    assert first_curl < 60 and first_python < 60


def test_user_facing_text_tells_no_history() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        assert not re.search(r"\bissue \d+|\bwas \d+ ?KB\b|earlier session", text), path


def _block(after: str, language: str) -> str:
    """The first ```language block of the README after the line `after`."""
    rest = README.split(after, 1)[1]
    return rest.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_first_minutes_work_as_written(tmp_path: Path) -> None:
    """`make run`'s service (here `run` itself, on a free port), then the README's first job:
    its curl block, its Python block and its `say` line, as written but for the port, with
    nothing installed beyond what `make run` installs."""
    port = free_port()
    env = run_env(tmp_path, CHATTTS_WORKER_METRICS_PORT=str(free_port()))
    log = (tmp_path / "run.log").open("wb")
    run = start_run(port, env, log)
    here = tmp_path / "me"
    here.mkdir()
    try:
        deadline = time.monotonic() + 60
        while b"is running: open" not in (tmp_path / "run.log").read_bytes():
            assert run.poll() is None and time.monotonic() < deadline, "run never got ready"
            time.sleep(0.2)
        shell = _block("## A first job", "bash").replace("localhost:8000", f"localhost:{port}")
        done = command(["bash", "-euo", "pipefail", "-c", shell], here, env)
        assert done.returncode == 0, done.stderr
        assert "succeeded" in done.stdout
        for name in ("hello.mp3", "hello2.mp3"):
            assert (here / name).stat().st_size > 1000, name
        python = _block("## A first job", "python").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        done = command([sys.executable, "-c", python], here, env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["queued", "running", "succeeded"], done.stdout
        assert (here / "hello.wav").read_bytes()[:4] == b"RIFF"
        say = re.search(r"`(\.venv/bin/chattts-online say [^`]*)`", README)
        assert say is not None, "the README's say line"
        say_line = say.group(1).replace(".venv/bin/", str(Path(sys.executable).parent) + "/")
        done = command(["bash", "-c", say_line], here, env)
        assert done.returncode == 0, done.stderr
        assert (here / "hi.mp3").stat().st_size > 500
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert "Voices: eSpeak NG" in output or "Voices: chattts" in output
