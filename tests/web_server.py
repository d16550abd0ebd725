"""A real web server (waitress on a free port of 127.0.0.1) running `digest serve`'s app, with a client."""

from __future__ import annotations

import contextlib
import threading

import httpx

from digest.pipeline import App
from digest.web import create_app, make_server


class Server:
    """A running web app and an HTTP client for it."""

    def __init__(self, app: App, **options: object) -> None:
        self.app = app
        self.server = make_server(create_app(app, **options), "127.0.0.1", 0, threads=2)
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
        self.server.close()
