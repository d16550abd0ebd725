"""Real web servers for the tests: `digest serve`'s app under waitress on a free port of 127.0.0.1 (in this
process, or `digest serve` itself in a subprocess), each with an HTTP client."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from digest.app import App
from digest.web import create_app, make_server

OPERATOR_PASSWORD = "operator-test-password"
OPERATOR = ("operator", OPERATOR_PASSWORD)  # HTTP basic credentials for /admin/


class Server:
    """A running web app and an HTTP client for it (the operator password is OPERATOR_PASSWORD unless given)."""

    def __init__(self, app: App, **options: object) -> None:
        self.app = app
        options.setdefault("operator_password", OPERATOR_PASSWORD)
        self.server = make_server(create_app(app, **options), "127.0.0.1", 0, threads=2)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.effective_port}"
        self.client = httpx.Client(base_url=self.base, follow_redirects=False, timeout=10)

    def _run(self) -> None:
        with contextlib.suppress(OSError):  # waitress has no stop(): closing its sockets ends the loop so
            self.server.run()

    def path(self, url: str) -> str:
        """A link from an email (under newsletter.base_url) as a path on this server."""
        return url.removeprefix(self.app.newsletter.base_url)

    def close(self) -> None:
        self.client.close()
        # the request threads first (each finishes its task), then the sockets: a thread still answering when the
        # sockets close would write to a closed trigger and log a traceback
        self.server.task_dispatcher.shutdown(timeout=5)
        self.server.close()


class Served:
    """`digest serve --port PORT` run as a subprocess with the config file `config` (what an operator runs)."""

    def __init__(self, config: Path, port: int, env: dict[str, str]) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "digest.cli", "--config", str(config), "serve", "--port", str(port)],
            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"digest serve exited: {self.process.communicate()[1]}")
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{self.base}/admin/", timeout=1)
                return
            time.sleep(0.1)
        raise RuntimeError("digest serve did not start within 30 s")

    def close(self) -> tuple[str, str]:
        """Stop the server; what it printed (stdout, stderr)."""
        self.process.terminate()
        try:
            return self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.communicate()
