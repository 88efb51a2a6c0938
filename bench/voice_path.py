"""Where a job's `voice` goes from `POST /v1/tts/jobs` to the engine: every function of the product
(web, core, workers) called with the voice in its arguments (the name itself, or an object, a
request or a dict that carries it), in the order first called, in the web process and in the
worker. Prints the stops, the modules and the returns (a stop in a module the path had left).

    python bench/voice_path.py [--repo PATH] [--json PATH]

`--repo` traces the checkout at PATH (another commit's, for a before and after). Run as a file,
not a module: the checkout to trace is put first on the path before anything of it is imported.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

VOICE = "en_male_2"  # a voice no default picks: every stop that names it is the job's
PACKAGES = ("web", "core", "workers")
ADAPTERS = ("workers.engines.batching", "workers.engines.base")
# The tracer, as the worker runs it: `cli worker` with every call that carries the voice noted.
WORKER = """
import atexit, json, sys
sys.path[:0] = [{repo!r}, {here!r}]
sys.argv = ["cli", "worker"]
from voice_path import Tracer
tracer = Tracer()
tracer.start()
def dump():
    tracer.stop()
    open({out!r}, "w").write(json.dumps(tracer.stops))
atexit.register(dump)  # the worker stops on SIGTERM by its own handler, then exits
from cli.main import main
main()
"""


def carries(value: Any) -> bool:
    """Whether `value` is the voice, or holds it (its own fields only: no property is run)."""
    if isinstance(value, str):
        return value == VOICE
    if isinstance(value, dict):
        return value.get("voice") == VOICE
    fields = getattr(value, "__dict__", None)
    if not isinstance(fields, dict):
        return False
    if fields.get("voice") == VOICE:
        return True
    request = fields.get("request")
    inner = getattr(request, "__dict__", None)
    return isinstance(inner, dict) and inner.get("voice") == VOICE


class Tracer:
    """Each product function first called with the voice in its arguments, in order."""

    def __init__(self) -> None:
        self.stops: list[str] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] not in PACKAGES:
            return
        code = frame.f_code
        arguments = list(frame.f_locals.values())[: code.co_argcount + code.co_kwonlyargcount]
        if not any(carries(value) for value in arguments):
            return
        stop = f"{module}:{code.co_qualname}"
        if "<lambda>" in stop or "__create_fn__" in stop:
            return  # a dataclass's generated __init__, a key function: no stop of the path
        with self._lock:
            if stop not in self._seen:
                self._seen.add(stop)
                self.stops.append(stop)

    def start(self) -> None:
        threading.setprofile(self)
        sys.setprofile(self)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


def to_the_engine(web: list[str], worker: list[str]) -> list[str]:
    """The path itself: the web process's stops until its job is queued (the last stop in the
    queue's scripts: what the answer is built with after that is another branch), then the
    worker's until the last stop in the engine's own module (its batching and base adapters are
    on the way)."""
    scripts = [i for i, stop in enumerate(web) if stop.startswith("core.queue.scripts")]
    engine = [
        i
        for i, stop in enumerate(worker)
        if stop.startswith("workers.engines.") and not stop.startswith(ADAPTERS)
    ]
    return [
        *web[: scripts[-1] + 1 if scripts else len(web)],
        *worker[: engine[-1] + 1 if engine else len(worker)],
    ]


def summary(stops: list[str]) -> dict[str, Any]:
    """Stops, modules, and returns: stops in a module the path had been in and left."""
    modules: list[str] = []
    returns = 0
    for stop in stops:
        module = stop.split(":")[0]
        if modules and module != modules[-1] and module in modules:
            returns += 1
        if not modules or modules[-1] != module:
            modules.append(module)
    return {"stops": len(stops), "modules": len(set(modules)), "returns": returns, "path": stops}


async def submit_and_wait(url: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        body = {"text": "Follow this voice to the engine.", "voice": VOICE, "format": "wav"}
        async with http.post(f"{url}/v1/tts/jobs", json=body) as response:
            job = await response.json()
            assert response.status == 202, job
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            async with http.get(f"{url}/v1/tts/jobs/{job['id']}") as response:
                if (await response.json())["state"] in ("succeeded", "failed"):
                    return
            await asyncio.sleep(0.1)
        raise TimeoutError("the job did not end")


def trace(repo: Path, tmp: Path) -> dict[str, Any]:
    from aiohttp import web

    from bench.lib.stack import start_redis
    from core.infra.embedded_redis import free_port
    from core.infra.settings import Settings
    from testing.procs import Processes
    from web.app import create_app

    procs = Processes(tmp)
    redis_url = start_redis(procs, tmp)
    settings = Settings.of(redis_url=redis_url, engine="espeak", data_dir=str(tmp / "data"))
    env = {**os.environ, **settings.to_env(), "CHATTTS_WORKER_METRICS_PORT": "0"}
    out = tmp / "worker.json"
    code = WORKER.format(repo=str(repo), here=str(Path(__file__).resolve().parent), out=str(out))
    worker = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=repo)
    web_trace = Tracer()
    port = free_port()

    async def run() -> None:
        runner = web.AppRunner(create_app(settings.replace(port=port)))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):  # a live worker: /readyz
                await asyncio.sleep(0.1)
                import aiohttp

                async with aiohttp.ClientSession() as http, http.get(f"{url}/readyz") as r:
                    if r.status == 200:
                        break
            web_trace.start()
            await submit_and_wait(url)
            web_trace.stop()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(run())
        time.sleep(0.5)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        procs.stop_all()
    return {"web": summary(web_trace.stops), "worker": summary(json.loads(out.read_text()))}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too
    from bench.lib import cli, report

    p = cli.parser("bench.voice_path", __doc__, output="", json_alias=True, checkout=True)
    args = p.parse_args()
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    with tempfile.TemporaryDirectory(prefix="voice-path-") as folder:
        found = trace(repo, Path(folder))
    found["whole"] = summary(to_the_engine(found["web"]["path"], found["worker"]["path"]))
    for side in ("web", "worker"):
        figures = found[side]
        print(f"{side}: {figures['stops']} stops in {figures['modules']} modules, ", end="")
        print(f"{figures['returns']} returns")
    whole = found["whole"]
    print(f"to the engine: {whole['stops']} stops in {whole['modules']} modules, ", end="")
    print(f"{whole['returns']} returns")
    for stop in whole["path"]:
        print("   ", stop)
    if args.output:
        report.write_json(args.output, found)


if __name__ == "__main__":
    main()
