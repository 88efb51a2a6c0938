"""The deployment files under docker/, checked against the code they deploy.

No Docker engine or cluster is needed: every file is parsed, and every name it uses — a command
and its flags, an environment variable, a port, a probe path, a stream key, a consumer group, a
metric — is looked up in the real code (the real argparse parser, Settings, the real aiohttp
router, workers.keys, the metric declarations of web/ and workers/).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from redis.asyncio import Redis as AsyncRedis

from tests.conftest import WorkerProcess
from web.app import SHUTDOWN_TIMEOUT_S, STATIC_DIR, TEMPLATES_DIR, create_app
from web.cli import build_parser, settings_from_args
from workers.job import SynthesisRequest
from workers.keys import CONSUMER_GROUP, Keys
from workers.queue import Queue
from workers.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = DOCKER / "compose.yaml"
K8S = DOCKER / "k8s"
DASHBOARD = DOCKER / "grafana" / "chattts-online.json"
PROMETHEUS = DOCKER / "prometheus" / "prometheus.yml"
CONSOLE_SCRIPT = "chattts-online"
DEFAULTS = Settings()
SETTING_VARS = {ENV_PREFIX + f.name.upper() for f in fields(Settings)}
ENV_ALIASES = {"REDIS_URL"}  # read by Settings.from_env for redis_url
REDIS_PORT = 6379  # the port of redis-server unless told otherwise (no --port anywhere here)
# Every metadata key of KEDA's redis-streams scaler (keda.sh/docs/latest/scalers/redis-streams).
KEDA_REDIS_STREAMS_KEYS = {
    "address",
    "host",
    "port",
    "addressFromEnv",
    "hostFromEnv",
    "portFromEnv",
    "usernameFromEnv",
    "passwordFromEnv",
    "stream",
    "consumerGroup",
    "pendingEntriesCount",
    "streamLength",
    "lagCount",
    "activationLagCount",
    "enableTLS",
    "unsafeSsl",
    "databaseIndex",
}


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
        assert name in SETTING_VARS, f"{where}: {name} is not a setting (workers/settings.py)"


SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
    "enum": ("",),
    "unknown": ("", "_total", "_created", "_bucket", "_sum", "_count", "_info"),
}
CONSTRUCTORS = {
    "Counter": "counter",
    "CounterMetricFamily": "counter",
    "Gauge": "gauge",
    "GaugeMetricFamily": "gauge",
    "Histogram": "histogram",
    "HistogramMetricFamily": "histogram",
    "Summary": "summary",
    "SummaryMetricFamily": "summary",
    "Info": "info",
    "InfoMetricFamily": "info",
    "Enum": "enum",
    "StateSetMetricFamily": "enum",
}
METRIC_NAME = re.compile(r"chattts_[a-z0-9_]+")


def metric_constant(node: ast.AST) -> str | None:
    """The metric name a node spells, if it is a string constant that is one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if METRIC_NAME.fullmatch(node.value) else None
    return None


@cache
def exposed_metrics() -> frozenset[str]:
    """Every series name the Python code of web/ and workers/ can expose.

    A name given as the first argument of a metric constructor has that kind's suffixes (a
    Counter `x` is scraped as `x_total`, a Histogram as `x_bucket`, `x_sum`, `x_count`); any
    other string constant that is a metric name (names kept in tables) may carry any suffix.
    """
    exposed: set[str] = set()
    for path in [*(ROOT / "web").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]:
        tree = ast.parse(path.read_text(), str(path))
        typed: set[int] = set()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            kind = CONSTRUCTORS.get(func.id if isinstance(func, ast.Name) else "")
            kind = kind or CONSTRUCTORS.get(func.attr if isinstance(func, ast.Attribute) else "")
            name = metric_constant(node.args[0])
            if kind and name:
                base = name.removesuffix("_total") if kind == "counter" else name
                exposed.update(base + suffix for suffix in SUFFIXES[kind])
                typed.add(id(node.args[0]))
        for node in ast.walk(tree):
            name = metric_constant(node)
            if name and id(node) not in typed:
                exposed.update(name + suffix for suffix in SUFFIXES["unknown"])
    return frozenset(exposed)


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
    assert ".[chattts]" in extras["gpu"], "the gpu target does not install the chattts extra"
    assert "chattts]" not in extras["cpu"], "the cpu target should not carry torch"
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
    settings = effective_settings(env, argv, f"Dockerfile {target}")
    exposed = {int(p.split("/")[0]) for args in stage.all("EXPOSE") for p in args.split()}
    assert exposed <= {settings.port, settings.worker_metrics_port}, (target, exposed)

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
        assert port and int(port.group(1)) == DEFAULTS.port, target


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


