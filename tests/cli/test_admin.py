"""`chattts-online admin` as an operator runs it: real processes against a real web process."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.infra.settings import Settings
from tests.conftest import ROOT, WorkerProcess
from tests.web.webproc import WebProcess

ADMIN_KEY = "cli-admin-key-77"


@pytest.fixture
def web(settings: Settings, tmp_path: Path) -> Iterator[WebProcess]:
    process = WebProcess(settings.replace(admin_keys=ADMIN_KEY), tmp_path / "web.log").wait_ready()
    yield process
    process.stop()


def admin(
    web: WebProcess, *args: str, key: str | None = ADMIN_KEY
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CHATTTS_ADMIN_KEY"}
    if key is not None:
        env["CHATTTS_ADMIN_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "cli", "admin", "--url", web.url, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def submit(web: WebProcess, text: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{web.url}/v1/tts/jobs",
        json.dumps({"text": text}).encode(),
        {"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_state(web: WebProcess, job_id: str, state: str) -> None:
    deadline = time.monotonic() + 30
    while json.loads(web.get(f"/v1/tts/jobs/{job_id}"))["state"] != state:
        assert time.monotonic() < deadline, f"job {job_id} never {state}"
        time.sleep(0.05)


def test_pause_requeue_usage_and_audit_from_the_shell(
    web: WebProcess, start_worker: Callable[..., WorkerProcess]
) -> None:
    status, job = submit(web, "A job that dies first.")
    assert status == 202
    reaper = start_worker("reaper", CHATTTS_MAX_DELIVERIES="0")
    wait_state(web, job["id"], "dead")
    reaper.stop()

    listed = admin(web, "dlq")
    assert listed.returncode == 0, listed.stderr
    assert job["id"] in listed.stdout and "deliveries" in listed.stdout
    paused = admin(web, "queue", "pause", "--reason", "disk swap", "--retry-after", "30")
    assert paused.returncode == 0 and "paused" in paused.stdout, paused.stderr
    refused, body = submit(web, "Not now.")
    assert refused == 503 and body["error"]["code"] == "paused"
    queues = admin(web, "--json", "queues")
    view = json.loads(queues.stdout)
    assert view["paused"]["reason"] == "disk swap" and view["counts"]["dead_letters"] == 1
    assert "PAUSED" in admin(web, "queues").stdout
    assert admin(web, "queue", "resume").stdout.strip() == "intake resumed"

    start_worker("healthy")
    requeued = admin(web, "dlq", "requeue", job["id"])
    assert requeued.returncode == 0 and "1 requeued" in requeued.stdout, requeued.stderr
    again = admin(web, "dlq", "requeue", job["id"])  # not dead any more: a script notices
    assert again.returncode == 4 and "job_not_dead" in again.stdout
    wait_state(web, job["id"], "succeeded")
    workers = admin(web, "workers")
    assert "healthy" in workers.stdout and "espeak" in workers.stdout
    found = json.loads(admin(web, "--json", "jobs", "--text", "dies first").stdout)
    assert [j["id"] for j in found["jobs"]] == [job["id"]]
    # One job's record reads like the rest: its fields, its runs and its events, in tables.
    record = admin(web, "job", job["id"]).stdout
    assert record.startswith(f"job {job['id']}") and "A job that dies first." in record
    assert "runs:" in record and "reaper" in record and "healthy" in record
    assert "events:" in record and "dead" in record and "succeeded" in record
    assert '"' not in record.splitlines()[1]  # a table, not the raw record's JSON
    since = admin(web, "jobs", "--since", time.strftime("%Y-%m-%d"), "--text", "dies first")
    assert since.returncode == 0 and job["id"] in since.stdout, since.stderr
    usage = admin(web, "usage", "--csv")
    rows = list(csv.DictReader(io.StringIO(usage.stdout)))
    assert [int(r["jobs"]) for r in rows] == [2]  # ended twice: dead, then succeeded
    audit = admin(web, "audit").stdout
    for action in ("queue.pause", "queue.resume", "dlq.requeue"):
        assert action in audit
    assert "admin …y-77" in audit


def test_the_refusals_and_their_exit_codes(web: WebProcess) -> None:
    no_key = admin(web, "queues", key=None)
    assert no_key.returncode == 2 and "CHATTTS_ADMIN_KEY" in no_key.stderr
    # A key read from standard input (or a file), never a command line everyone can list.
    piped = subprocess.run(
        [sys.executable, "-m", "cli", "admin", "--url", web.url, "--admin-key-file", "-", "queues"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "CHATTTS_ADMIN_KEY"},
        input=f"{ADMIN_KEY}\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    flag = admin(web, "--admin-key", ADMIN_KEY, "queues", key=None)
    assert flag.returncode == 2  # no such flag: it would show in the process list
    wrong = admin(web, "queues", key="guess")
    assert wrong.returncode == 4 and "not one of CHATTTS_ADMIN_KEYS" in wrong.stderr
    missing = admin(web, "worker", "drain", "nobody")
    assert missing.returncode == 4 and "no live worker" in missing.stderr
    both = admin(web, "dlq", "purge")
    assert both.returncode == 2
    gone = subprocess.run(
        [sys.executable, "-m", "cli", "admin", "--url", "http://127.0.0.1:9", "queues"],
        cwd=ROOT,
        env={**os.environ, "CHATTTS_ADMIN_KEY": ADMIN_KEY},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gone.returncode == 3 and "cannot reach" in gone.stderr


def test_a_reader_that_goes_away_first_is_no_traceback(web: WebProcess) -> None:
    """`admin jobs | head -1`: the rest of the listing has nowhere to go, and is dropped."""
    for n in range(3):
        assert submit(web, f"Job number {n}.")[0] == 202
    env = {**os.environ, "CHATTTS_ADMIN_KEY": ADMIN_KEY}
    listing = subprocess.Popen(
        [sys.executable, "-m", "cli", "admin", "--url", web.url, "jobs"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert listing.stdout is not None and listing.stderr is not None
    listing.stdout.close()  # the reader is gone before the first line
    assert listing.wait(60) == 141
    assert b"Traceback" not in listing.stderr.read()
