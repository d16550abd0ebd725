"""What the web pages share: the App behind the request, page rendering, where a request came from."""

from __future__ import annotations

from typing import Any

from flask import current_app, request

from ..pipeline import App
from ..subscribers import WEEKDAYS

FREQUENCIES = [("daily", "Every day"), ("weekdays", "Monday to Friday")] + [
    (f"weekly:{day}", f"Once a week, on {name}") for day, name in zip(
        WEEKDAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"), strict=True)]

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data: https:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
# Who keeps the interests of a reader the web cannot change (their profile's source: a file, an import).
MANAGERS = {"file": "a profile file", "import": "a list they imported"}


def current() -> App:
    """The App this web application serves."""
    return current_app.config["DIGEST_APP"]  # type: ignore[no-any-return]


def page(name: str, **context: Any) -> str:
    """A page from templates/web/, rendered with the newsletter in its context."""
    app = current()
    return app.renderer.render_template(f"web/{name}.html.j2", {"newsletter": app.newsletter, **context})


def from_proxy() -> bool:
    """Whether the request came through a reverse proxy (so 'from loopback' says nothing)."""
    return any(h in request.headers for h in ("X-Forwarded-For", "Forwarded", "X-Real-IP"))
