"""A local HTTP server speaking the parts of the Hugging Face Hub protocol that `huggingface_hub`
uses to download a model snapshot, serving a checkpoint directory as `2Noise/ChatTTS`:

- `GET /api/models/{repo}/revision/{revision}`: the commit and the file list;
- `GET /api/models/{repo}/tree/{commit}`: the files with their sizes;
- `HEAD` and `GET /{repo}/resolve/{revision}/{path}`: `X-Repo-Commit`, `ETag` (the file's
  sha256, as the Hub gives for LFS files), `Content-Length`, and `Range` on GET (resumes).

Knobs for the tests: `drop_after` cuts the first GET of a file after so many bytes (a dropped
connection); `corrupt` serves other bytes for a file; `requests` records every request.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = "2Noise/ChatTTS"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    root: Path  # the checkpoint directory served as the repository
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, range
    drop_after: dict[str, int] = field(default_factory=dict)  # file -> bytes before a cut
    corrupt: set[str] = field(default_factory=set)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())

    def content(self, relative: str) -> bytes:
        data = (self.root / relative).read_bytes()
        if relative in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    def start(self) -> FakeHub:
        handler = type("Handler", (_HubHandler,), {"hub": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _HubHandler(BaseHTTPRequestHandler):
    """The hub's answers: its API's model info and file tree, and its files (ranges too)."""

    hub: FakeHub  # set per hub (FakeHub.start)

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        self.hub.requests.append((self.command, self.path, self.headers.get("Range", "")))
        api = f"/api/models/{REPO}/revision/"
        if self.path.startswith(api):
            info = {
                "id": REPO,
                "modelId": REPO,
                "sha": COMMIT,
                "siblings": [{"rfilename": f} for f in self.hub.files()],
            }
            self._send(200, json.dumps(info).encode(), "application/json", body)
            return
        tree = f"/api/models/{REPO}/tree/"
        if self.path.startswith(tree):
            entries = [
                {
                    "type": "file",
                    "path": f,
                    "size": len(self.hub.content(f)),
                    "oid": hashlib.sha1(self.hub.content(f)).hexdigest(),
                }
                for f in self.hub.files()
            ]
            self._send(200, json.dumps(entries).encode(), "application/json", body)
            return
        prefix = f"/{REPO}/resolve/"
        if not self.path.startswith(prefix):
            self._send(404, b"{}", "application/json", body)
            return
        relative = self.path[len(prefix) :].split("/", 1)[1].split("?", 1)[0]
        if relative not in self.hub.files():
            self._send(404, b"Entry not found", "text/plain", body, entry=True)
            return
        data = self.hub.content(relative)
        start = 0
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes=") and body:
            start = int(wanted[6:].split("-", 1)[0])
        etag = hashlib.sha256(data).hexdigest()
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Linked-Etag", f'"{etag}"')
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        cut = self.hub.drop_after.pop(relative, None)
        if cut is not None:
            self.wfile.write(data[start : start + cut])
            self.wfile.flush()
            self.connection.close()  # the connection drops mid-file
            return
        self.wfile.write(data[start:])

    def _send(self, status: int, data: bytes, kind: str, body: bool, entry: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        if entry:
            self.send_header("X-Error-Code", "EntryNotFound")
        self.end_headers()
        if body:
            self.wfile.write(data)