# -- compose -----------------------------------------------------------------------------------


def duration_s(text: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text}"
    return sum(float(n) * units[u] for n, u in parts)


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


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


# -- Kubernetes --------------------------------------------------------------------------------


def k8s_documents() -> list[dict[str, Any]]:
    docs = [
        doc
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc is not None
    ]
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
    return docs


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in k8s_documents() if doc["kind"] == kind]


def pod_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


@dataclass
class Container:
    deployment: str
    spec: dict[str, Any]
    stage: Stage
    argv: list[str]
    env: dict[str, str]
    settings: Settings

    @property
    def command(self) -> str:
        return self.argv[0]


def containers(deployment: Mapping[str, Any]) -> list[Container]:
    stages = dockerfile_stages()
    found = []
    for spec in deployment["spec"]["template"]["spec"]["containers"]:
        where = f"{deployment['metadata']['name']}/{spec['name']}"
        target = spec["image"].rsplit(":", 1)[-1]
        assert target in stages, f"{where}: image tag {target} is no Dockerfile target"
        stage = stages[target]
        if "command" in spec:
            assert spec["command"][0] == CONSOLE_SCRIPT, where
            argv = [*spec["command"][1:], *spec.get("args", [])]
        else:
            argv = list(spec.get("args") or image_argv(stage))
        env = {e["name"]: e["value"] for e in spec.get("env", []) if "value" in e}
        settings = effective_settings({**image_env(stage), **env}, argv, where)
        found.append(Container(where, spec, stage, argv, env, settings))
    return found


def all_containers() -> list[Container]:
    return [c for d in of_kind("Deployment") for c in containers(d)]


def test_manifests_parse_and_name_what_is_needed() -> None:
    kinds = {doc["kind"] for doc in k8s_documents()}
    assert {"Deployment", "Service", "PodDisruptionBudget", "ScaledObject"} <= kinds
    commands = {c.command for c in all_containers()}
    assert {"web", "worker"} <= commands


