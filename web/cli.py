"""The `chattts-online` command: run (everything on one machine), web, worker, check."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from workers.settings import Settings


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
        choices=["auto", "espeak", "chattts"],
        help="synthesis engine (env CHATTTS_ENGINE, default auto)",
    )
    parser.add_argument("--device", help="auto, cpu, cuda or cuda:N (env CHATTTS_DEVICE)")
    parser.add_argument("--model-dir", help="ChatTTS weights (env CHATTTS_MODEL_DIR)")
    parser.add_argument("--max-batch", type=int, help="segments per batch (CHATTTS_MAX_BATCH)")
    parser.add_argument("--worker-name", help="consumer name (env CHATTTS_WORKER_NAME)")


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
    _worker_options(check)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
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
    return Settings.from_env(**{n: getattr(args, n, None) for n in names})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"chattts-online: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )
    if args.command == "worker":
        from workers.worker import main as worker_main

        return worker_main(settings)
    if args.command == "web":
        from .app import main as web_main

        return web_main(settings)
    if args.command == "run":
        from .supervisor import main as run_main

        return run_main(settings, workers=args.workers)
    if args.command == "check":
        from .check import main as check_main

        return check_main(settings)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
