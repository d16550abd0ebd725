"""A real HTTP server on 127.0.0.1 that serves saved responses and misbehaves on purpose.

Each path has a script: a list of `Reply`s served in turn (the last one repeats). A reply can be
slow, cut its body short of its Content-Length, carry any status, headers and content type, or
answer 304 when the request's validators match.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    truncate: bool = False  # send half the body, then close, while promising all of it
    etag: str | None = None  # answer 304 when If-None-Match carries this


@dataclass
class Seen:
    """One request the server received."""

    path: str
    headers: dict[str, str]


class ScriptedServer:
    """Serve `scripts` (path → replies) on a free port; use as a context manager."""

    def __init__(self, scripts: dict[str, list[Reply]]) -> None:
        self.scripts = {path: list(replies) for path, replies in scripts.items()}
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def hits(self, path: str) -> int:
        return sum(1 for seen in self.requests if seen.path == path)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, path: str) -> Reply:
        with self._lock:
            replies = self.scripts.get(path.split("?")[0]) or self.scripts.get(path)
            if not replies:
                return Reply(status=404, body=b"not found", content_type="text/plain")
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                server.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                reply = server._next(self.path)
                time.sleep(reply.delay)
                if reply.etag and self.headers.get("If-None-Match") == reply.etag:
                    self._send(304, b"", reply, {"ETag": reply.etag})
                    return
                extra = dict(reply.headers, **({"ETag": reply.etag} if reply.etag else {}))
                self._send(reply.status, reply.body, reply, extra)

            def _send(self, status: int, body: bytes, reply: Reply, headers: dict[str, str]) -> None:
                self.send_response(status)
                if status != 304:
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                if reply.truncate:
                    self.send_header("Connection", "close")
                self.end_headers()
                if status == 304:
                    return
                self.wfile.write(body[: len(body) // 2] if reply.truncate else body)
                if reply.truncate:
                    self.wfile.flush()
                    self.close_connection = True

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

        return Handler
