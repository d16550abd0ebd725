"""HTTP fetching for live sources: timeouts, retries with backoff, Retry-After, conditional requests.

One `Fetcher` per run holds one HTTP client (connections are reused across sources). A 429 or 5xx
reply, a timeout, a dropped connection or a body cut short is retried with exponential backoff,
waiting as long as the server's Retry-After asks when that is within `max_wait` (a longer one fails the
source at once; one that is neither ASCII seconds nor an HTTP date is ignored and the backoff used); any
other 4xx, a body of the wrong content type, a redirect loop or a body its Content-Encoding does not
decode fails at once. Validators (ETag, Last-Modified) from the last good fetch make the request
conditional, so an unchanged page costs a 304 and no parsing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from digest import __version__
from digest.errors import FetchError
from digest.numbers import whole

USER_AGENT = f"paper-digest/{__version__} (+https://github.com/paper-digest/paper-digest)"
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class FetchPolicy:
    """How hard to try: the `[fetch]` settings."""

    timeout: float = 30.0
    retries: int = 3
    backoff: float = 2.0
    max_wait: float = 120.0
    user_agent: str = USER_AGENT

    @classmethod
    def of(cls, settings: Any) -> FetchPolicy:
        """From the `[fetch]` settings (`config.fetch`)."""
        return cls(timeout=float(settings.timeout), retries=settings.retries, backoff=float(settings.backoff),
                   max_wait=float(settings.max_wait), user_agent=settings.user_agent or USER_AGENT)


@dataclass(frozen=True)
class Validators:
    """What the server said identifies the version we have (for a conditional request)."""

    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class Fetched:
    """A successful fetch: the body (empty when not modified) and the validators to keep."""

    url: str
    body: bytes
    not_modified: bool
    validators: Validators
    attempts: int


class Fetcher:
    """GETs URLs under one policy; `sleep` is injectable so tests need not wait for real."""

    def __init__(self, policy: FetchPolicy, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.policy = policy
        self.sleep = sleep
        self.client = httpx.Client(timeout=policy.timeout, follow_redirects=True,
                                   headers={"User-Agent": policy.user_agent})

    def close(self) -> None:
        self.client.close()

    def get(self, url: str, *, accept: tuple[str, ...], have: Validators = Validators(),
            limit: int | None = None, headers: dict[str, str] | None = None) -> Fetched:
        """The body at `url` if its content type starts with one of `accept` (and it is at most `limit` bytes once
        decompressed); FetchError when it cannot be had. `headers` are sent besides the client's own."""
        headers = (headers or {}) | {"Accept": ", ".join(accept) + ", */*;q=0.1"}
        if have.etag:
            headers["If-None-Match"] = have.etag
        if have.last_modified:
            headers["If-Modified-Since"] = have.last_modified
        attempts = self.policy.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                with self.client.stream("GET", url, headers=headers) as response:
                    if response.status_code == 304:
                        return Fetched(url, b"", True, have, attempt)
                    if response.is_success:
                        body = _checked(response, accept, attempt, limit)
                        return Fetched(url, body, False, _validators(response), attempt)
            except httpx.TransportError as exc:  # timeouts, refused or dropped connections, short bodies
                problem, wait = _describe(exc), self._backoff(attempt)
            except httpx.HTTPError as exc:  # redirects in a loop, a body its Content-Encoding does not decode
                raise FetchError(url, _describe(exc), attempt) from exc
            else:
                problem = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                if response.status_code not in RETRY_STATUSES:
                    raise FetchError(url, problem, attempt, status=response.status_code)
                wait = _retry_after(response) or self._backoff(attempt)
                if wait > self.policy.max_wait:
                    raise FetchError(url, f"{problem}; asked to retry after {wait:.0f} s", attempt)
            if attempt < attempts:
                self.sleep(wait)
        raise FetchError(url, f"{problem} (gave up after {attempts} attempts)", attempts)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.policy.backoff * 2 ** (attempt - 1), self.policy.max_wait))


def _checked(response: httpx.Response, accept: tuple[str, ...], attempt: int, limit: int | None) -> bytes:
    """The body, after checking its content type is one the caller can parse; read a piece at a time, so that a
    body (or a compressed one) larger than `limit` is refused without being held."""
    kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if not any(kind.startswith(wanted) for wanted in accept):
        raise FetchError(str(response.url), f"expected {' or '.join(accept)}, got {kind or 'no content type'}",
                         attempt)
    body = bytearray()
    for piece in response.iter_bytes():
        body += piece
        if limit is not None and len(body) > limit:
            raise FetchError(str(response.url), f"the body is larger than {limit:,} bytes: not a page we read",
                             attempt)
    return bytes(body)


def _validators(response: httpx.Response) -> Validators:
    return Validators(response.headers.get("ETag"), response.headers.get("Last-Modified"))


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asks us to wait (Retry-After as seconds or an HTTP date), else None."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    seconds = whole(value)
    if seconds is not None:
        return float(seconds)
    try:  # a year or hour of 20 digits is an OverflowError, a year past 9999 a ValueError
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max((when - datetime.now(UTC)).total_seconds(), 0.0)
    except (TypeError, ValueError, OverflowError):
        return None


def _describe(exc: httpx.HTTPError) -> str:
    """A short reason for a failed request, on one line."""
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({exc.__class__.__name__})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"connection broken: {_one_line(exc)}"
    if isinstance(exc, httpx.DecodingError):
        return f"the body cannot be decoded as its Content-Encoding says: {_one_line(exc)}"
    return f"{exc.__class__.__name__}: {_one_line(exc)}"


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
