"""The Grafana dashboard and its provisioning: every metric a panel queries is one the code of
web/ and workers/ declares."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.deploy.helpers import DASHBOARD, DOCKER, ROOT, compose

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
