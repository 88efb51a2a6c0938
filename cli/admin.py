"""`chattts-online admin`: the operators' console from a shell, over its HTTP API (/admin/v1/...).

Reads print a table (or the API's JSON with `--json`); actions print what they did. The admin
key comes from CHATTTS_ADMIN_KEY or --admin-key-file (a file, or - for standard input: never a
command line, which every user of the machine can read); the audit stream records it (by its last
characters) with the login name. Exit codes as the other client commands: 0 done, 2 usage,
3 server unreachable or unavailable, 4 refused.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from cli.errors import OK, REJECTED, UNAVAILABLE, USAGE, CliError, exit_code
from cli.running import service_url

TIMEOUT_S = 15.0
# A listing's column: the field it shows, or the function that makes its cell of an item.
Column = str | Callable[[dict[str, Any]], Any]


def add_parser(sub: Any, default_url: str) -> None:
    admin = sub.add_parser(
        "admin",
        help="the operators' console: queues, jobs, dead letters, workers, usage",
        epilog="exit codes: 0 done, 2 usage, 3 server unreachable or unavailable, 4 refused",
    )
    admin.add_argument(
        "--url",
        help=f"the service (env CHATTTS_URL; else the one `run` started, else {default_url})",
    )
    admin.add_argument(
        "--admin-key-file",
        metavar="FILE",
        help="a file holding one of CHATTTS_ADMIN_KEYS (- reads it from standard input); or set "
        "CHATTTS_ADMIN_KEY",
    )
    admin.add_argument("--json", action="store_true", help="print the API's JSON")
    what = admin.add_subparsers(dest="what", required=True)
    what.add_parser("queues", help="the queue at a glance: counts, lanes, throughput, pause")
    queue = what.add_parser("queue", help="pause or resume the queue's intake")
    queue.add_argument("action", choices=("pause", "resume"))
    queue.add_argument("--reason", default="", help="pause: shown to refused clients")
    queue.add_argument("--retry-after", type=int, default=60, help="pause: Retry-After seconds")
    jobs = what.add_parser("jobs", help="search jobs, newest first")
    jobs.add_argument("--state", help="comma-separated states")
    jobs.add_argument("--client", help="a client id, or the address or key it is fair to")
    jobs.add_argument("--voice")
    jobs.add_argument("--text", help="a fragment of the text, any case")
    when = "a date or time (2026-12-06, 2026-12-06T14:30; local unless zoned) or Unix seconds"
    jobs.add_argument("--since", type=moment, help=when)
    jobs.add_argument("--until", type=moment, help=when)
    jobs.add_argument("--limit", type=int, default=50)
    job = what.add_parser("job", help="one job's whole record")
    job.add_argument("id")
    dlq = what.add_parser("dlq", help="dead letters: list, requeue, purge")
    dlq.add_argument("action", nargs="?", choices=("list", "requeue", "purge"), default="list")
    dlq.add_argument("ids", nargs="*", help="job ids (requeue, purge)")
    dlq.add_argument("--all", action="store_true", help="requeue or purge every dead letter")
    what.add_parser("workers", help="every live worker")
    worker = what.add_parser("worker", help="drain a worker: it finishes what it holds and exits")
    worker.add_argument("action", choices=("drain",))
    worker.add_argument("name")
    usage = what.add_parser("usage", help="jobs, characters and audio per day and client")
    usage.add_argument("--days", type=int, default=7)
    usage.add_argument("--csv", action="store_true", help="print CSV")
    audit = what.add_parser("audit", help="the operators' latest actions")
    audit.add_argument("--limit", type=int, default=50)


class Console:
    """The console's API at `url`, as operator `key`."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url.rstrip("/"), key

    def call(self, method: str, path: str, body: Any = None, raw: bool = False) -> Any:
        headers = {"Authorization": f"Bearer {self.key}", "X-Operator": _login()}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            message, code = _error_of(exc)
            raise CliError(message, exit_code(exc.code, code)) from None
        except OSError as exc:
            raise CliError(f"cannot reach {self.url}: {exc}", UNAVAILABLE) from None
        return text if raw else json.loads(text)


def _login() -> str:
    try:
        return getpass.getuser()[:64]
    except (KeyError, OSError):
        return ""


def _error_of(exc: urllib.error.HTTPError) -> tuple[str, str | None]:
    """An error answer's message and code."""
    try:
        error = json.loads(exc.read())["error"]
        return str(error["message"]), error.get("code")
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"HTTP {exc.code}", None


