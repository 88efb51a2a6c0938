"""Process lifecycle: shutdown closes open streams, `chattts-online web` and `check` as commands."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestServer

from cli.check import main as check_main
from cli.check import mask_url
from core.infra.embedded_redis import free_port
from core.infra.settings import Settings
from web.app import create_app

ROOT = Path(__file__).resolve().parents[2]


async def test_shutdown_closes_sse_and_websockets(settings: Settings) -> None:
    server = TestServer(create_app(settings))
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        stream = await session.get(server.make_url("/v1/events"))
        assert stream.status == 200
        ws = await session.ws_connect(server.make_url("/v1/ws"))
        receiving = asyncio.create_task(ws.receive())  # a client reads its socket all along
        await asyncio.sleep(0.1)
        start = time.monotonic()
        await server.close()
        assert time.monotonic() - start < 3.0
        async with asyncio.timeout(3):
            assert await stream.content.read() is not None  # the stream ends (EOF)
            message = await receiving
        assert message.type in (WSMsgType.CLOSE, WSMsgType.CLOSED)
        assert ws.close_code == 1001  # going away: reconnect and resubscribe


def test_web_command_serves_and_stops_on_sigterm(settings: Settings) -> None:
    port = free_port()
    env = {**os.environ, **settings.to_env(), "CHATTTS_PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "web"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline
                time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_check_command(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main(settings.replace(api_keys="secret-one")) == 0
    out = capsys.readouterr().out
    assert "redis: ok" in out and "workers: 0 alive" in out
    assert "secret-one" not in out and "*** (1 keys)" in out
    down = settings.replace(redis_url=f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    assert check_main(down) == 1
    out = capsys.readouterr().out
    assert "UNREACHABLE" in out and "hunter2" not in out
    assert mask_url("redis://user:pw@host:6379/0") == "redis://user:***@host:6379/0"
