"""Schemathesis drives a live service from its own `/openapi.json`: no 5xx, no answer that
contradicts the document, and nothing the document calls invalid accepted."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import WorkerProcess
from tests.web import webproc
from tests.web.webproc import WebProcess

start_web = webproc.start_web  # a fixture

ADMIN_KEY = "fuzzing-admin-key"  # the console's routes are fuzzed too, as an operator
# Cases per operation, and fixed seeds (CHATTTS_FUZZ_SEEDS, comma-separated, picks others): a
# minute or two of the suite each. Several seeds: what one seed never generates, another does.
MAX_EXAMPLES = 60
SEEDS = os.environ.get("CHATTTS_FUZZ_SEEDS", "20261206,3,5").split(",")
# What is not fuzzed: WebSockets (no HTTP answer to check), streams that never end by themselves
# (a client's events, the console's live view), and the operators' actions that would stop the
# run's own work (a paused queue refuses every submission; a drained worker takes no job).
EXCLUDED = ("ws_GET", "client_events_GET", "admin_live_GET", "admin_pause_POST", "admin_drain_POST")
# Every check but three: a body valid by the document may still be refused for what no schema
# can say (an unknown voice, a text with nothing to speak); DELETE on a job cancels it, and it
# stays readable (not a deleted resource); and wrong keys on purpose (ignored_auth) get the
# address refused, 429, for minutes (web/clients/key_guesses.py), whatever it sends next.
SKIPPED_CHECKS = "positive_data_acceptance,use_after_free,ignored_auth"
# A body past a size limit is refused with 413, besides the statuses Schemathesis expects.
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "409", "413", "415", "422", "429"]
"""


# Schemathesis's own run is given 240 s (a minute on a quiet machine, two on a busy 2-core one).
@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", SEEDS)
def test_the_service_keeps_to_its_document(
    start_web: Callable[..., WebProcess], worker: WorkerProcess, tmp_path: Path, seed: str
) -> None:
    web = start_web(admin_keys=ADMIN_KEY)
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "run",
        f"{web.url}/openapi.json",
        "--checks=all",
        f"--exclude-checks={SKIPPED_CHECKS}",
        f"--max-examples={MAX_EXAMPLES}",
        f"--seed={seed}",
        "--phases=coverage,fuzzing,stateful",
        "--mode=all",
        "--workers=1",
        "--request-timeout=30",
        "--exclude-tag=live",
        *(f"--exclude-operation-id={operation}" for operation in EXCLUDED),
        "--header",
        f"Authorization: Bearer {ADMIN_KEY}",
    ]
    run = subprocess.run(
        command,
        cwd=tmp_path,  # its caches and reports stay in the test's directory
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_COLOR": "1"},
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-30_000:]
    assert web.server_errors() == 0, web.log()
