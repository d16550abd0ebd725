"""What the web pages share: the App behind the request, page rendering, where a request came from."""

from __future__ import annotations

from typing import Any

from flask import current_app, request

from digest.pipeline import App
from digest.signup import zones
from digest.subscribers import WEEKDAYS

FREQUENCIES = [("daily", "Every day"), ("weekdays", "Monday to Friday")] + [
    (f"weekly:{day}", f"Once a week, on {name}") for day, name in zip(
        WEEKDAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"), strict=True)]

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data: https:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
REGIONS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")
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


def zone_groups(selected: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """The time zones the picker offers, grouped by region: (region, [(zone, label)]); `selected` among them."""
    groups: dict[str, list[tuple[str, str]]] = {"UTC": [("UTC", "UTC")], **{region: [] for region in REGIONS}}
    for zone in sorted(zones()):
        region, _, place = zone.partition("/")
        if region in REGIONS and place:
            groups[region].append((zone, place.replace("_", " ").replace("/", " – ")))
    if not any(zone == selected for offered in groups.values() for zone, _ in offered):
        groups["Other"] = [(selected, selected)]  # a profile's zone outside the regions (US/Eastern) stays possible
    return [(region, offered) for region, offered in groups.items() if offered]