def moment(value: str) -> float:
    """--since/--until: Unix seconds, or an ISO 8601 date or date and time (local time unless
    it names its zone), as the tables print them."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a date or time: write 2026-12-06, 2026-12-06T14:30 or Unix seconds"
        ) from None


def _when(seconds: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(seconds))) if seconds else ""


def _job_record(record: dict[str, Any]) -> str:
    """A job's record as the other subcommands print theirs: its fields, then tables of its
    runs and events (--json: all of it as the API answers it)."""
    job = record["job"]
    request = job.get("request") or {}
    text = str(request.get("text", ""))
    fields = [
        ["state", job.get("state")],
        ["client", job.get("client")],
        ["voice, format", f"{request.get('voice')}, {request.get('format')}"],
        ["submitted", _when(job.get("created_at"))],
        ["started", _when(job.get("started_at"))],
        ["finished", _when(job.get("finished_at"))],
        ["attempts", job.get("attempts")],
        ["error", job.get("error")],
        ["text", text[:120] + ("…" if len(text) > 120 else "")],
        ["audio", record["links"].get("audio_url")],
    ]
    out = [f"job {job.get('id')}", _table([f for f in fields if f[1] not in (None, "")], ["", ""])]
    runs = [
        [r.get("worker"), _when(r.get("at")), "found past its deliveries" if r.get("dead") else ""]
        for r in record.get("runs") or []
    ]
    if runs:
        out += ["", "runs:", _table(runs, ["worker", "started", ""])]
    events = [
        [_when(e.get("ts")), e.get("type"), e.get("error") or e.get("reason") or ""]
        for e in record.get("events") or []
    ]
    if events:
        out += ["", "events:", _table(events, ["when", "event", "detail"])]
    if record.get("callback"):
        callback = record["callback"]
        out += ["", f"callback: {callback.get('state')} after {callback.get('attempts')} tries"]
    if record.get("dead_letter"):
        out += ["", f"dead letter: {record['dead_letter'].get('reason')}"]
    return "\n".join(out)


def _table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header, *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _listing(items: list[dict[str, Any]], columns: dict[str, Column]) -> str:
    """A table of `items`, one column per header: the item's field of that name, or what the
    function makes of the item."""
    rows = [[c(i) if callable(c) else i.get(c) for c in columns.values()] for i in items]
    return _table(rows, list(columns))


def _show(args: argparse.Namespace, console: Console) -> tuple[Any, str]:
    """The API's answer to this command, and how a person reads it."""
    what = args.what
    if what == "queues":
        view = console.call("GET", "/admin/v1/queue")
        c, rate = view["counts"], view["throughput"]["1m"]
        paused = view["paused"]
        lines = [
            f"queue {view['queue']}: "
            + (
                f"PAUSED by {paused['by']} ({paused['reason'] or 'no reason given'})"
                if paused
                else "accepting"
            ),
            f"queued {c['queued']}, running {c['running']}, dead letters {c['dead_letters']}, "
            f"workers {view['workers_alive']}",
            f"succeeded {c['succeeded']}, failed {c['failed']}, cancelled {c['cancelled']}, "
            f"dead {c['dead']}",
            f"last minute: {rate['jobs_per_s']} jobs/s, {rate['audio_s_per_s']} s of audio/s",
            _table(
                [[n, v["jobs"], v["clients"], v["oldest_age_s"]] for n, v in view["lanes"].items()],
                ["lane", "jobs", "clients", "oldest (s)"],
            ),
        ]
        return view, "\n".join(lines)
    if what == "queue":
        if args.action == "pause":
            body = {"reason": args.reason, "retry_after_s": args.retry_after}
            answer = console.call("POST", "/admin/v1/queue/pause", body)
            return answer, f"intake paused: submissions get 503 with Retry-After {args.retry_after}"
        answer = console.call("POST", "/admin/v1/queue/resume", {})
        return answer, "intake resumed" if answer["was_paused"] else "intake was not paused"
    if what == "jobs":
        query = {
            k: getattr(args, k)
            for k in ("state", "client", "voice", "text", "since", "until", "limit")
        }
        path = "/admin/v1/jobs?" + urllib.parse.urlencode(
            {k: v for k, v in query.items() if v is not None}
        )
        answer = console.call("GET", path)
        columns: dict[str, Column] = {"id": "id", "state": "state", "client": "client"}
        columns |= {"voice": "voice", "submitted": lambda j: _when(j.get("created_at"))}
        columns |= {"attempts": "attempts", "error": "error"}
        return answer, _listing(answer["jobs"], columns)
    if what == "job":
        answer = console.call("GET", f"/admin/v1/jobs/{urllib.parse.quote(args.id)}")
        return answer, _job_record(answer)
    if what == "dlq":
        return _dlq(args, console)
    if what == "workers":
        answer = console.call("GET", "/admin/v1/workers")
        columns = {k: k for k in ("name", "host", "engine", "device", "state")}
        columns |= {"in hand": "in_hand", "steps/s": "steps_per_s"}
        columns["streams"] = lambda w: f"{w['streams']['playing']}/{w['streams']['capacity']}"
        return answer, _listing(answer["workers"], columns)
    if what == "worker":
        answer = console.call(
            "POST", f"/admin/v1/workers/{urllib.parse.quote(args.name, safe='')}/drain", {}
        )
        return answer, f"worker {args.name} drains within {answer['within_s']} s, then exits"
    if what == "usage":
        if args.csv:
            text = console.call("GET", f"/admin/v1/usage?days={args.days}&format=csv", raw=True)
            return None, text.rstrip("\n")
        answer = console.call("GET", f"/admin/v1/usage?days={args.days}")
        columns = {"day": "day", "client": "client", "who": "label", "jobs": "jobs"}
        columns |= {"succeeded": "succeeded", "characters": "characters"}
        columns |= {"audio (s)": "audio_seconds"}
        return answer, _listing(answer["usage"], columns)
    answer = console.call("GET", f"/admin/v1/audit?limit={args.limit}")
    rows = [
        [_when(a["ts"]), a["by"], a["action"], a["target"], a.get("detail", "")]
        for a in answer["audit"]
    ]
    return answer, _table(rows, ["when", "who", "what", "target", "detail"])


