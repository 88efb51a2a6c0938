"""The deployment files, checked as far as a parser can without a Docker engine."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from web.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
SUBCOMMANDS = {"run", "web", "worker", "check", "say", "submit"}


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def test_dockerfiles_copy_what_exists_and_run_the_console_script() -> None:
    for name in ("Dockerfile", "Dockerfile.gpu"):
        instructions = dockerfile_instructions(DOCKER / name)
        assert instructions[0][0] == "FROM"
        for op, args in instructions:
            assert op in {
                "FROM",
                "ENV",
                "WORKDIR",
                "COPY",
                "RUN",
                "USER",
                "EXPOSE",
                "HEALTHCHECK",
                "ENTRYPOINT",
                "CMD",
                "ARG",
            }, (name, op)
            if op == "COPY":
                for source in args.split()[:-1]:
                    assert (ROOT / source).exists(), f"{name}: COPY {source} does not exist"
        entry = dict(instructions)["ENTRYPOINT"]
        assert entry == '["chattts-online"]'
        cmd = dict(instructions)["CMD"].strip('[]"')
        assert cmd in SUBCOMMANDS


def test_compose_file_is_consistent() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert {"redis", "web", "worker"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    for name, service in services.items():
        if "build" in service:
            assert (DOCKER / service["build"]["context"] / service["build"]["dockerfile"]).exists()
            args = build_parser().parse_args([*service["command"]])  # a real subcommand
            assert args.command in SUBCOMMANDS, name
            assert service["environment"]["CHATTTS_REDIS_URL"].startswith("redis://redis:")


def test_kubernetes_manifests_parse_and_probe_real_endpoints() -> None:
    documents = [
        doc
        for path in sorted((DOCKER / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    kinds = {doc["kind"] for doc in documents}
    assert {"Deployment", "Service"} <= kinds
    for doc in documents:
        if doc["kind"] != "Deployment":
            continue
        selector = doc["spec"]["selector"]["matchLabels"]
        assert selector.items() <= doc["spec"]["template"]["metadata"]["labels"].items()
        for container in doc["spec"]["template"]["spec"]["containers"]:
            assert build_parser().parse_args(container["args"]).command in SUBCOMMANDS
            for probe in ("readinessProbe", "livenessProbe"):
                if probe in container:
                    assert container[probe]["httpGet"]["path"] in ("/readyz", "/healthz")
