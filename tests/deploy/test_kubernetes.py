"""The manifests of docker/k8s/, KEDA's ScaledObject included, and (on a real Redis) why KEDA
scales on the streams' length rather than XINFO's lag."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml
from redis.asyncio import Redis as AsyncRedis

from core.audio_store.s3 import parse_s3_url
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest
from core.queue.keys import CONSUMER_GROUP, Keys
from core.queue.store import Queue
from tests.conftest import WorkerProcess
from tests.deploy.helpers import (
    CONSOLE_SCRIPT,
    ENV_ALIASES,
    K8S,
    Stage,
    check_env_name,
    dockerfile_stages,
    effective_settings,
    image_argv,
    image_env,
    parse_command,
    route_paths,
)
from web.app import SHUTDOWN_TIMEOUT_S

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
        assert c.settings.redis.redis_url and urlsplit(c.settings.redis.redis_url).scheme == "redis"


def test_ports_and_probes_are_the_real_ones() -> None:
    for c in all_containers():
        ports = {p["name"]: p["containerPort"] for p in c.spec.get("ports", [])}
        claimed = {"http": c.settings.web.port, "metrics": c.settings.worker.worker_metrics_port}
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
                assert port == c.settings.web.port, f"{c.deployment}: {probe_name} port {port}"
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
            port = (
                c.settings.web.port if c.command == "web" else c.settings.worker.worker_metrics_port
            )
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
                assert grace > c.settings.worker.shutdown_grace_s, (
                    f"{c.deployment}: grace too short"
                )
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
        assert c.settings.engine.name == "chattts" and c.settings.engine.model_dir, c.deployment
        mounts = {m["mountPath"]: m for m in c.spec["volumeMounts"]}
        assert mounts[c.settings.engine.model_dir].get("readOnly") is True, c.deployment
    # An init container fills the same claim, writable, with `models pull` before the worker.
    for doc in of_kind("Deployment"):
        pod = doc["spec"]["template"]["spec"]
        workers = [w for w in pod["containers"] if w.get("args") == ["worker"]]
        if not any("nvidia.com/gpu" in w["resources"].get("limits", {}) for w in workers):
            continue
        (init,) = pod["initContainers"]
        args = parse_command(init["args"], "k8s weights init container")
        assert (args.command, args.action) == ("models", "pull")
        env = {e["name"]: e.get("value") for e in init["env"]}
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        (mount,) = init["volumeMounts"]
        assert mount["mountPath"] == env["CHATTTS_MODEL_DIR"] and not mount.get("readOnly")
        worker_claims = {claims[m["name"]] for m in workers[0]["volumeMounts"]}
        assert claims[mount["name"]] in worker_claims


def test_services_and_budgets_select_real_pods() -> None:
    deployments = of_kind("Deployment")
    workloads = [*deployments, *of_kind("StatefulSet")]
    budgeted: set[str] = set()
    for doc in [*of_kind("Service"), *of_kind("PodDisruptionBudget")]:
        selector = doc["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        matched = [d for d in workloads if selector.items() <= pod_labels(d).items()]
        assert len(matched) == 1, f"{doc['kind']} {doc['metadata']['name']} selects {matched}"
        if doc["kind"] == "PodDisruptionBudget":
            budgeted.add(matched[0]["metadata"]["name"])
            continue
        specs = matched[0]["spec"]["template"]["spec"]["containers"]
        names = {p["name"] for spec in specs for p in spec.get("ports", [])}
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
        keys = Keys(first.settings.redis.key_prefix, first.settings.redis.queue)
        env_names = {e["name"] for e in first.spec["env"]}
        streams, readiness = set(), set()
        for trigger in spec["triggers"]:
            meta = trigger["metadata"]
            if trigger["type"] == "metrics-api":
                # The waiting room's jobs and the streams waiting for a worker with room: the
                # web Service's readiness detail (test_api.py reads both from a real /readyz).
                assert meta in (
                    {
                        "url": "http://chattts-web/readyz",
                        "valueLocation": "backlog.waiting",
                        "targetValue": "8",
                    },
                    {
                        "url": "http://chattts-web/readyz",
                        "valueLocation": "streams.waiting",
                        "targetValue": "1",
                    },
                )
                readiness.add(meta["valueLocation"])
                assert "chattts-web" in {s["metadata"]["name"] for s in of_kind("Service")}
                continue
            assert trigger["type"] == "redis-streams"
            assert set(meta) <= KEDA_REDIS_STREAMS_KEYS, set(meta) - KEDA_REDIS_STREAMS_KEYS
            assert all(isinstance(v, str) for v in meta.values()), "metadata values are strings"
            for key in ("addressFromEnv", "hostFromEnv", "portFromEnv", "passwordFromEnv"):
                if key in meta:
                    assert meta[key] in env_names, f"{key}: {meta[key]} not in the worker's env"
            # Length mode (no consumerGroup): lag + pending of the group, see the next test.
            assert "consumerGroup" not in meta and int(meta["streamLength"]) > 0
            streams.add(meta["stream"])
        assert streams == set(keys.streams)
        assert readiness == {"backlog.waiting", "streams.waiting"}


async def test_stream_length_is_lag_plus_pending_and_xinfo_lag_is_unknown(
    settings: Settings, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Why KEDA scales on the streams' length: finished jobs leave their stream, so its length
    is the group's lag plus its pending entries, while XINFO's own `lag` becomes unknown."""
    client = AsyncRedis.from_url(settings.redis.redis_url or "")
    queue = Queue(client, settings.replace(scheduler="fifo"))  # jobs wait in the stream
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


