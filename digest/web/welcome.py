"""The welcome page's ratings: `/welcome/<token>` (a dozen papers to mark, the marks shown) and
`/welcome/<token>/rate` (one mark, then back to the list).

The token is the reader's feedback token (what an email's "more / less like this" links carry, valid as long:
`web.link_days`), since a mark here is that same signal (`digest.onboarding`). It works without JavaScript: each
paper's two buttons are a plain form whose POST records the mark and answers 303 back to the list, at the paper
just rated. A POST whose browser names another site is refused (403), as every change is.
"""

from __future__ import annotations

from datetime import date
from urllib.parse import urlsplit

from flask import Blueprint, Response, abort, redirect, request

from ..models import Links, Subscriber
from ..onboarding import offered, rate
from .common import current, page
from .guard import same_site
from .public import _links, _token

blueprint = Blueprint("welcome", __name__)


def _reader(token: str) -> tuple[Subscriber, Links | None]:
    subject = _token("feedback", token)
    subscriber = current().store.subscribers_by_email([subject.email]).get(subject.email)
    if subscriber is None:
        abort(404)
    return subscriber, _links(subject)


@blueprint.get("/welcome/<token>")
def welcome(token: str) -> str:
    """The papers to rate, each marked as the reader has rated it so far."""
    subscriber, links = _reader(token)
    return page("welcome", subscriber=subscriber, confirmed=False, updated=False,
                preferences_url=links.preferences if links else None,
                view_url=urlsplit(links.view).path if links else None,
                choices=offered(current(), subscriber, date.today()), rate_url=f"{request.path}/rate")


@blueprint.post("/welcome/<token>/rate")
def rate_one(token: str) -> Response:
    """One mark ("more" or "less" on the form's paper), then back to the list at that paper."""
    subscriber, _ = _reader(token)
    if not same_site():
        abort(403)
    paper, rating = request.form.get("paper", ""), request.form.get("rating", "")
    if not (paper.isascii() and paper.isdigit() and len(paper) < 20) or rating not in ("more", "less"):
        abort(400)
    if rate(current(), subscriber.email, int(paper), rating == "more") is None:
        abort(404)
    return redirect(f"{request.path.rsplit('/', 1)[0]}#paper-{paper}", 303)