def test_container_environment_names_real_settings() -> None:
    for c in all_containers():
        defined: set[str] = set()
        for entry in c.spec.get("env", []):
            name = entry["name"]
            if name not in ENV_ALIASES:
                check_env_name(name, c.deployment)
            for ref in re.findall(r"\$\((\w+)\)", entry.get("value", "")):
                assert ref in defined, f"{c.deployment}: $({ref}) is not defined before {name}"
            defined.add(name)
        if c.command == "worker":
            names = {e["name"]: e for e in c.spec["env"]}
            field_ref = names["CHATTTS_WORKER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
            assert field_ref == "metadata.name", "a worker is named after its pod"
        assert c.settings.redis_url and urlsplit(c.settings.redis_url).scheme == "redis"


def test_ports_and_probes_are_the_real_ones() -> None:
    for c in all_containers():
        ports = {p["name"]: p["containerPort"] for p in c.spec.get("ports", [])}
        claimed = {"http": c.settings.port, "metrics": c.settings.worker_metrics_port}
        for name, number in ports.items():
            assert number == claimed[name], f"{c.deployment}: port {name} is {number}"
        if c.command == "web":
            assert "http" in ports
        if c.command == "worker":
            assert "metrics" in ports
        for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = c.spec.get(probe_name)
            if probe is None:
                assert probe_name == "startupProbe", f"{c.deployment}: no {probe_name}"
                continue
            if "httpGet" in probe:
                get = probe["httpGet"]
                assert get["path"] in route_paths(), f"{c.deployment}: {get['path']} no route"
                assert c.command == "web", f"{c.deployment}: only the web tier serves routes"
                port = ports.get(get["port"], get["port"])
                assert port == c.settings.port, f"{c.deployment}: {probe_name} port {port}"
                expected = "/healthz" if probe_name == "livenessProbe" else "/readyz"
                if probe_name != "startupProbe":
                    assert get["path"] == expected, (c.deployment, probe_name)
            else:
                argv = probe["exec"]["command"]
                assert argv[0] == CONSOLE_SCRIPT, (c.deployment, argv)
                args = parse_command(argv[1:], f"{c.deployment}: {probe_name}")
                assert args.command == "check"
                if probe_name in ("livenessProbe", "startupProbe"):
                    assert args.live, f"{c.deployment}: {probe_name} must be check --live"
                else:
                    assert args.ready, f"{c.deployment}: readinessProbe must be check --ready"
            timeout = probe.get("timeoutSeconds", 1)
            assert timeout * probe.get("failureThreshold", 3) >= 2, (c.deployment, probe_name)
        pre_stop = c.spec.get("lifecycle", {}).get("preStop", {}).get("exec", {})
        if pre_stop:
            assert pre_stop["command"][0] == "sleep", "preStop only pauses"


def test_scrape_annotations_point_at_the_metrics_endpoints() -> None:
    for deployment in of_kind("Deployment"):
        notes = deployment["spec"]["template"]["metadata"].get("annotations", {})
        for c in containers(deployment):
            port = c.settings.port if c.command == "web" else c.settings.worker_metrics_port
            assert notes.get("prometheus.io/port") == str(port), c.deployment
            assert notes.get("prometheus.io/path") == "/metrics"
            if c.command == "web":
                assert "/metrics" in route_paths()


def test_deployments_stop_gracefully_unprivileged() -> None:
    stages = dockerfile_stages()
    for deployment in of_kind("Deployment"):
        spec = deployment["spec"]
        assert spec["selector"]["matchLabels"].items() <= pod_labels(deployment).items()
        pod = spec["template"]["spec"]
        grace = pod["terminationGracePeriodSeconds"]
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True
        for c in containers(deployment):
            uid = (c.stage.last("USER") or "").split(":")[0]
            assert str(security["runAsUser"]) == uid, f"{c.deployment}: runAsUser vs USER"
            if c.command == "worker":
                assert grace > c.settings.shutdown_grace_s, f"{c.deployment}: grace too short"
            else:
                assert grace > SHUTDOWN_TIMEOUT_S, c.deployment
        assert stages  # every image tag was a target (checked in containers())


def test_gpu_workers_request_a_gpu_and_mount_the_model_read_only() -> None:
    gpu = [c for c in all_containers() if c.command == "worker" and c.stage.name == "gpu"]
    assert gpu, "a GPU worker Deployment"
    for c in gpu:
        resources = c.spec["resources"]
        assert int(resources["limits"]["nvidia.com/gpu"]) >= 1, c.deployment
        requested = resources["requests"].get("nvidia.com/gpu")
        assert requested in (None, resources["limits"]["nvidia.com/gpu"]), c.deployment
        assert c.settings.engine == "chattts" and c.settings.model_dir, c.deployment
        mounts = {m["mountPath"]: m for m in c.spec["volumeMounts"]}
        assert mounts[c.settings.model_dir].get("readOnly") is True, c.deployment


def test_services_and_budgets_select_real_pods() -> None:
    deployments = of_kind("Deployment")
    budgeted: set[str] = set()
    for doc in [*of_kind("Service"), *of_kind("PodDisruptionBudget")]:
        selector = doc["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        matched = [d for d in deployments if selector.items() <= pod_labels(d).items()]
        assert len(matched) == 1, f"{doc['kind']} {doc['metadata']['name']} selects {matched}"
        if doc["kind"] == "PodDisruptionBudget":
            budgeted.add(matched[0]["metadata"]["name"])
            continue
        names = {p["name"] for c in containers(matched[0]) for p in c.spec.get("ports", [])}
        for port in doc["spec"]["ports"]:
            assert port["targetPort"] in names, port
    assert budgeted == {d["metadata"]["name"] for d in deployments}, "a PDB per Deployment"


def test_keda_scales_workers_on_the_real_streams_and_group() -> None:
    deployments = {d["metadata"]["name"]: d for d in of_kind("Deployment")}
    scaled = of_kind("ScaledObject")
    assert scaled
    for obj in scaled:
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        spec = obj["spec"]
        target = deployments[spec["scaleTargetRef"]["name"]]
        first = containers(target)[0]  # KEDA reads the environment of the first container
        assert first.command == "worker", "KEDA scales workers"
        # The workers create the consumer group, and the web tier's /readyz wants a live
        # worker: scaling to zero would stall the first submit.
        assert spec.get("minReplicaCount", 0) >= 1
        keys = Keys(first.settings.key_prefix, first.settings.queue)
        env_names = {e["name"] for e in first.spec["env"]}
        streams = set()
        for trigger in spec["triggers"]:
            assert trigger["type"] == "redis-streams"
            meta = trigger["metadata"]
            assert set(meta) <= KEDA_REDIS_STREAMS_KEYS, set(meta) - KEDA_REDIS_STREAMS_KEYS
            assert all(isinstance(v, str) for v in meta.values()), "metadata values are strings"
            for key in ("addressFromEnv", "hostFromEnv", "portFromEnv", "passwordFromEnv"):
                if key in meta:
                    assert meta[key] in env_names, f"{key}: {meta[key]} not in the worker's env"
            # Length mode (no consumerGroup): lag + pending of the group, see the next test.
            assert "consumerGroup" not in meta and int(meta["streamLength"]) > 0
            streams.add(meta["stream"])
        assert streams == set(keys.streams)


async def test_stream_length_is_lag_plus_pending_and_xinfo_lag_is_unknown(
    settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Why KEDA scales on the streams' length: finished jobs leave their stream, so its length
    is the group's lag plus its pending entries, while XINFO's own `lag` becomes unknown."""
    client = AsyncRedis.from_url(settings.redis_url or "")
    queue = Queue(client, settings)
    try:
        # A long job: read by one consumer, still in its hands while later jobs finish.
        await queue.ensure_group()
        await queue.enqueue(SynthesisRequest(text="long"), client="deploy")
        await client.xreadgroup(CONSUMER_GROUP, "busy", {queue.keys.jobs: ">"}, count=1)
        worker = start_worker(CHATTTS_LEASE_MS="600000")  # never reclaims the long job
        for i in range(3):
            await queue.enqueue(SynthesisRequest(text=f"done {i}"), client="deploy")
        deadline = time.monotonic() + 20
        while await client.xlen(queue.keys.jobs) > 1:
            assert time.monotonic() < deadline, "the worker did not finish the jobs"
            await asyncio.sleep(0.05)
        worker.stop()
        for i in range(5):  # waiting, with no worker to read them
            await queue.enqueue(SynthesisRequest(text=f"waiting {i}"), client="deploy")
        pending = await client.xpending(queue.keys.jobs, CONSUMER_GROUP)
        assert await client.xlen(queue.keys.jobs) == 6 and pending["pending"] == 1
        # The true lag is 5; Redis cannot tell it any more (KEDA's lagCount would read 0).
        groups = await client.xinfo_groups(queue.keys.jobs)
        assert [g["lag"] for g in groups if g["name"] == CONSUMER_GROUP.encode()] == [None]
    finally:
        await client.aclose()


# -- Grafana -----------------------------------------------------------------------------------


def dashboard_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from dashboard_panels(panel.get("panels", []))


def test_dashboard_queries_only_metrics_the_code_declares() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    panels = list(dashboard_panels(dashboard["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    used: set[str] = set()
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(METRIC_NAME.findall(target["expr"]))
            assert names, f"{panel['title']}: a query without a chattts metric"
            for name in names:
                if name.endswith("_bucket"):
                    assert "histogram_quantile" in target["expr"], panel["title"]
            used |= names
    unknown = used - exposed_metrics()
    assert not unknown, f"metrics the code does not declare: {sorted(unknown)}"
    # The dashboard covers both tiers.
    assert any(n.startswith("chattts_worker_") for n in used)
    assert any(n.startswith("chattts_http_") for n in used)


def test_grafana_provisioning_loads_the_dashboard() -> None:
    provisioning = DOCKER / "grafana" / "provisioning"
    providers = yaml.safe_load((provisioning / "dashboards" / "chattts-online.yaml").read_text())
    path = providers["providers"][0]["options"]["path"]
    mounts = compose()["services"]["grafana"]["volumes"]
    assert f"./grafana/{DASHBOARD.name}:{path}/{DASHBOARD.name}:ro" in mounts
    sources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    url = urlsplit(sources["datasources"][0]["url"])
    assert url.hostname in compose()["services"]


def test_nothing_refers_to_the_old_gpu_dockerfile() -> None:
    for path in [ROOT / "README.md", *ROOT.glob("bench/*"), *ROOT.glob("docker/**/*")]:
        if path.is_file():
            assert "Dockerfile.gpu" not in path.read_text(errors="replace"), path
