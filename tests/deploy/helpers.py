"""What the deployment tests share: the paths of docker/, the real parser, Settings and router,
and a parser of the Dockerfile's stages (no Docker engine or cluster needed)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import build_parser, settings_from_args
from core.infra.settings import ENV_PREFIX, SETTINGS, Settings
from web.app import create_app

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = DOCKER / "compose.yaml"
K8S = DOCKER / "k8s"
DASHBOARD = DOCKER / "grafana" / "chattts-online.json"
PROMETHEUS = DOCKER / "prometheus" / "prometheus.yml"
CONSOLE_SCRIPT = "chattts-online"
DEFAULTS = Settings()
SETTING_VARS = {ENV_PREFIX + name.upper() for name in SETTINGS}
ENV_ALIASES = {"REDIS_URL"}  # read by Settings.from_env for redis_url


# -- the code's side ---------------------------------------------------------------------------


def parse_command(argv: Sequence[str], where: str) -> argparse.Namespace:
    """`chattts-online ARGV` through the real parser: a real subcommand with real flags."""
    try:
        return build_parser().parse_args(list(argv))
    except SystemExit as exc:
        pytest.fail(f"{where}: `{CONSOLE_SCRIPT} {shlex.join(argv)}` does not parse ({exc})")


def effective_settings(env: Mapping[str, str], argv: Sequence[str], where: str) -> Settings:
    """The settings a process started with this environment and command line would have."""
    args = parse_command(argv, where)
    return settings_from_args(args, env)


@cache
def route_paths() -> frozenset[str]:
    """The canonical path of every resource of the real web application (no server started)."""
    app = create_app(Settings())
    return frozenset(resource.canonical for resource in app.router.resources())


def check_env_name(name: str, where: str) -> None:
    if name.startswith(ENV_PREFIX):
        assert name in SETTING_VARS, f"{where}: {name} is not a setting (core/infra/settings.py)"


# -- the Dockerfile ----------------------------------------------------------------------------


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [args for o, args in self.instructions if o == op]

    def last(self, op: str) -> str | None:
        found = self.all(op)
        return found[-1] if found else None


def dockerfile_stages(path: Path = DOCKERFILE) -> dict[str, Stage]:
    """The stages of a Dockerfile by name, each with the instructions of its parents first."""
    text = re.sub(r"\\\n", " ", path.read_text())
    args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op, rest = op.upper(), rest.strip()
        if op == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            assert len(words) == 3 and words[1].upper() == "AS", f"unnamed stage: FROM {rest}"
            parent = stages.get(image)
            current = Stage(words[2], parent.base if parent else image)
            if parent:
                current.instructions.extend(parent.instructions)
            stages[current.name] = current
        elif current is None:
            assert op == "ARG", f"{op} before the first FROM"
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            current.instructions.append((op, rest))
    return stages


def exec_form(args: str, where: str) -> list[str]:
    """A JSON array (exec form: no shell between Docker and the process, so signals arrive)."""
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        pytest.fail(f"{where} is in shell form: {args}")
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), where
    return value


def image_env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.all("ENV"):
        for pair in shlex.split(args):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def image_argv(stage: Stage) -> list[str]:
    entry = exec_form(stage.last("ENTRYPOINT") or "", f"{stage.name}: ENTRYPOINT")
    cmd = exec_form(stage.last("CMD") or "", f"{stage.name}: CMD")
    assert entry == [CONSOLE_SCRIPT], f"{stage.name}: ENTRYPOINT is not the console script"
    return cmd


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


# -- the compose file ---------------------------------------------------------------------


def compose_env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


_VARIABLE = re.compile(r"\$(?:(\$)|\{(\w+)(?:(:?[-?+])([^}]*))?\}|(\w+))")


def interpolate(text: str, environ: Mapping[str, str]) -> str:
    """What Compose makes of a value given this environment: $$, $VAR, ${VAR}, ${VAR:-default},
    ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+other}, ${VAR+other}."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(1):
            return "$"
        name = match.group(2) or match.group(5)
        op, arg = match.group(3) or "", match.group(4) or ""
        value = environ.get(name)
        unset = value is None or (op.startswith(":") and value == "")
        if op.endswith("-"):
            return arg if unset else str(value)
        if op.endswith("?"):
            assert not unset, f"compose refuses to start: {name} is unset ({arg})"
            return str(value)
        if op.endswith("+"):
            return "" if unset else arg
        return value or ""

    return _VARIABLE.sub(substitute, text)


def resolved_env(service: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    return {k: interpolate(v, environ) for k, v in compose_env(service).items()}


def compose_services_running(command: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, service in compose()["services"].items():
        if "build" in service and service["command"][0] == command:
            yield name, service
