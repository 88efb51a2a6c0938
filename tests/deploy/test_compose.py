"""docker/compose.yaml and the Prometheus configuration: real commands, settings, ports,
mounts and health checks."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import yaml

from core.audio_store.s3 import parse_s3_url
from core.infra.redis_client import DEFAULT_SENTINEL_PORT, parse_url
from tests.deploy.helpers import (
    COMPOSE,
    CONSOLE_SCRIPT,
    DEFAULTS,
    DOCKERFILE,
    ENV_ALIASES,
    PROMETHEUS,
    ROOT,
    check_env_name,
    compose,
    compose_env,
    compose_services_running,
    dockerfile_stages,
    effective_settings,
    image_env,
    interpolate,
    parse_command,
    resolved_env,
    route_paths,
)
from web.app import SHUTDOWN_TIMEOUT_S
from web.middlewares.origin import host_allowed

REDIS_PORT = 6379  # the port of redis-server unless told otherwise (no --port anywhere here)
# What a user must export before `docker compose up` (the file's ${VAR:?...}).
USER_ENV = {"CHATTTS_COOKIE_SECRET": "0" * 64, "MINIO_ROOT_PASSWORD": "1" * 48}
HA_PROFILE = "ha"


def duration_s(text: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text}"
    return sum(float(n) * units[u] for n, u in parts)


def redis_options(argv: list[str]) -> dict[str, list[str]]:
    """`redis-server --option value... --option value...` as {"--option": [value, ...]}."""
    assert argv[0] == "redis-server" and (len(argv) == 1 or argv[1].startswith("--")), argv
    options: dict[str, list[str]] = {}
    values: list[str] = []
    for arg in argv[1:]:
        if arg.startswith("--"):
            values = options.setdefault(arg, [])
        else:
            values.append(arg)
    return options


def redis_password(options: Mapping[str, list[str]], option: str = "--requirepass") -> str | None:
    value = options.get(option)
    return value[0] if value else None


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
        env = resolved_env(service, USER_ENV)
        for var in env:
            if var not in ENV_ALIASES:
                check_env_name(var, f"compose {name}")
        command = service["command"]
        settings = effective_settings({**image_env(stages[target]), **env}, command, name)
        redis_url = urlsplit(settings.redis.redis_url or "")
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
            assert grace > settings.worker.shutdown_grace_s, f"{name}: stop_grace_period too short"
        if command[0] == "web":
            assert service["deploy"]["replicas"] >= 2
            assert duration_s(service["stop_grace_period"]) > SHUTDOWN_TIMEOUT_S
            container_ports = {int(str(p).rsplit(":", 1)[-1]) for p in service["ports"]}
            assert container_ports == {settings.web.port}, name


def test_compose_keeps_audio_in_its_minio_bucket_with_an_expiry() -> None:
    services = compose()["services"]
    minio, bucket_job = services["minio"], services["audio-bucket"]
    assert re.match(r"minio/minio:RELEASE\.", minio["image"]) and "healthcheck" in minio
    assert any(v.endswith(":/data") for v in minio["volumes"]), "the objects live in a volume"
    assert "ports" not in minio, "the store is reachable only on the project's network"
    minio_env = resolved_env(minio, USER_ENV)
    setup = " ".join(bucket_job["command"])
    for name, service in services.items():
        if "build" not in service:
            continue
        assert (
            service["depends_on"]["audio-bucket"]["condition"] == "service_completed_successfully"
        )
        env = resolved_env(service, USER_ENV)
        store = parse_s3_url(env["CHATTTS_AUDIO_STORE"])
        assert urlsplit(store["endpoint"]).hostname == "minio", name
        assert f"mc mb --ignore-existing local/{store['bucket']}" in setup, name
        assert env["AWS_ACCESS_KEY_ID"] == minio_env["MINIO_ROOT_USER"], name
        assert env["AWS_SECRET_ACCESS_KEY"] == minio_env["MINIO_ROOT_PASSWORD"], name
    days = re.search(r"mc ilm rule add --expire-days (\d+) local/", setup)
    assert days and int(days[1]) * 86_400 > DEFAULTS.redis.job_ttl_s, "objects outlive their jobs"


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
            {**image_env(stages["gpu"]), **resolved_env(service, USER_ENV)},
            service["command"],
            name,
        )
        assert settings.engine.name == "chattts" and settings.engine.model_dir, name
        read_only = {
            v["target"] if isinstance(v, dict) else v.rsplit(":", 2)[1]
            for v in service["volumes"]
            if (v.get("read_only") if isinstance(v, dict) else v.endswith(":ro"))
        }
        assert settings.engine.model_dir in read_only, f"{name}: the model is not mounted read-only"
        # The weights get in through a one-shot `models pull` on the same directory, written
        # there (not read-only), which the worker waits for.
        fetcher = compose()["services"]["models"]
        assert service["depends_on"]["models"]["condition"] == "service_completed_successfully"
        args = parse_command(fetcher["command"], "compose models")
        assert (args.command, args.action) == ("models", "pull")
        assert fetcher["image"] == service["image"]
        fetch_env = resolved_env(fetcher, USER_ENV)
        assert fetch_env["CHATTTS_MODEL_DIR"] == settings.engine.model_dir
        sources = {v["source"]: v for v in fetcher["volumes"]}
        worker_sources = {v["source"]: v for v in service["volumes"] if v["target"] == "/models"}
        assert set(worker_sources) <= set(sources)
        assert not any(v.get("read_only") for v in sources.values()), "models must write"
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
        assert ports[name] == DEFAULTS.web.port
    for name, _ in compose_services_running("worker"):
        assert ports[name] == DEFAULTS.worker.worker_metrics_port


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


def documented_ha_command() -> tuple[dict[str, str], list[str]]:
    """The command the comments of compose.yaml give for profile "ha": its environment
    assignments and its arguments (a trailing backslash continues a comment line)."""
    comments = [
        line.split("#", 1)[1].strip() for line in COMPOSE.read_text().splitlines() if "#" in line
    ]
    text = "\n".join(comments).replace("\\\n", " ")
    commands = [c for c in text.splitlines() if f"--profile {HA_PROFILE} up" in c]
    assert len(commands) == 1, f"compose.yaml documents {len(commands)} ha commands"
    words = shlex.split(commands[0])
    environ: dict[str, str] = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        environ[name] = value
    assert words[:3] == ["docker", "compose", "-f"], words
    assert (ROOT / words[3]).resolve() == COMPOSE, words
    return environ, words


def sentinel_config(name: str, service: Mapping[str, Any]) -> list[list[str]]:
    """The configuration file a sentinel writes at start (its lines as words, with the shell's
    variables substituted from the service's environment), and the command it then runs."""
    command = service["command"]
    assert command[:2] == ["sh", "-c"], f"{name}: {command}"
    script = interpolate(command[2], {})  # Compose: $$ to $
    written = re.fullmatch(
        r"\[ -f (\S+) \] \|\| cat > (\S+) <<EOF\n(.*?)\nEOF\n(.*)\n?", script, re.DOTALL
    )
    assert written, f"{name}: not `[ -f CONF ] || cat > CONF <<EOF ... EOF` then a command"
    path, target, body, rest = written.groups()
    assert path == target, f"{name}: tests {path} but writes {target}"
    assert path.startswith("/data/"), f"{name}: the config lives in the image's /data volume"
    env = compose_env(service)
    lines = [shlex.split(interpolate(line, env)) for line in body.splitlines() if line.strip()]
    run = shlex.split(rest)
    # The image's entrypoint starts redis-server as the redis user; --sentinel makes it one.
    assert run == ["exec", "docker-entrypoint.sh", "redis-server", path, "--sentinel"], run
    return lines


def test_compose_ha_profile_is_a_primary_a_replica_and_three_sentinels() -> None:
    services = compose()["services"]
    ha = {name for name, s in services.items() if HA_PROFILE in (s.get("profiles") or [])}
    sentinels = sorted(name for name in ha if name.startswith("sentinel-"))
    assert ha == {"redis-replica", *sentinels} and len(sentinels) == 3, ha
    for name in ha:
        service = services[name]
        assert service["profiles"] == [HA_PROFILE], f"{name} runs outside profile ha"
        assert service["image"] == services["redis"]["image"], name
        assert "ports" not in service, f"{name}: Redis is published to no network"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
        assert service["restart"] == "unless-stopped", name
        assert service["healthcheck"]["test"][0] == "CMD-SHELL", name
    assert "profiles" not in services["redis"], "the primary runs in every profile"

    primary = redis_options(services["redis"]["command"])
    password = redis_password(primary)
    assert "--replicaof" not in primary
    assert primary["--replica-announce-ip"] == ["redis"]

    # The replica: the primary's durability and memory settings, replicating from it.
    replica = redis_options(services["redis-replica"]["command"])
    for option in ("--appendonly", "--appendfsync", "--maxmemory", "--maxmemory-policy", "--save"):
        assert replica.get(option) == primary[option], option
    assert replica["--replicaof"] == ["redis", str(REDIS_PORT)]
    assert "--port" not in replica and "--port" not in primary
    assert replica["--replica-announce-ip"] == ["redis-replica"]
    assert redis_password(replica) == password, "the replica is the primary after a failover"
    assert redis_password(replica, "--masterauth") == password
    assert any(v.endswith(":/data") for v in services["redis-replica"]["volumes"])
    assert "info replication" in services["redis-replica"]["healthcheck"]["test"][1]

    # The sentinels: each watches the primary under one name, with the same quorum and password.
    monitored: set[str] = set()
    for name in sentinels:
        lines = sentinel_config(name, services[name])
        assert ["port", str(DEFAULT_SENTINEL_PORT)] in lines, name
        assert f"-p {DEFAULT_SENTINEL_PORT} ping" in services[name]["healthcheck"]["test"][1]
        assert ["sentinel", "announce-ip", name] in lines, f"{name} announces another name"
        monitors = [words for words in lines if words[:2] == ["sentinel", "monitor"]]
        assert len(monitors) == 1, name
        _, _, master, host, port, quorum = monitors[0]
        assert host == "redis" and int(port) == REDIS_PORT, name
        assert int(quorum) == 2 and int(quorum) > len(sentinels) // 2, name
        # Host names are read only once this is on: it must come before the monitor line.
        assert ["sentinel", "resolve-hostnames", "yes"] in lines, name
        resolve = lines.index(["sentinel", "resolve-hostnames", "yes"])
        assert resolve < lines.index(monitors[0]), name
        assert ["sentinel", "announce-hostnames", "yes"] in lines, name
        for words in lines:
            if words[0] == "sentinel" and words[1] not in (
                "monitor",
                "resolve-hostnames",
                "announce-hostnames",
                "announce-ip",
            ):
                assert words[2] == master, f"{name}: {words} is not about {master}"
        settings = {words[1]: words[3:] for words in lines if len(words) > 3}
        assert settings["down-after-milliseconds"] == ["5000"], name
        assert settings["failover-timeout"] == ["60000"], name
        assert settings["parallel-syncs"] == ["1"], name
        auth = settings.get("auth-pass")
        assert (auth[0] if auth else None) == password, f"{name}: not the primary's password"
        monitored.add(master)
    assert monitored == {"chattts"}

    # The documented command: its URL names these sentinels and that master, and the services
    # started with it connect there and wait for the replica.
    environ, words = documented_ha_command()
    assert words[4:] == ["--profile", HA_PROFILE, "up", "-d", "--build"], words
    topology = parse_url(environ["CHATTTS_REDIS_URL"])
    assert topology.shape == "sentinel" and topology.master == "chattts"
    assert set(topology.nodes) == {(name, DEFAULT_SENTINEL_PORT) for name in sentinels}
    assert topology.password == password
    replicas = [name for name, s in services.items() if "--replicaof" in s.get("command", [])]
    stages = dockerfile_stages()
    for name, service in services.items():
        if "build" in service:
            env = {**image_env(stages[service["build"]["target"]])}
            env.update(resolved_env(service, {**USER_ENV, **environ}))
            settings_ = effective_settings(env, service["command"], name)
            assert settings_.redis.redis_url == environ["CHATTTS_REDIS_URL"], name
            # 1 or more: the profile is for surviving the primary; no more than it has.
            assert 1 <= settings_.redis.redis_min_replicas <= len(replicas), name
            default = effective_settings(
                {**env, **resolved_env(service, USER_ENV)}, service["command"], name
            )
            assert default.redis.redis_min_replicas == 0 and default.redis.redis_url, name
            assert parse_url(default.redis.redis_url).shape == "single", name


def test_compose_web_keeps_the_host_guard_on() -> None:
    """Bound to 0.0.0.0 in its container, the web tier still answers only the names it is
    given: a page that rebinds its own name to 127.0.0.1 gets 421."""
    stages = dockerfile_stages()
    for name, service in compose_services_running("web"):
        env = resolved_env(service, USER_ENV)
        settings = effective_settings(
            {**image_env(stages[service["build"]["target"]]), **env}, service["command"], name
        )
        assert settings.web.host == "0.0.0.0", name
        assert host_allowed("localhost:8000", settings) and host_allowed("127.0.0.1:8000", settings)
        assert not host_allowed("rebound.example:8000", settings), name
    cpu = image_env(stages["cpu"])
    assert cpu["CHATTTS_ALLOWED_HOSTS"] and cpu["CHATTTS_ALLOWED_HOSTS"] != "*"
