"""HTTP load generators for bench/submit.py, always in processes of their own: `wrk` (with a Lua
script for the POST and a JSON summary) when it is installed, else asyncio aiohttp client
processes (`python -m bench.lib.loadgen`), each holding its share of keep-alive connections.

Any answer other than 2xx and any transport error fails the run (BenchError): a refused or
broken request is never counted as a request served. Only for the baseline (`strict=False`) are
non-2xx answers tolerated: counted as failed (`Load.failed`), never as served; its API as it
ships answers 503 once more than 100 requests wait on Redis (redis-py's default pool, which fails
rather than waits), and that is a figure of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.lib.cli import REPO_ROOT
from bench.lib.stats import BenchError, percentile

_WRK_LUA = """
wrk.method = "POST"
wrk.body = %(body)s
%(headers)s
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %%d, "duration_us": %%d, "connect": %%d, "read": %%d, "write": %%d, ' ..
    '"status": %%d, "timeout": %%d, "p50_us": %%d, "p99_us": %%d, "max_us": %%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""
_AIO_PROCESSES = 2
REQUEST_TIMEOUT_S = 10


@dataclass(frozen=True)
class Load:
    """One measurement: requests answered 2xx, over how long, latency percentiles."""

    tool: str
    connections: int
    requests: int  # answered 2xx
    duration_s: float
    p50_ms: float  # over every answer (with strict=False, failed ones too)
    p99_ms: float
    max_ms: float
    failed: int = 0  # non-2xx answers (strict=False only)

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def failed_pct(self) -> float:
        answered = self.requests + self.failed
        return 100 * self.failed / answered if answered else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "rps": self.rps, "failed_pct": self.failed_pct}


def wrk_path() -> str | None:
    return shutil.which("wrk")


def _lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def run(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    connections: int,
    duration_s: float,
    tool: str = "auto",
    strict: bool = True,
) -> Load:
    """POST `body` to `url` over `connections` keep-alive connections for `duration_s`."""
    if tool == "auto":
        tool = "wrk" if wrk_path() else "aiohttp"
    if tool == "wrk":
        return _run_wrk(url, body, headers, connections, duration_s, strict)
    return _run_aio(url, body, headers, connections, duration_s, strict)


def _run_wrk(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    connections: int,
    duration_s: float,
    strict: bool,
) -> Load:
    wrk = wrk_path()
    if wrk is None:
        raise BenchError("wrk is not installed (apt-get install wrk), or use --tool aiohttp")
    header_lines = "\n".join(
        f"wrk.headers[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in headers.items()
    )
    script = _WRK_LUA % {"body": _lua_string(body.decode()), "headers": header_lines}
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        threads = max(1, min(2, connections))
        seconds = max(1, round(duration_s))  # wrk takes whole seconds
        command = [wrk, f"-t{threads}", f"-c{connections}", f"-d{seconds}s"]
        command += [f"--timeout={REQUEST_TIMEOUT_S}s", "-s", f.name, url]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=duration_s + 60, check=False
        )
    finally:
        Path(f.name).unlink(missing_ok=True)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise BenchError(f"wrk failed ({done.returncode}): {done.stdout}{done.stderr}")
    out = json.loads(line.removeprefix("WRKJSON "))
    kinds = ("connect", "read", "write", "timeout") + (("status",) if strict else ())
    errors = {k: out[k] for k in kinds if out[k]}
    if errors:
        raise BenchError(f"{url}: failed requests under load (wrk: {errors}):\n{done.stdout}")
    failed = 0 if strict else out["status"]
    if out["requests"] - failed <= 0:
        raise BenchError(f"{url}: no request answered 2xx in {duration_s} s")
    return Load(
        "wrk",
        connections,
        out["requests"] - failed,
        out["duration_us"] / 1e6,
        out["p50_us"] / 1000,
        out["p99_us"] / 1000,
        out["max_us"] / 1000,
        failed,
    )


def _run_aio(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    connections: int,
    duration_s: float,
    strict: bool,
) -> Load:
    n = min(_AIO_PROCESSES, connections)
    shares = [connections // n + (1 if i < connections % n else 0) for i in range(n)]
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.lib.loadgen", url, str(share), str(duration_s)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for share in shares
    ]
    spec = json.dumps({"body": body.decode(), "headers": dict(headers), "strict": strict})
    spec_bytes = spec.encode()
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for child in children:
        out, err = child.communicate(spec_bytes, timeout=duration_s + 60)
        if child.returncode != 0:
            failures.append(err.decode(errors="replace")[-2000:])
        else:
            results.append(json.loads(out))
    if failures:
        raise BenchError(f"{url}: failed requests under load:\n" + "\n".join(failures))
    latencies = [x for r in results for x in r["latencies_ms"]]
    failed = sum(r["failed"] for r in results)
    if len(latencies) - failed <= 0:
        raise BenchError(f"{url}: no request answered 2xx in {duration_s} s")
    wall = max(r["duration_s"] for r in results)
    return Load(
        "aiohttp",
        connections,
        len(latencies) - failed,
        wall,
        percentile(latencies, 50),
        percentile(latencies, 99),
        max(latencies),
        failed,
    )


async def _client(url: str, connections: int, duration_s: float, spec: dict[str, Any]) -> int:
    import aiohttp

    body = spec["body"].encode()
    headers = spec["headers"]
    strict = spec["strict"]
    latencies: list[float] = []
    errors: list[str] = []
    failed = 0
    connector = aiohttp.TCPConnector(limit=connections)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        started = time.perf_counter()
        end = started + duration_s

        async def user() -> None:
            nonlocal failed
            while time.perf_counter() < end and not errors:
                t0 = time.perf_counter()
                try:
                    async with http.post(url, data=body, headers=headers) as resp:
                        await resp.read()
                        if not 200 <= resp.status < 300:
                            failed += 1
                            if strict:
                                errors.append(f"HTTP {resp.status}: {(await resp.text())[:300]}")
                                return
                except (aiohttp.ClientError, TimeoutError) as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    return
                latencies.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(user() for _ in range(connections)))
        wall = time.perf_counter() - started
    if errors:
        print(f"{len(errors)} failed requests, first: {errors[0]}", file=sys.stderr)
        return 1
    print(json.dumps({"latencies_ms": latencies, "duration_s": wall, "failed": failed}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Child mode: `python -m bench.lib.loadgen URL CONNECTIONS SECONDS`, the body and headers as
    JSON on stdin; prints `{"latencies_ms": [...], "duration_s": s}`; exit 1 on any failure."""
    p = argparse.ArgumentParser(prog="python -m bench.lib.loadgen")
    p.add_argument("url")
    p.add_argument("connections", type=int)
    p.add_argument("duration", type=float)
    args = p.parse_args(argv)
    spec = json.loads(sys.stdin.read())
    return asyncio.run(_client(args.url, args.connections, args.duration, spec))


if __name__ == "__main__":
    sys.exit(main())
