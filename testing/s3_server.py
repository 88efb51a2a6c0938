"""An S3-compatible server process for the tests and benchmarks (moto's server: the S3 API over
real HTTP, in a process of its own that a test can stop, freeze and start again)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from aiobotocore.session import get_session

# Tests sign with these; the server accepts any pair.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test-key", "AWS_SECRET_ACCESS_KEY": "test-secret"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    def __init__(self, log_path: Path) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, bucket: str, prefix: str = "audio") -> str:
        """The CHATTTS_AUDIO_STORE setting for `bucket` on this server."""
        return f"s3://{bucket}/{prefix}?endpoint={self.endpoint}&region=us-east-1"

    def start(self) -> S3Server:
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except OSError:
                if self._process.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(f"the S3 server did not start: {self._log_path.read_text()[-2000:]}")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10)
        self._process = None

    async def create_bucket(self, bucket: str) -> None:
        async with get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        ) as client:
            await client.create_bucket(Bucket=bucket)
