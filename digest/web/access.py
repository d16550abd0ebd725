"""`digest serve`'s access log: one line a request in the common log format, with every link token redacted.

    203.0.113.7 - - [12/Jun/2026:07:31:02 +0000] "GET /preferences/-redacted- HTTP/1.1" 200 5120

The host is the reader's address (behind `signup.proxy_hops` proxies, the one they forwarded, as the rate limits read
it), the time the request came in (local time, with its offset), the request line with its path and query as sent
(re-quoted, so no line holds a space, quote or control character it did not have as %XX), the status and the body's
bytes ("-" for none). Ident and user are always "-" (the operator's user name is any word). A link's token is its
subscriber's address, sealed: every path segment after a route that carries one (`/unsubscribe/`, `/preferences/`,
`/feedback/`, … under any prefix) is REDACTED, and so is any other segment or query value that holds what looks like
one (TOKEN_CHARS or more of a token's alphabet in a row), or a query value whose name says it is a secret. Referer
and User-Agent are not written (a page's Referer names its token).

The log is a file (0600, appended to; a file renamed away by logrotate is opened again under its name at the next
request) or stderr ("-"). Requests waitress answers itself, before the application (a header or body past its
bounds, a request line it cannot read), are not in it.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, unquote_plus

from digest.errors import DigestError
from digest.filemodes import open_private

REDACTED = "-redacted-"
# Routes whose next path segment is a signed token (the links in emails and on the reader's pages).
TOKEN_ROUTES = frozenset({"unsubscribe", "preferences", "interests", "library", "view", "feed", "archive", "feedback",
                          "welcome", "confirm"})
TOKEN_CHARS = 32  # a segment or value this long, of a token's alphabet, is taken for a token (ours are 40 and more)
_TOKENISH = re.compile(rf"[A-Za-z0-9_\-.=~+/:]{{{TOKEN_CHARS},}}")
SECRET_NAMES = frozenset({"token", "key", "secret", "signature", "sig", "password", "auth", "access_token", "csrf"})
_PATH_SAFE = "/!$&'()*+,;=:@-._~"
_QUERY_SAFE = "!$'()*+,;=:@/?%-._~"  # (a value stays %-encoded as sent; '&' and '=' are split on first)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def redact_path(path: str) -> str:
    """`path` with every token segment REDACTED: the segment after a token route, and any that holds a token's like."""
    parts = path.split("/")
    out = []
    for n, part in enumerate(parts):
        after_route = n > 0 and parts[n - 1].lower() in TOKEN_ROUTES
        out.append(REDACTED if part and (after_route or _TOKENISH.search(part)) else part)
    return "/".join(out)


def redact_query(query: str) -> str:
    """A query string as sent, each value that names or looks like a secret REDACTED."""
    pairs = []
    for pair in query.split("&"):
        name, equals, value = pair.partition("=")
        secret = unquote_plus(name).lower() in SECRET_NAMES or _TOKENISH.search(unquote_plus(value))
        pairs.append(f"{name}{equals}{REDACTED if secret and equals else value}")
    return quote("&".join(pairs), safe=_QUERY_SAFE + "&=")


def request_line(environ: dict[str, Any]) -> str:
    """The request line as the log writes it: method, redacted path and query, protocol; quoted for one line."""
    method = quote(str(environ.get("REQUEST_METHOD", "-")), safe="")
    raw = str(environ.get("SCRIPT_NAME", "")) + str(environ.get("PATH_INFO", ""))  # (WSGI: bytes as latin-1)
    path = quote(redact_path(raw.encode("latin-1", "replace").decode("utf-8", "replace")), safe=_PATH_SAFE)
    query = str(environ.get("QUERY_STRING", ""))
    protocol = quote(str(environ.get("SERVER_PROTOCOL", "-")), safe="/.")
    return f"{method} {path or '/'}{'?' + redact_query(query) if query else ''} {protocol}"


def client(environ: dict[str, Any], hops: int) -> str:
    """The reader's address: the connecting one, or (behind `hops` proxies) the one they forwarded."""
    if hops:
        forwarded = [p.strip() for p in str(environ.get("HTTP_X_FORWARDED_FOR", "")).split(",") if p.strip()]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return str(environ.get("REMOTE_ADDR", "")) or "-"


def clf_time(when: float) -> str:
    """[12/Jun/2026:07:31:02 +0100]: local time and its offset, month names in English whatever the locale."""
    local = time.localtime(when)
    offset = local.tm_gmtoff or 0
    sign, offset = ("-", -offset) if offset < 0 else ("+", offset)
    return (f"[{local.tm_mday:02d}/{_MONTHS[local.tm_mon - 1]}/{local.tm_year}:{local.tm_hour:02d}:"
            f"{local.tm_min:02d}:{local.tm_sec:02d} {sign}{offset // 3600:02d}{offset % 3600 // 60:02d}]")


class Sink:
    """Where the lines go: a file (made 0600, appended to, opened again when renamed away) or a stream."""

    def __init__(self, target: str | Path, stream: TextIO | None = None) -> None:
        self.lock = threading.Lock()
        self.stream = stream
        self.path = None if stream is not None else Path(target)
        self.fd = -1
        if self.path is not None:
            self._open()

    def _open(self) -> None:
        assert self.path is not None
        try:
            self.fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise DigestError(f"cannot open the access log {self.path}: {exc.strerror or exc}") from exc

    def write(self, line: str) -> None:
        if self.stream is not None:
            with self.lock:
                self.stream.write(line)
                self.stream.flush()
            return
        data = line.encode("utf-8", "replace")
        with self.lock:
            try:
                self._reopen_if_moved()
                os.write(self.fd, data)  # O_APPEND: one write a line, whole, among other processes' lines too
            except OSError as exc:
                print(f"digest serve: cannot write the access log {self.path}: {exc.strerror or exc}", file=sys.stderr)

    def _reopen_if_moved(self) -> None:
        assert self.path is not None
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            named = None
        mine = os.fstat(self.fd)
        if named is None or (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
            os.close(self.fd)
            self.fd = -1
            self._open()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def sink(target: str, base: Path | None = None) -> Sink | None:
    """The sink `target` names: "" none, "-" stderr, else a file (relative to `base`, when given)."""
    if not target:
        return None
    if target == "-":
        return Sink("-", sys.stderr)
    path = Path(target)
    return Sink(base / path if base is not None and not path.is_absolute() else path)


class AccessLog:
    """WSGI middleware that writes one line per request to `sink` once its response has been sent."""

    def __init__(self, app: WSGIApp, sink: Sink, proxy_hops: int = 0) -> None:
        self.app, self.sink, self.hops = app, sink, proxy_hops

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        began = time.time()
        status = ["-"]

        def start(code: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status[0] = code.split(" ", 1)[0]
            return start_response(code, headers, exc_info) if exc_info is not None else start_response(code, headers)

        try:
            body = self.app(environ, start)
        except BaseException:
            self._write(environ, began, status[0] if status[0] != "-" else "500", 0)
            raise
        return _Counted(body, lambda sent: self._write(environ, began, status[0], sent))

    def _write(self, environ: dict[str, Any], began: float, status: str, sent: int) -> None:
        self.sink.write(f"{client(environ, self.hops)} - - {clf_time(began)} \"{request_line(environ)}\" "
                        f"{status} {sent or '-'}\n")


class _Counted:
    """A response body that counts the bytes it yields and, when the server closes it, says how many."""

    def __init__(self, body: Iterable[bytes], done: Callable[[int], None]) -> None:
        self.body, self.done, self.sent = body, done, 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.body:
            self.sent += len(chunk)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.done(self.sent)
