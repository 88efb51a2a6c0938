"""The `chattts-online` command: run (everything on one machine), web, worker, check; and the
client commands say (short text), submit (any length) and admin (the operators' console), which
talk to a running service."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from cli import admin, client, live
from cli.client import MAX_CHARS, SAY_FORMATS
from cli.errors import SIGPIPE_EXIT
from cli.running import DEFAULT_URL, AmbiguousService
from core.audio.catalog import FORMATS
from core.infra import logs
from core.infra.settings import Settings
from workers.engines import ENGINES


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis-url", help="Redis URL (env CHATTTS_REDIS_URL or REDIS_URL)")
    parser.add_argument("--queue", help="queue name (env CHATTTS_QUEUE, default main)")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (env CHATTTS_LOG_LEVEL)")


def _web_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (env CHATTTS_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (env CHATTTS_PORT)")


def _worker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=["auto", *ENGINES],
        help="synthesis engine (env CHATTTS_ENGINE, default auto; the variable may also name an "
        "engine's module)",
    )
    parser.add_argument("--device", help="auto, cpu, cuda or cuda:N (env CHATTTS_DEVICE)")
    parser.add_argument("--model-dir", help="ChatTTS weights (env CHATTTS_MODEL_DIR)")
    parser.add_argument("--max-batch", type=int, help="segments per batch (CHATTTS_MAX_BATCH)")
    parser.add_argument("--worker-name", help="consumer name (env CHATTTS_WORKER_NAME)")


def _client_options(
    parser: argparse.ArgumentParser, what: str, formats: Sequence[str] = tuple(FORMATS)
) -> None:
    parser.add_argument(
        "-o", "--output", help=f"{what}; '-' for stdout; its extension names the format"
    )
    parser.add_argument("--voice", help="a voice of GET /v1/voices, or an OpenAI voice name")
    parser.add_argument(
        "--format",
        choices=sorted(formats),
        help="audio format (default: from --output's extension, else mp3)",
    )
    parser.add_argument("--speed", type=float, help="speaking rate, 0.5 to 2.0 (default 1.0)")
    parser.add_argument(
        "--url",
        help=f"the service (env CHATTTS_URL; else the one `run` started, else {DEFAULT_URL})",
    )
    parser.add_argument("--api-key", help="sent as 'Authorization: Bearer' (env CHATTTS_API_KEY)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chattts-online",
        description="ChatTTS Online: text-to-speech over a durable Redis queue.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="everything on one machine: embedded Redis, web, worker")
    _common(run)
    _web_options(run)
    _worker_options(run)
    run.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    run.add_argument("--data-dir", help="embedded Redis data (env CHATTTS_DATA_DIR, ./data)")
    web = sub.add_parser("web", help="the web tier alone (needs a Redis URL)")
    _common(web)
    _web_options(web)
    worker = sub.add_parser("worker", help="one worker process (needs a Redis URL)")
    _common(worker)
    _worker_options(worker)
    check = sub.add_parser("check", help="check the configuration, Redis and the engine")
    _common(check)
    check.add_argument(
        "--data-dir",
        help="the data directory of the `run` to check (env CHATTTS_DATA_DIR; default ./data, "
        "else the one the running `run` announced)",
    )
    _worker_options(check)
    probe = check.add_mutually_exclusive_group()
    probe.add_argument(
        "--live",
        action="store_true",
        help="liveness probe of a worker: exit 1 unless this worker's heartbeat is fresh "
        "(the worker named by --worker-name / CHATTTS_WORKER_NAME, else any on this host)",
    )
    probe.add_argument(
        "--ready",
        action="store_true",
        help="readiness probe: exit 1 unless Redis answers",
    )
    say = sub.add_parser(
        "say",
        help="speak a short text into an audio file (client)",
        epilog="exit codes: 0 done, 1 job failed, 2 usage, 3 server unreachable "
        "or unavailable, 4 request rejected",
    )
    say.add_argument("text", nargs="?", help="the text (default: read from stdin)")
    _client_options(
        say, "output file (default: stdout when piped, else speech.<format>)", SAY_FORMATS
    )
    say.add_argument(
        "--live",
        action="store_true",
        help="speak stdin as it is written (a live session, GET /v1/live): audio from the first "
        "sentence on, raw PCM to a pipe (s16le, 24 kHz, mono) or a WAV; each sentence's text "
        "on stderr as it is spoken",
    )
    submit = sub.add_parser(
        "submit",
        help="speak a long text (a book) as one job, with progress and the time left",
        epilog="exit codes: 0 done, 1 job failed, 2 usage, 3 server "
        "unreachable or unavailable, 4 request rejected",
    )
    submit.add_argument("-f", "--file", help="text file, UTF-8 (default: stdin)")
    _client_options(submit, "output file (default: next to --file, with the format's extension)")
    submit.add_argument(
        "--max-chars",
        type=int,
        default=MAX_CHARS,
        help=f"characters per job: a text up to this is one job (the server's "
        f"CHATTTS_MAX_DOCUMENT_CHARS, {MAX_CHARS})",
    )
    submit.add_argument(
        "--subtitles",
        choices=("srt", "vtt"),
        help="also write subtitles timed on the audio beside it (book.srt beside book.mp3)",
    )
    model_cmd = sub.add_parser(
        "models",
        help="ChatTTS weights: pull (fetch and verify), verify (without loading), info",
    )
    model_cmd.add_argument("action", choices=("pull", "verify", "info"))
    model_cmd.add_argument(
        "--model-dir",
        help="where the weights go or are (env CHATTTS_MODEL_DIR; default: the Hugging Face cache)",
    )
    model_cmd.add_argument("--revision", default="main", help="the repository's revision")
    model_cmd.add_argument(
        "--checksums",
        type=Path,
        help="pull: a custom checkpoint's manifest (chattts-online.json) that you trust; "
        "without it the files must match ChatTTS's published checksums (a download never "
        "supplies its own)",
    )
    model_cmd.add_argument(
        "--source",
        choices=("huggingface", "modelscope"),
        default="huggingface",
        help="where from (huggingface honours HF_ENDPOINT mirrors and HF_HUB_OFFLINE)",
    )
    model_cmd.add_argument("--log-level", help="log level (env CHATTTS_LOG_LEVEL)")
    admin.add_parser(sub, DEFAULT_URL)
    sub.add_parser(
        "bench",
        help="the benchmark suite, ours against the baseline (python -m bench.suite; a checkout)",
        add_help=False,  # every option goes to the suite: `chattts-online bench --help`
    )
    return parser


def bench(argv: Sequence[str]) -> int:
    """`chattts-online bench ...`: python -m bench.suite ... in the repository's checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / "bench" / "suite.py").is_file():
        print("chattts-online bench: needs a checkout of the repository (bench/)", file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, "-m", "bench.suite", *argv], cwd=root).returncode


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Settings:
    """The settings of a command: `env` (default: this process's environment), then its flags."""
    names = (
        "redis_url",
        "queue",
        "log_level",
        "host",
        "port",
        "engine",
        "device",
        "model_dir",
        "max_batch",
        "worker_name",
        "data_dir",
    )
    return Settings.from_env(env, **{n: getattr(args, n, None) for n in names})


