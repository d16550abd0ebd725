"""`digest serve`: the public endpoints every email links to, and the operator's preview pages (Flask).

Public (under the path of `newsletter.base_url`): one-click unsubscribe (RFC 8058), preferences,
feedback. Operator (under /admin): subscribers, any digest of any date as it will be sent. Pages
are rendered by the renderer's own Jinja environment (templates/web/, overridable like the
emails). Operator pages are open on a loopback-only server and need a password otherwise.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response

from ..errors import DigestError, UsageError
from ..pipeline import App
from . import operator, public
from .common import CSP

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # page URLs carry tokens: never leak them to other sites
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(app: App, *, operator_password: str | None = None, operator_pages: bool = True) -> Flask:
    """The web application over `app` (its store, renderer, signer and profiles)."""
    web = Flask("digest.web")
    web.config["DIGEST_APP"] = app
    web.config["OPERATOR_PASSWORD"] = operator_password
    base = urlsplit(app.newsletter.base_url).path.rstrip("/")
    web.register_blueprint(public.blueprint, url_prefix=base or None)
    if operator_pages:
        web.register_blueprint(operator.blueprint, url_prefix="/admin")
    web.after_request(_secure)
    return web


def _secure(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response


def serve(app: App, host: str, port: int, *, password_env: str, threads: int = 4,
          ready: Callable[[str, int], object] = lambda host, port: None) -> None:
    """Serve until interrupted (waitress, a production WSGI server); refuse an open operator page off loopback.

    `ready` is told the address once the socket is listening (so nothing claims to serve on a port it could
    not take); a port that cannot be taken is a DigestError naming it."""
    password = os.environ.get(password_env) or None
    if not is_loopback(host) and password is None:
        raise UsageError(f"serving on {host} would expose the operator pages: set ${password_env} "
                         "(HTTP basic auth, behind your TLS proxy) or bind to 127.0.0.1")
    try:
        server = make_server(create_app(app, operator_password=password), host, port, threads=threads)
    except OSError as exc:
        raise DigestError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (is another `digest serve` "
                          "running? choose another --port)") from exc
    ready(host, int(server.effective_port))
    server.run()


def make_server(web: Flask, host: str, port: int, *, threads: int = 4) -> Any:
    """A waitress server for `web` (not yet running); port 0 picks a free one."""
    from waitress.server import create_server

    # Keep proxy headers visible to the app: a request that came through a proxy must not pass
    # for a local one on the operator pages (waitress strips untrusted ones by default).
    return create_server(web, host=host, port=port, threads=threads, ident="paper-digest",
                         clear_untrusted_proxy_headers=False)