def _dlq(args: argparse.Namespace, console: Console) -> tuple[Any, str]:
    if args.action == "list":
        answer = console.call("GET", "/admin/v1/dlq?limit=100")
        columns: dict[str, Column] = {"id": "id", "reason": "reason", "last worker": "last_worker"}
        columns["dead at"] = lambda d: _when(d["dead_at"])
        columns["requeueable"] = lambda d: "yes" if d["requeueable"] else "no"
        return answer, _listing(answer["dead_letters"], columns)
    if bool(args.ids) == args.all:
        raise CliError(f"dlq {args.action}: give job ids, or --all", USAGE)
    body = {"all": True} if args.all else {"ids": args.ids}
    if args.action == "purge":
        answer = console.call("POST", "/admin/v1/dlq/purge", body)
        return answer, f"{answer['removed']} dead letters removed"
    answer = console.call("POST", "/admin/v1/dlq/requeue", body)
    lines = [
        f"{r['id']}: "
        + (
            "requeued"
            if r["requeued"]
            else f"not requeued ({r['error']}" + (f", {r['state']}" if "state" in r else "") + ")"
        )
        for r in answer["results"]
    ]
    return answer, "\n".join([*lines, f"{answer['requeued']} requeued"])


def _admin_key(args: argparse.Namespace) -> str:
    """The key in the file --admin-key-file names (-: standard input), else CHATTTS_ADMIN_KEY."""
    try:
        if args.admin_key_file == "-":
            key = sys.stdin.readline().strip()
        elif args.admin_key_file:
            key = Path(args.admin_key_file).read_text().strip()
        else:
            key = os.environ.get("CHATTTS_ADMIN_KEY", "")
    except OSError as exc:
        raise CliError(f"cannot read the key: {exc}", USAGE) from None
    if not key:
        raise CliError("set CHATTTS_ADMIN_KEY or give --admin-key-file", USAGE)
    return key


def run(args: argparse.Namespace) -> int:
    try:
        answer, text = _show(args, Console(service_url(args.url, "admin"), _admin_key(args)))
    except CliError as exc:
        print(f"chattts-online admin: {exc}", file=sys.stderr)
        return exc.code
    if args.json and answer is not None:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
    else:
        print(text)
    if (
        args.what == "dlq"
        and args.action == "requeue"
        and answer["requeued"] < len(answer["results"])
    ):
        return REJECTED  # some were not dead (or gone): a script should notice
    return OK
