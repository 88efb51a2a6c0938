"""The package layers and the absence of import cycles (contracts in pyproject.toml), checked on
the real tree and shown to fail on a tree that breaks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the dev group (make install-dev)")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _children(package: str) -> set[str]:
    """The modules and subpackages directly in `package` (dotted)."""
    folder = ROOT / package.replace(".", "/")
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")}
    return modules | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}


def _layered(contract: dict[str, object]) -> set[str]:
    layers = contract["layers"]
    assert isinstance(layers, list)
    return {name.strip() for layer in layers for name in layer.split("|")}


def test_every_package_and_module_has_its_place_in_a_layer() -> None:
    """Each product tier is layered, and each of its modules and subpackages is named in that
    order: a new one cannot import whatever it likes by being left out of the contract."""
    contracts = _contracts()
    containers = {
        container: _layered(contract)
        for contract in contracts
        if contract["type"] == "layers"
        for container in contract.get("containers", [])  # type: ignore[attr-defined]
    }
    assert {"core", "web", "workers", "workers.engines"} <= set(containers)
    unplaced = {
        container: sorted(_children(container) - named)
        for container, named in containers.items()
        if _children(container) - named
    }
    assert not unplaced, f"modules no layers contract names: {unplaced}"
    tops = {"cli", "core", "web", "workers", "testing", "bench", "tests"}
    root_layers = set().union(
        *(_layered(c) for c in contracts if c["type"] == "layers" and "containers" not in c)
    )
    assert tops <= root_layers, sorted(tops - root_layers)


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The packages and the contracts, copied where they can be broken."""
    skipped = shutil.ignore_patterns("__pycache__", "artifacts", "results", "figures", "baseline")
    for name in ("cli", "core", "web", "workers", "testing", "bench", "tests"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=skipped)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text() + "\n" + code)


TIERS = "cli over web | workers over core"
PRODUCT = "the product never imports"
SHARED = "tests over bench over testing"


@pytest.mark.parametrize(
    ("module", "code", "broken"),
    [
        # A type-level circle: the hub typing itself with the keys that type it.
        (
            "web/hub.py",
            "from typing import TYPE_CHECKING\n\n"
            "if TYPE_CHECKING:\n    from web.appkeys import HUB\n",
            "no import cycles",
        ),
        # the contract reaching up into a tier, even lazily inside a function.
        ("core/infra/logs.py", "def _f() -> None:\n    from web import app\n", TIERS),
        # the web application starting a worker of its own.
        ("web/views/service/health.py", "from workers import process\n", TIERS),
        # a worker reaching into the web tier.
        ("workers/process.py", "from web.monitors import fleet\n", TIERS),
        # either tier starting the command line.
        ("web/app.py", "from cli import supervisor\n", TIERS),
        # an engine importing the worker process that drives it.
        ("workers/engines/base.py", "from workers import jobs\n", "workers: the process"),
        # the speech checks, below the engines, reaching up to a job.
        ("workers/checks/verdict.py", "from workers import jobs\n", "workers: the process"),
        # what the web tier stands on reaching up to its views.
        ("web/errors.py", "from web.views.service import health\n", "web: the app"),
        # a view importing another view of its own area.
        ("web/views/jobs/audio.py", "from web.views.jobs import jobs\n", "views are independent"),
        # a view importing a view of another area, even lazily.
        (
            "web/views/service/api_docs.py",
            "def _f() -> None:\n    from web.views.compat import legacy\n",
            "views are independent",
        ),
        # validation reaching the app's resources (the queue, the memory budget): I/O.
        ("web/schemas/jobs.py", "from web.appkeys import QUEUE\n", "web.schemas: validation"),
        # validation reading the request itself.
        ("web/schemas/admin.py", "from aiohttp import web\n", "web.schemas: validation"),
        # the decode runtime reaching out to the engine around it.
        (
            "workers/engines/chattts/runtime/sampler.py",
            "from workers.engines.chattts import rows\n",
            "the ChatTTS decode runtime",
        ),
        # settings, below everything of the contract, importing the queue.
        ("core/infra/settings.py", "from core.queue import keys\n", "core: the queue"),
        # the service reaching for a test helper, or a benchmark's.
        ("core/infra/embedded_redis.py", "from testing import procs\n", PRODUCT),
        ("web/app.py", "def _f() -> None:\n    from bench import table\n", PRODUCT),
        # what tests and benchmarks share importing a benchmark, or a test.
        ("testing/procs.py", "from bench import table\n", SHARED),
        ("testing/topologies.py", "from tests import conftest\n", SHARED),
        # a benchmark importing a test.
        ("bench/lib/report.py", "from tests.bench import helpers\n", SHARED),
    ],
)
def test_a_broken_contract_fails(tree_copy: Path, module: str, code: str, broken: str) -> None:
    _append(tree_copy / module, code)
    result = _lint(tree_copy)
    assert result.returncode != 0
    broken_lines = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(line.startswith(broken) for line in broken_lines), result.stdout
