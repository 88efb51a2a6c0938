"""Logs: JSON lines on request, the job id on every line about a job, no job text above DEBUG."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from core.infra import logs
from tests.conftest import ROOT, WorkerProcess
from tests.web.webproc import WebProcess, start_web  # noqa: F401 (a fixture)

SECRET = "zebra-quartz-marmalade"


def record(message: str, *args: Any, **extra: Any) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": "t", "levelno": logging.WARNING, "levelname": "WARNING", "msg": message,
         "args": args, **extra}
    )  # fmt: skip


def test_json_lines_carry_extras_and_the_context_job_id() -> None:
    formatter, context = logs.JsonFormatter(), logs.JobIdFilter()
    line = record("lost %s", "j1", job_id="j1")
    assert context.filter(line)
    doc = json.loads(formatter.format(line))
    assert doc["message"] == "lost j1" and doc["job_id"] == "j1" and doc["level"] == "WARNING"
    assert doc["ts"].endswith("Z") and isinstance(doc["pid"], int)

    with logs.job_context("j2"):
        inside = record("about the request")
        context.filter(inside)
    outside = record("not about a job")
    context.filter(outside)
    assert json.loads(formatter.format(inside))["job_id"] == "j2"
    assert "job_id" not in json.loads(formatter.format(outside))


def test_text_lines_name_the_job() -> None:
    line = record("failed", job_id="j3")
    assert logs.TextFormatter().format(line).endswith("failed [job_id=j3]")
    assert logs.TextFormatter().format(record("plain")).endswith("plain")


def test_an_unknown_format_or_level_is_refused_by_the_command() -> None:
    for env in ({"CHATTTS_LOG_FORMAT": "xml"}, {"CHATTTS_LOG_LEVEL": "LOUD"}):
        result = subprocess.run(
            [sys.executable, "-m", "cli", "check", "--ready"],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 2, result.stderr
        assert next(iter(env.values())) in result.stderr


def _json_lines(text: str) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    docs = []
    for line in lines:
        try:
            docs.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON log line: {line!r}")
    return docs


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def _wait_state(url: str, states: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 20
    while True:
        with urllib.request.urlopen(url, timeout=10) as response:
            if json.loads(response.read())["state"] in states:
                return
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_processes_log_json_with_job_ids_and_never_the_text(
    start_web: Callable[..., WebProcess],  # noqa: F811
    start_worker: Callable[..., WorkerProcess],
) -> None:
    web = start_web(log_format="json", log_level="INFO")
    worker = start_worker(CHATTTS_LOG_FORMAT="json", CHATTTS_LOG_LEVEL="INFO")
    done = _post(f"{web.url}/v1/tts/jobs", {"text": f"{SECRET} spoken"})
    _wait_state(f"{web.url}/v1/tts/jobs/{done['id']}", ("succeeded",))
    again = _post(f"{web.url}/v1/tts/jobs", {"text": f"{SECRET} spoken"})  # a cache hit
    _wait_state(f"{web.url}/v1/tts/jobs/{again['id']}", ("succeeded",))
    deadline = time.monotonic() + 10
    while again["id"] not in worker.log():
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.1)
    worker_log, web_log = worker.log(), web.log_path.read_text()

    assert SECRET not in worker_log + web_log
    worker_docs, web_docs = _json_lines(worker_log), _json_lines(web_log)
    assert any("ready in" in d["message"] for d in worker_docs)
    ids = (done["id"], again["id"])
    about_jobs = [d for d in worker_docs + web_docs if any(i in d["message"] for i in ids)]
    assert {d.get("job_id") for d in about_jobs} == set(ids), about_jobs
    for doc in about_jobs:
        assert doc["job_id"] in doc["message"]


def test_library_lines_quoting_the_text_are_kept_to_debug() -> None:
    logger = logging.getLogger("test.library")
    logger.addFilter(logs.DemoteToDebug("found invalid characters"))
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    root = logging.getLogger()
    level = root.level
    try:
        root.setLevel(logging.INFO)
        logger.warning("found invalid characters: {'%s'}", SECRET)
        logger.warning("model loaded")
        assert [r.getMessage() for r in seen] == ["model loaded"]
        root.setLevel(logging.DEBUG)
        logger.warning("found invalid characters: {'x'}")
        assert seen[-1].levelname == "DEBUG" and "invalid" in seen[-1].getMessage()
    finally:
        root.setLevel(level)
        logger.removeHandler(handler)


def test_json_lines_survive_odd_extras_and_keep_their_fields() -> None:
    formatter = logs.JsonFormatter()
    doc = json.loads(formatter.format(record("odd", level="forged", m={1: "one"})))
    assert doc["level"] == "WARNING" and doc["message"] == "odd" and doc["m"] == {"1": "one"}
    big = json.loads(formatter.format(record("big", big=2**70)))  # past what orjson writes
    assert big["message"] == "big" and big["big"] == str(2**70)


def test_a_path_cannot_forge_log_lines(start_web: Callable[..., WebProcess]) -> None:  # noqa: F811
    """A job id comes from the URL: only a valid one reaches a log line, so an encoded newline
    in the path cannot start a line of its own."""
    web = start_web(log_level="INFO")
    forged = "abc%0A2026-11-29%2020:00:00,000%20ERROR%20chattts_online.web[1]:%20forged"
    for path in (f"/v1/tts/jobs/{forged}", f"/tts/query/{forged}"):
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(f"{web.url}{path}", timeout=10).close()
    real = _post(f"{web.url}/v1/tts/jobs", {"text": "a real job"})
    urllib.request.urlopen(f"{web.url}/v1/tts/jobs/{real['id']}", timeout=10).close()
    deadline = time.monotonic() + 5
    while real["id"] not in web.log_path.read_text():
        assert time.monotonic() < deadline, web.log_path.read_text()
        time.sleep(0.05)
    lines = web.log_path.read_text().splitlines()
    assert not [line for line in lines if "forged" in line and line.startswith("2026-11-29 20:00")]
    assert not [line for line in lines if "[job_id=abc" in line]
    assert any(f"[job_id={real['id']}]" in line for line in lines)