def test_authentication_is_required_and_redis_is_fenced() -> None:
    """A missing API Secret stops the web pods rather than serving open; the replicas share a
    cookie secret; only the service's own pods and KEDA reach Redis."""
    (web,) = [d for d in of_kind("Deployment") if d["metadata"]["name"] == "chattts-web"]
    env = {e["name"]: e for c in web["spec"]["template"]["spec"]["containers"] for e in c["env"]}
    for name in ("CHATTTS_API_KEYS", "CHATTTS_COOKIE_SECRET"):
        ref = env[name]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == "chattts-api" and not ref.get("optional", False), name
    policies = {
        p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]: p
        for p in of_kind("NetworkPolicy")
    }
    assert set(policies) == {"redis", "minio"}, "Redis and the audio store, fenced"
    policy = policies["redis"]
    rules = policy["spec"]["ingress"]
    sources = [s for rule in rules for s in rule["from"]]
    own = {"app.kubernetes.io/name": "chattts-online"}
    assert {"podSelector": {"matchLabels": own}} in sources
    assert all(p["port"] == 6379 for rule in rules for p in rule["ports"])
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    store_sources = [s for rule in policies["minio"]["spec"]["ingress"] for s in rule["from"]]
    assert store_sources == [{"podSelector": {"matchLabels": own}}]


def test_every_pod_names_the_audio_store_that_minio_serves() -> None:
    """Web and worker pods read the store's URL and keys from one Secret; the URL that
    minio.yaml's comment creates points at its Service, and its bucket Job makes that bucket."""
    (minio,) = of_kind("StatefulSet")
    (service,) = [s for s in of_kind("Service") if s["metadata"]["name"] == "chattts-minio"]
    (job,) = of_kind("Job")
    source = (K8S / "minio.yaml").read_text()
    url = re.search(r"--from-literal=url='([^']+)'", source)
    assert url, "minio.yaml shows the Secret's url"
    store = parse_s3_url(url[1])
    endpoint = urlsplit(store["endpoint"])
    assert endpoint.hostname == service["metadata"]["name"] and endpoint.port == 9000
    assert service["spec"]["ports"][0]["port"] == 9000
    setup = " ".join(job["spec"]["template"]["spec"]["containers"][0]["args"])
    assert f"mc mb --ignore-existing local/{store['bucket']}" in setup
    days = re.search(r"--expire-days (\d+)", setup)
    assert days and int(days[1]) * 86_400 > Settings().redis.job_ttl_s
    assert minio["spec"]["volumeClaimTemplates"], "the objects live on a volume"
    for c in all_containers():
        env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in c.spec["env"]}
        assert env["CHATTTS_AUDIO_STORE"] == {"name": "chattts-audio-store", "key": "url"}
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env[name]["name"] == "chattts-audio-store" and env[name]["optional"], name