def _client(args: argparse.Namespace) -> int:
    """`say`, `submit` and `admin`: the service's own commands. Their output's reader may go
    away first (`admin jobs | head`): the rest is dropped, as a shell's own commands do."""
    try:
        if args.command == "admin":
            code = admin.run(args)
        elif getattr(args, "live", False):
            code = live.run(args, *client.connection(args))
        else:
            code = client.run(args.command, args)
        sys.stdout.flush()  # here, where a reader gone away can still be told apart
        return code
    except AmbiguousService as exc:
        print(f"chattts-online {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # What is left has nowhere to go; stdout pointed at nothing, so that the interpreter's
        # last flush does not fail again (Python's advice in its `signal` documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["bench"]:
        return bench(given[1:])
    args = build_parser().parse_args(argv)
    if args.command in ("say", "submit", "admin"):  # clients: no server settings involved
        return _client(args)
    try:
        settings = settings_from_args(args)
        logs.configure(settings.log_level, settings.log_format)
    except ValueError as exc:
        print(f"chattts-online: {exc}", file=sys.stderr)
        return 2
    if args.command == "worker":
        from workers.process import main as worker_main

        return worker_main(settings)
    if args.command == "web":
        from web.app import main as web_main

        return web_main(settings)
    if args.command == "run":
        from cli.supervisor import main as run_main

        return run_main(settings, workers=args.workers)
    if args.command == "models":
        from cli import models as model_commands

        if args.action == "pull":
            return model_commands.pull(settings, args.revision, args.source, args.checksums)
        return (model_commands.verify if args.action == "verify" else model_commands.info)(settings)
    if args.command == "check":
        from cli.check import main as check_main

        named = args.worker_name is not None
        return check_main(settings, live=args.live, ready=args.ready, named=named)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
