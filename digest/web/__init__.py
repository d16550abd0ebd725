"""`digest serve`: the public endpoints every email links to, and the operator's preview pages (Flask).

Public (under the path of `newsletter.base_url`): one-click unsubscribe (RFC 8058), preferences,
feedback, and the signup page with its confirmation links (`signup`). Operator (under /admin):
subscribers, any digest of any date as it will be sent. Pages
are rendered by the renderer's own Jinja environment (templates/web/, overridable like the
emails). The operator pages ask for a password on every interface (the one from the environment,
or one made at start and printed) unless the operator turns that off; every request must name a
known Host (see `guard`).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from collections.abc import Callable
from datetime import date
from typing import Any, TextIO
from urllib.parse import urlsplit

from flask import Flask, Response

from digest.config import is_loopback_host
from digest.errors import DigestError, UsageError
from digest.web import (
    access,
    feeds,
    guard,
    interests,
    library,
    metrics,
    operator,
    public,
    signup,
    uploads,
    webhooks,
    welcome,
)
from digest.web.common import CSP, Site

log = logging.getLogger("digest")

# Connections (waitress' own defaults in brackets). Reading a request never holds a worker thread (waitress
# reads in its event loop and hands over whole requests), so what idle and slow clients use up is connections:
CONNECTION_LIMIT = 1000  # open at once; past it new ones wait in the backlog [100: 100 idle sockets shut out all]
CHANNEL_TIMEOUT = 30  # seconds a connection may send nothing before it is closed [120]
CLEANUP_INTERVAL = 5  # seconds between looks for such connections [30]
MAX_HEADER_BYTES = 64 * 1024  # a request's headers; more: 431 [256 KiB]
MAX_BODY_BYTES = 64 * 1024  # a request's body (the forms are a few hundred bytes); more: 413 [1 GiB]
# ... but for the routes that take more: the webhooks (1 MiB) and a library upload (the library page and the signup
# form: uploads.MAX_BODY_BYTES, 10 MiB), which each raise their own request's bound.

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    # Page URLs carry tokens: never send them to other sites. Same-origin (not no-referrer) so that the
    # pages' own forms post with a real Origin, which the Origin check can tell from a forged one.
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def create_app(app: Site, *, operator_password: str | None, bind: str = "127.0.0.1",
               operator_pages: bool = True, access_log: str | None = None) -> Flask:
    """The web application over `app` (its store, renderer, signer and profiles), for a server bound to `bind`.

    `operator_password` None opens the operator pages without a login: only to requests that did not
    come through a proxy, and only when `bind` is loopback (see `serve`). `access_log`: where the access log
    goes ("" nowhere, "-" stderr, else a file; None: `web.access_log`, a path relative to the settings' folder).
    """
    web = Flask("digest.web")
    web.config["DIGEST_APP"] = app
    web.config["OPERATOR_PASSWORD"] = operator_password
    web.config["OPERATOR_OPEN_OK"] = is_loopback_host(bind)
    web.config["BIND"] = bind  # (the console's readiness list checks base_url against it)
    web.config["CSRF_KEY"] = secrets.token_bytes(32)  # operator forms' tokens: good until the server restarts
    web.config["LINK_DAYS"] = app.config.web.link_days
    web.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES  # also under a server other than `make_server`'s: 413
    web.config["LEGACY_SINCE"] = app.store.first_day("dated_link_tokens", date.today())
    guard.install(web, guard.allowed_hosts(app.newsletter.base_url, bind), app.newsletter.base_url)
    base = urlsplit(app.newsletter.base_url).path.rstrip("/")
    web.register_blueprint(public.blueprint, url_prefix=base or None)
    web.register_blueprint(signup.blueprint, url_prefix=base or None)
    web.register_blueprint(interests.blueprint, url_prefix=base or None)
    web.register_blueprint(library.blueprint, url_prefix=base or None)
    web.register_blueprint(feeds.blueprint, url_prefix=base or None)
    web.register_blueprint(welcome.blueprint, url_prefix=base or None)
    if operator_pages:
        web.register_blueprint(operator.blueprint, url_prefix="/admin")
    metrics.install(web, app.store, os.environ.get(app.config.web.metrics_token_env, ""))
    webhooks.install(web, app.config.webhooks, base or None)
    web.after_request(_secure)
    log_sink = access.sink(app.config.web.access_log, app.config.base) if access_log is None else \
        access.sink(access_log)
    if log_sink is not None:  # outermost, so that it sees every answer the application gives
        web.wsgi_app = access.AccessLog(web.wsgi_app, log_sink, app.config.signup.proxy_hops)  # type: ignore[method-assign]
    return web


def _secure(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response


def serve(app: Site, host: str, port: int, *, password_env: str, threads: int = 4,
          out: TextIO = sys.stderr, ready: Callable[[str, int], object] = lambda host, port: None,
          access_log: str | None = None) -> None:
    """Serve until interrupted (waitress, a production WSGI server), the operator pages behind a login.

    The password is the one in $`password_env`, else one made now and printed to `out`; with
    `web.operator_login = false` there is none, which only a loopback-bound server accepts. `ready` is
    told the address once the socket is listening (so nothing claims to serve on a port it could not
    take); a port that cannot be taken is a DigestError naming it. `access_log`: as `create_app` takes it
    (None: the setting); a file that cannot be opened is a DigestError naming it.
    """
    password = operator_password(app, host, password_env)
    web = create_app(app, operator_password=password, bind=host, access_log=access_log)
    try:
        server = make_server(web, host, port, threads=threads)
    except OSError as exc:
        raise DigestError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (is another `digest serve` "
                          "running? choose another --port)") from exc
    ready(host, int(server.effective_port))
    if password is not None and not os.environ.get(password_env):
        where = f"http://{'localhost' if is_loopback_host(host) else host}:{server.effective_port}/admin/"
        print(f"operator pages: {where} (user: operator, password: {password}); "
              f"set ${password_env} to choose the password", file=out, flush=True)
    server.run()


def operator_password(app: Site, host: str, password_env: str) -> str | None:
    """The operator pages' password: from the environment, else made now; None only when the login is off."""
    if not app.config.web.operator_login:
        if not is_loopback_host(host):
            raise UsageError(f"serving on {host} with web.operator_login = false would expose the operator pages: "
                             "turn the login back on or bind to 127.0.0.1")
        return None
    return os.environ.get(password_env) or secrets.token_urlsafe(18)


def make_server(web: Flask, host: str, port: int, *, threads: int = 4, channel_timeout: float = CHANNEL_TIMEOUT,
                cleanup_interval: float = CLEANUP_INTERVAL) -> Any:
    """A waitress server for `web` (not yet running); port 0 picks a free one."""
    from waitress.server import create_server

    # Keep proxy headers visible to the app: a request that came through a proxy must not pass
    # for a local one on the operator pages (waitress strips untrusted ones by default).
    return create_server(web, host=host, port=port, threads=threads, ident="paper-digest",
                         clear_untrusted_proxy_headers=False, connection_limit=_connection_limit(),
                         channel_timeout=channel_timeout, cleanup_interval=cleanup_interval,
                         asyncore_use_poll=True,  # select() stops at file descriptor 1024
                         # (past the largest route's bound, so that the app's own page says a file is too large;
                         # Flask holds every route to its own bound, MAX_BODY_BYTES for most)
                         max_request_header_size=MAX_HEADER_BYTES, max_request_body_size=uploads.WAITRESS_BODY_BYTES)


def _connection_limit() -> int:
    """CONNECTION_LIMIT, with the process's open-file limit raised to fit it where the hard limit allows (a
    Debian session starts at 1,024); else as many connections as fit, with a warning."""
    import resource

    wanted = CONNECTION_LIMIT + 100  # the store, the templates, the logs, the listening socket
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft != resource.RLIM_INFINITY and soft < wanted:
        log.warning("serving at most %d connections at once: the open-file limit is %d (ulimit -n)", soft - 100, soft)
        return max(10, soft - 100)
    return CONNECTION_LIMIT
