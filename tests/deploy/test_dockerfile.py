"""docker/Dockerfile: its cpu and gpu targets, their commands, users, health checks and
copies, checked against the real parser, Settings and router."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from tests.deploy.helpers import (
    CONSOLE_SCRIPT,
    DEFAULTS,
    DOCKER,
    ROOT,
    Stage,
    check_env_name,
    dockerfile_stages,
    effective_settings,
    exec_form,
    image_argv,
    image_env,
    parse_command,
    route_paths,
)
from web.app import STATIC_DIR, TEMPLATES_DIR


def stage_chain(stages: Mapping[str, Stage], name: str) -> list[Stage]:
    """A stage and every stage it copies from, recursively."""
    chain = [stages[name]]
    for args in stages[name].all("COPY"):
        match = re.match(r"--from=(\S+)", args)
        if match:
            chain.extend(stage_chain(stages, match.group(1)))
    return chain


def dockerignored() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_dockerfile_has_a_cpu_and_a_gpu_target() -> None:
    stages = dockerfile_stages()
    assert {"cpu", "gpu"} <= set(stages)
    assert stages["cpu"].base.startswith("python:3.1"), stages["cpu"].base
    assert re.match(r"nvidia/cuda:[\w.-]*runtime", stages["gpu"].base), stages["gpu"].base
    extras = {
        name: " ".join(
            args
            for stage in stage_chain(stages, name)
            for args in stage.all("RUN")
            if "pip" in args
        )
        for name in ("cpu", "gpu")
    }
    installed = {
        name: {extra for group in re.findall(r"\.\[([\w,]+)\]", pip) for extra in group.split(",")}
        for name, pip in extras.items()
    }
    assert {"chattts", "s3"} <= installed["gpu"], "the gpu target: the chattts and s3 extras"
    assert "s3" in installed["cpu"], "the cpu target: the s3 extra (the audio store's client)"
    assert "chattts" not in installed["cpu"], "the cpu target should not carry torch"
    assert not (DOCKER / "Dockerfile.gpu").exists()


@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_dockerfile_targets_run_unprivileged_in_exec_form_with_a_healthcheck(target: str) -> None:
    stage = dockerfile_stages()[target]
    user = (stage.last("USER") or "root").split(":")
    assert user[0].isdigit(), f"{target}: USER {user[0]} is not numeric (runAsNonRoot checks it)"
    assert int(user[0]) != 0 and (len(user) == 1 or int(user[1]) != 0), f"{target}: runs as root"
    argv = image_argv(stage)
    parse_command(argv, f"Dockerfile {target}: CMD")
    env = image_env(stage)
    for name in env:
        check_env_name(name, f"Dockerfile {target}: ENV")
    assert env.get("MALLOC_ARENA_MAX") == "2", f"{target}: thread pools fragment without it"
    settings = effective_settings(env, argv, f"Dockerfile {target}")
    exposed = {int(p.split("/")[0]) for args in stage.all("EXPOSE") for p in args.split()}
    assert exposed <= {settings.web.port, settings.worker.worker_metrics_port}, (target, exposed)

    healthcheck = stage.last("HEALTHCHECK")
    assert healthcheck is not None, f"{target}: no HEALTHCHECK"
    _, _, probe = healthcheck.partition(" CMD ")
    probe_argv = exec_form(probe.strip(), f"{target}: HEALTHCHECK")
    if probe_argv[0] == CONSOLE_SCRIPT:
        probe_args = parse_command(probe_argv[1:], f"{target}: HEALTHCHECK")
        if argv[0] == "worker":
            assert probe_args.command == "check" and probe_args.live, target
    else:
        assert argv[0] == "web", f"{target}: an HTTP health check for a {argv[0]} container"
        script = " ".join(probe_argv)
        paths = re.findall(r"http://127\.0\.0\.1:%s(/\w+)", script)
        assert paths and set(paths) <= route_paths(), (target, paths)
        port = re.search(r"environ\.get\('CHATTTS_PORT', '(\d+)'\)", script)
        assert port and int(port.group(1)) == DEFAULTS.web.port, target


@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_dockerfile_copies_what_the_package_reads(target: str) -> None:
    stages = dockerfile_stages()
    ignored = dockerignored()
    copied: set[str] = set()
    for stage in stage_chain(stages, target):
        for args in stage.all("COPY"):
            words = args.split()
            if words[0].startswith("--from="):
                assert words[0].removeprefix("--from=") in stages, args
                continue
            for source in words[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: no such file"
                assert source not in ignored, f"COPY {source}: excluded by .dockerignore"
                copied.add(source)
    # The web tier finds its templates and static files next to its package (web/app.py).
    needed = {"pyproject.toml", "README.md", "web", "workers"}
    needed |= {d.relative_to(ROOT).as_posix() for d in (TEMPLATES_DIR, STATIC_DIR)}
    assert needed <= copied, needed - copied


def test_nothing_refers_to_the_old_gpu_dockerfile() -> None:
    for path in [ROOT / "README.md", *ROOT.glob("bench/*"), *ROOT.glob("docker/**/*")]:
        if path.is_file():
            assert "Dockerfile.gpu" not in path.read_text(errors="replace"), path
