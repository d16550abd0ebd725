"""What the web pages share: the parts behind the request (`Site`), page rendering, where a request came from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from flask import current_app, request

from digest.models import WEEKDAYS
from digest.signup.signups import zones

if TYPE_CHECKING:
    from digest.compose import Composer
    from digest.config import Config
    from digest.delivery.mailer import Mailer
    from digest.models import Newsletter
    from digest.render.renderer import Renderer
    from digest.select import SelectSettings
    from digest.select.analysis import Analysis
    from digest.select.dense import DenseEmbedder
    from digest.store import Store
    from digest.subscribers.roster import Profiles
    from digest.tokens import LinkMaker, Signer

FREQUENCIES = [("daily", "Every day"), ("weekdays", "Monday to Friday")] + [
    (f"weekly:{day}", f"Once a week, on {name}") for day, name in zip(
        WEEKDAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"), strict=True)]

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data: https:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
REGIONS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")
# Who keeps the interests of a reader the web cannot change (their profile's source: a file, an import).
MANAGERS = {"file": "a profile file", "import": "a list they imported"}


class Site(Protocol):
    """The parts the web pages use, made once by the command that serves them (`app.App` has them all)."""

    config: Config
    store: Store
    renderer: Renderer
    newsletter: Newsletter
    signer: Signer
    links: LinkMaker
    settings: SelectSettings
    dense: DenseEmbedder | None
    analysis: Analysis
    profiles: Profiles
    composer: Composer
    mailer: Mailer


def current() -> Site:
    """The parts this web application serves."""
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
