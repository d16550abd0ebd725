"""The endpoints behind every email's links: unsubscribe (RFC 8058 one-click), preferences, feedback.

Each link carries a signed token naming the subscriber and the action; a forged, altered or
truncated one gets a 400 page and changes nothing. A GET never changes anything (mail scanners
follow links); the change is a POST: the mailbox provider's one-click POST, or the page's button.
"""

from __future__ import annotations

from datetime import date, timedelta

from flask import Blueprint, Response, abort, request

from ..models import MAX_ROW_ID
from ..subscribers import WEEKDAYS
from ..tokens import BadToken
from .common import current, page

blueprint = Blueprint("public", __name__)

FREQUENCIES = [("daily", "Every day"), ("weekdays", "Monday to Friday")] + [
    (f"weekly:{day}", f"Once a week, on {name}") for day, name in zip(
        WEEKDAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"), strict=True)]
PAUSES = [(7, "For a week"), (14, "For two weeks"), (30, "For a month"), (90, "For three months")]


def _email(action: str, token: str) -> str:
    try:
        return current().signer.check(action, token)["e"]
    except BadToken:
        abort(400)


@blueprint.app_errorhandler(400)
def bad_link(_error: Exception) -> tuple[str, int]:
    return page("message", heading="This link is not valid",
                text="It may have been cut short or changed. Use the link in your latest email."), 400


@blueprint.app_errorhandler(404)
def not_found(_error: Exception) -> tuple[str, int]:
    return page("message", heading="Not found", text="There is nothing at this address."), 404


@blueprint.get("/unsubscribe/<token>")
def unsubscribe_page(token: str) -> str:
    """A confirmation page: a GET (a person, or a scanner following the link) unsubscribes nobody."""
    email = _email("unsubscribe", token)
    links = current().links_for(email)
    return page("unsubscribe", email=email, done=False, action=request.path, preferences_url=links.preferences)


@blueprint.post("/unsubscribe/<token>")
def unsubscribe(token: str) -> str:
    """RFC 8058 one-click (body `List-Unsubscribe=One-Click`) or the page's button: unsubscribe at once."""
    email = _email("unsubscribe", token)
    app = current()
    app.store.suppress(email.lower(), "unsubscribed")
    return page("unsubscribe", email=email, done=True, resubscribe_url=app.links_for(email).preferences)


@blueprint.route("/preferences/<token>", methods=["GET", "POST"])
def preferences(token: str) -> str | Response:
    """Pause for a while, change how often, or resubscribe."""
    email = _email("preferences", token)
    app = current()
    message = _apply(email, request.form) if request.method == "POST" else ""
    prefs = app.store.preference(email)
    profile = app.roster().find(email)
    frequency = (prefs.frequency if prefs and prefs.frequency else profile.frequency if profile else "daily")
    paused = prefs.paused_until if prefs and prefs.paused_until and prefs.paused_until >= date.today() else None
    reason = app.store.suppressed().get(email.lower())
    return page("preferences", email=email, message=message, action=request.path, frequency=frequency,
                frequency_label=dict(FREQUENCIES).get(frequency, frequency).lower(), frequencies=FREQUENCIES,
                pauses=PAUSES, paused_until=paused, unsubscribed=reason is not None,
                unsubscribe_url=app.links_for(email).unsubscribe)


def _apply(email: str, form: dict[str, str]) -> str:
    """Carry out one preferences form; the message says what changed."""
    store, action = current().store, form.get("do", "")
    if action == "resubscribe":
        store.unsuppress(email.lower(), "unsubscribed")
        return "Welcome back: you are subscribed again."
    if action == "frequency" and form.get("frequency") in dict(FREQUENCIES):
        store.set_preference(email, frequency=form["frequency"])
        return f"Saved: {dict(FREQUENCIES)[form['frequency']].lower()}."
    if action == "pause" and form.get("days", "").isdigit() and int(form["days"]) in dict(PAUSES):
        until = date.today() + timedelta(days=int(form["days"]))
        store.set_preference(email, paused_until=until)
        return f"Paused until {until:%A %d %B %Y}."
    if action == "resume":
        store.set_preference(email, paused_until=None)
        return "Resumed: your next digest goes out as usual."
    abort(400)


@blueprint.route("/feedback/<token>/<int:paper_id>/<any(more, less):direction>", methods=["GET", "POST"])
def feedback(token: str, paper_id: int, direction: str) -> str:
    """'More / less like this': the GET asks, the POST records (the same signal as `digest feedback`)."""
    email = _email("feedback", token)
    app = current()
    paper = app.store.paper(paper_id) if paper_id <= MAX_ROW_ID else None
    if paper is None:
        abort(404)
    done = request.method == "POST"
    if done:
        app.store.add_feedback(email, paper_id, 1 if direction == "more" else -1)
    return page("feedback", paper=paper, more=direction == "more", done=done, action=request.path,
                preferences_url=app.links_for(email).preferences)
