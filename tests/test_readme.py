"""The README a newcomer reads: short, a first job early, and a package table kept complete."""

from __future__ import annotations

import re
from pathlib import Path

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
    first_python = next(i for i, line in enumerate(lines) if line.startswith("import httpx"))
    assert first_curl < 60 and first_python < 60


def test_user_facing_text_tells_no_history() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        assert not re.search(r"\bissue \d+|\bwas \d+ ?KB\b|earlier session", text), path
