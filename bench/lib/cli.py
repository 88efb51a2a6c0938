"""The one command line of the benchmarks: `parser` builds a module's with the common flags it
asks for (each module then adds its own); stdlib only, so that GPU-machine scripts use it too."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.lib import baseline_env

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "bench" / "results"


def parser(
    module: str,
    doc: str | None,
    *,
    quick: str | None = None,
    output: str | None = None,
    json_alias: bool = False,
    repeats: int | str | None = None,
    logs: bool = False,
    log_level: bool = False,
    baseline: bool = False,
    checkout: bool = False,
) -> argparse.ArgumentParser:
    """`python -m bench.<module>`'s parser, described by `doc`'s first paragraph, with the common
    flags asked for: --quick (its help), --output (default bench/results/<output>.json; "": none;
    `json_alias`: --json too), --repeats (its default, or the help of a default --quick sets),
    --keep-logs (`logs`), --log-level, the baseline's (`baseline`), --repo (`checkout`)."""
    p = argparse.ArgumentParser(
        prog=f"python -m {module}", description=(doc or "").split("\n\n")[0]
    )
    if quick is not None:
        p.add_argument("--quick", action="store_true", help=f"a smoke run: {quick}")
    if output is not None:
        default = str(RESULTS_DIR / f"{output}.json") if output else None
        flags = ("--output", "--json") if json_alias else ("--output",)
        p.add_argument(*flags, dest="output", default=default, help="the figures as JSON here")
    if isinstance(repeats, int):
        p.add_argument("--repeats", type=int, default=repeats, help=f"runs ({repeats})")
    elif repeats is not None:
        p.add_argument("--repeats", type=int, help=f"runs ({repeats})")
    if logs:
        p.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    if log_level:
        p.add_argument("--log-level", default="WARNING", help="our processes' log level")
    if baseline:
        p.add_argument("--skip-baseline", action="store_true", help="measure ours alone")
        p.add_argument("--baseline-dir", help="another copy of the baseline (bench/baseline)")
        p.add_argument("--baseline-venv", default=str(baseline_env.DEFAULT_VENV))
    if checkout:
        p.add_argument("--repo", default=str(REPO_ROOT), help="the checkout to serve")
    return p


def setting(text: str) -> tuple[str, object]:
    """`--setting name=value`: a field of our Settings, converted as from its CHATTTS_ variable."""
    from core.infra.settings import ENV_PREFIX, SETTINGS, Settings

    name, sep, value = text.partition("=")
    name = name.strip().lower()
    if not sep or name not in SETTINGS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, NAME a setting")
    return name, Settings.from_env({f"{ENV_PREFIX}{name.upper()}": value}).value(name)


def add_setting_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--setting",
        type=setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of our web process over the bench's (e.g. max_backlog=1, api_keys=k: "
        "requests are refused and the bench fails, as it must)",
    )
