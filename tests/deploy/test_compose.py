"""docker/compose.yaml and the Prometheus configuration: real commands, settings, ports,
mounts and health checks."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.deploy.helpers import (
    COMPOSE,
    CONSOLE_SCRIPT,
    DEFAULTS,
    DOCKERFILE,
    ENV_ALIASES,
    PROMETHEUS,
    check_env_name,
    compose,
    dockerfile_stages,
    effective_settings,
    image_env,
    parse_command,
    route_paths,
)
from web.app import SHUTDOWN_TIMEOUT_S

REDIS_PORT = 6379  # the port of redis-server unless told otherwise (no --port anywhere here)


def duration_s(text: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text}"
    return sum(float(n) * units[u] for n, u in parts)


def compose_env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def compose_services_running(command: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, service in compose()["services"].items():
        if "build" in service and service["command"][0] == command:
            yield name, service


def test_compose_interpolates_only_real_settings() -> None:
    for name in re.findall(r"\$\{(\w+)", COMPOSE.read_text()):
        check_env_name(name, "compose.yaml")


def test_compose_redis_is_durable_and_healthchecked() -> None:
    services = compose()["services"]
    redis = services["redis"]
    assert re.match(r"redis:\d", redis["image"])
    command = redis["command"]
    pairs = dict(zip(command[1::2], command[2::2], strict=True))
    assert command[0] == "redis-server"
    assert pairs["--appendonly"] == "yes"
    assert pairs["--appendfsync"] == "everysec"
    assert pairs["--maxmemory-policy"] == "noeviction"
    assert "--port" not in pairs
    assert any(v.endswith(":/data") for v in redis["volumes"]), "the AOF must live in a volume"
    assert "redis-cli" in " ".join(redis["healthcheck"]["test"])
    for name, service in services.items():
        if "build" in service:
            assert service["depends_on"]["redis"]["condition"] == "service_healthy", name


def test_compose_services_run_real_commands_with_real_settings() -> None:
    stages = dockerfile_stages()
    services = compose()["services"]
    built = {name: s for name, s in services.items() if "build" in s}
    assert {"web", "worker", "worker-cpu"} <= set(built)
    for name, service in built.items():
        build = service["build"]
        assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
        target = build["target"]
        assert target in stages and service["image"].endswith(f":{target}"), name
        env = compose_env(service)
        for var in env:
            if var not in ENV_ALIASES:
                check_env_name(var, f"compose {name}")
        command = service["command"]
        settings = effective_settings({**image_env(stages[target]), **env}, command, name)
        redis_url = urlsplit(settings.redis_url or "")
        assert redis_url.hostname in services and redis_url.port == REDIS_PORT, name
        assert "healthcheck" in service or stages[target].last("HEALTHCHECK"), name
        test = (service.get("healthcheck") or {}).get("test")
        if test:
            assert test[0] == "CMD" and test[1] == CONSOLE_SCRIPT, (name, test)
            probe = parse_command(test[2:], f"compose {name}: healthcheck")
            if command[0] == "worker":
                assert probe.command == "check" and probe.live, name
        if command[0] == "worker":
            # The CPU image's own HEALTHCHECK probes the web port: a worker must replace it.
            assert test, f"compose {name}: a worker needs its own healthcheck"
            grace = duration_s(service["stop_grace_period"])
            assert grace > settings.shutdown_grace_s, f"{name}: stop_grace_period too short"
        if command[0] == "web":
            assert service["deploy"]["replicas"] >= 2
            assert duration_s(service["stop_grace_period"]) > SHUTDOWN_TIMEOUT_S
            container_ports = {int(str(p).rsplit(":", 1)[-1]) for p in service["ports"]}
            assert container_ports == {settings.port}, name


def test_compose_gpu_worker_reserves_a_gpu_and_reads_the_model_read_only() -> None:
    stages = dockerfile_stages()
    gpu_workers = [
        (name, s) for name, s in compose_services_running("worker") if s["build"]["target"] == "gpu"
    ]
    assert gpu_workers
    for name, service in gpu_workers:
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert any("gpu" in d["capabilities"] for d in devices), name
        settings = effective_settings(
            {**image_env(stages["gpu"]), **compose_env(service)}, service["command"], name
        )
        assert settings.engine == "chattts" and settings.model_dir, name
        read_only = {
            v["target"] if isinstance(v, dict) else v.rsplit(":", 2)[1]
            for v in service["volumes"]
            if (v.get("read_only") if isinstance(v, dict) else v.endswith(":ro"))
        }
        assert settings.model_dir in read_only, f"{name}: the model is not mounted read-only"
    cpu_profiles = [s.get("profiles") for _, s in compose_services_running("worker")]
    assert ["cpu"] in cpu_profiles, "a CPU worker profile"


def test_compose_mounts_files_that_exist_and_prometheus_scrapes_the_real_ports() -> None:
    services = compose()["services"]
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith("./"):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} does not exist"
    config = yaml.safe_load(PROMETHEUS.read_text())
    ports: dict[str, int] = {}
    for job in config["scrape_configs"]:
        assert job["metrics_path"] in route_paths()
        for sd in job["dns_sd_configs"]:
            for host in sd["names"]:
                assert host in services, f"prometheus scrapes {host}, not a compose service"
                ports[host] = sd["port"]
    for name, _ in compose_services_running("web"):
        assert ports[name] == DEFAULTS.port
    for name, _ in compose_services_running("worker"):
        assert ports[name] == DEFAULTS.worker_metrics_port


def test_compose_publishes_nothing_to_the_network_by_default() -> None:
    """Web, Prometheus and Grafana listen on the host's loopback unless told otherwise; the web
    replicas share a cookie secret that must be set; Grafana has no anonymous or default admin."""
    services = compose()["services"]
    for name in ("web", "prometheus", "grafana"):
        for port in services[name]["ports"]:
            assert str(port).startswith(("127.0.0.1:", "${WEB_BIND:-127.0.0.1}:")), (name, port)
    assert "ports" not in services["redis"]
    env = compose_env(services["web"])
    assert env["CHATTTS_COOKIE_SECRET"].startswith("${CHATTTS_COOKIE_SECRET:?")
    grafana = services["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    redis_args = services["redis"]["command"]
    assert redis_args[redis_args.index("--maxmemory") + 1] != "${REDIS_MAXMEMORY:-0}"
