"""What every request passes before a page: a known Host, a same-site origin for changes, and redirects without a Host.

- Host allow-list: the host of `newsletter.base_url` and the address the server is bound to (and the
  loopback names on a loopback or wildcard bind). Any other Host (DNS rebinding, a forged header)
  gets a 400 before routing, so no page, redirect or link is ever built from it.
- Redirects (`/admin` → `/admin/`) carry a path only, never a URL built from the request's Host.
- A state-changing request whose browser says where it came from (Origin, else Referer) must come
  from the newsletter's own site or this server; `Origin: null` (a sandboxed or no-referrer page) is
  refused too. Mail providers' one-click POSTs send neither header and pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, request

from digest.config import is_loopback_host

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("", "0.0.0.0", "::")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def allowed_hosts(base_url: str, bind: str) -> frozenset[str]:
    """Host names this server answers to: base_url's, the bind address, loopback names on a local or wildcard bind."""
    hosts = {urlsplit(base_url).hostname or ""}
    if bind not in WILDCARDS:
        hosts.add(bind.strip("[]").lower())
    if bind in WILDCARDS or is_loopback_host(bind):
        hosts.update(LOOPBACK_NAMES)
    return frozenset(h for h in hosts if h)


def host_name(host_header: str) -> str:
    """The name in a Host header, without its port (`[::1]:8025` → `::1`); '' when it does not parse."""
    try:
        return (urlsplit(f"//{host_header}").hostname or "").lower()
    except ValueError:
        return ""


def install(web: Flask, hosts: Iterable[str], base_url: str) -> None:
    """Check the Host of every request and make routing redirects relative."""
    web.config["ALLOWED_HOSTS"] = frozenset(hosts)
    base = urlsplit(base_url)
    web.config["SITE_ORIGIN"] = f"{base.scheme}://{base.netloc}".lower()
    web.before_request(_check_host)
    web.after_request(_relative_location)


def _check_host() -> Response | None:
    if host_name(request.headers.get("Host", "")) not in current_app.config["ALLOWED_HOSTS"]:
        return Response("unknown host\n", 400, content_type="text/plain")
    return None


def _relative_location(response: Response) -> Response:
    """Every redirect here is to this site: send its path only (Werkzeug's slash redirect names the request's Host)."""
    location = response.headers.get("Location")
    if location:
        target = urlsplit(location)
        response.headers["Location"] = ((target.path or "/") + (f"?{target.query}" if target.query else "")
                                        + (f"#{target.fragment}" if target.fragment else ""))  # (the page's place)
        response.autocorrect_location_header = False
    return response


def same_site() -> bool:
    """Whether a state-changing request may go on: no Origin/Referer, or one naming this site."""
    origin = request.headers.get("Origin")
    if origin is None:
        referer = request.headers.get("Referer")
        if not referer:
            return True  # not a browser that says (a mail provider's one-click POST, curl)
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    origin = origin.strip().lower()
    return origin in (current_app.config["SITE_ORIGIN"], f"{request.scheme}://{request.host}".lower())
