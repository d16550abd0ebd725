"""The endpoints behind every email's links: unsubscribe (RFC 8058 one-click), preferences, feedback.

Each link carries a token naming the subscriber, the action and the day it was made; a forged,
altered or truncated one gets a 400 page and changes nothing. The unsubscribe link never expires;
the preferences and feedback links expire `web.link_days` after their day (410), and the links a
page offers are dated like the one that led there, so an old email cannot mint fresh ones. A GET
never changes anything (mail scanners follow links); the change is a POST: the mailbox provider's
one-click POST (body `List-Unsubscribe=One-Click`), or the page's own button. A POST whose browser
names another site (Origin, Referer) is refused. Every change is idempotent: the same POST any
number of times at once leaves the same state and answers 200.

The preferences page says what holds the reader's digests back in the terms of `digest status`
(unsubscribed, a bounce, a spam complaint, a pause). Its Resubscribe lifts an unsubscribe, a bounce
or a complaint alike: a click in a browser on a link mailed to the address shows that the address
works and that its reader wants the digest (a lift of a bounce or complaint is recorded as the
reader's, beside the reports). An unsubscribe replaces a bounce, so that the operator's lift of the
bounce cannot mail a reader who asked for nothing more.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from urllib.parse import urlsplit

from flask import Blueprint, Response, abort, current_app, request, url_for

from digest.models import MAX_ROW_ID, Links
from digest.numbers import whole
from digest.tokens import FOREVER, BadToken, Token
from digest.web.common import FREQUENCIES, current, page
from digest.web.guard import same_site
from digest.web.signup import landing_form

blueprint = Blueprint("public", __name__)

PAUSES = [(7, "For a week"), (14, "For two weeks"), (30, "For a month"), (90, "For three months")]


def _token(action: str, token: str, *, erased: bool = False) -> Token:
    """The token's subject, or the 400 (bad) or 410 (expired, or erased unless `erased`) page."""
    try:
        subject = current().signer.check(action, token)
    except BadToken:
        abort(400)
    if action != "unsubscribe" and _good_until(subject) < date.today():
        abort(410)
    if not erased and current().store.is_forgotten(subject.email):  # nothing to show or change, nor to store again
        abort(Response(page("message", heading="Your data was erased",
                            text="Nothing about this address is kept, and it is never mailed again."), 410))
    return subject


def _good_until(subject: Token) -> date:
    """The last day a preferences or feedback link dated like `subject` works (old undated links: from the upgrade)."""
    return _issued(subject) + timedelta(days=current_app.config["LINK_DAYS"])


def _issued(subject: Token) -> date:
    """The day a link counts as made (old undated links: the day the web side first ran this version)."""
    return subject.issued or current_app.config["LEGACY_SINCE"]


def _links(subject: Token) -> Links | None:
    """The links a page offers, dated like the token that led to it; None once those would have expired."""
    if _good_until(subject) < date.today():
        return None
    links = current().links(subject.email, _issued(subject))
    # As paths: this server answers under base_url's path whatever host the request named.
    return replace(links, unsubscribe=urlsplit(links.unsubscribe).path, preferences=urlsplit(links.preferences).path,
                   feedback=urlsplit(links.feedback).path)


def _same_site_or_403() -> None:
    if not same_site():
        abort(403)


@blueprint.app_errorhandler(400)
def bad_link(_error: Exception) -> tuple[str, int]:
    return page("message", heading="This link is not valid",
                text="It may have been cut short or changed. Use the link in your latest email."), 400


@blueprint.app_errorhandler(403)
def other_site(_error: Exception) -> tuple[str, int]:
    return page("message", heading="Not from this site",
                text="This request came from another web site. Open the link from your email instead."), 403


@blueprint.app_errorhandler(410)
def expired(_error: Exception) -> tuple[str, int]:
    return page("message", heading="This link has expired",
                text="Links to preferences and feedback work for a while after each email. "
                     "Use the links in your latest email."), 410


@blueprint.app_errorhandler(404)
def not_found(_error: Exception) -> tuple[str, int]:
    return page("message", heading="Not found", text="There is nothing at this address."), 404


@blueprint.get("/")
def landing() -> Response | str:
    """What `digest serve` says it serves on: the signup form when signups are open, else a line saying what this
    server is (the links in the emails are what it answers)."""
    if current().config.signup.enabled:
        return landing_form(request.path.rstrip("/") + "/subscribe")
    return page("landing")


@blueprint.get("/unsubscribe/<token>")
def unsubscribe_page(token: str) -> str:
    """A confirmation page: a GET (a person, or a scanner following the link) unsubscribes nobody."""
    subject = _token("unsubscribe", token)
    links = _links(subject)
    return page("unsubscribe", email=subject.email, done=False, action=request.path,
                preferences_url=links.preferences if links else None)


@blueprint.post("/unsubscribe/<token>")
def unsubscribe(token: str) -> str:
    """RFC 8058 one-click (body `List-Unsubscribe=One-Click`) or the page's button: unsubscribe at once."""
    subject = _token("unsubscribe", token)
    _same_site_or_403()
    if request.form.get("List-Unsubscribe") != "One-Click":
        abort(400)  # RFC 8058: a POST without this body is not a one-click unsubscribe (a scanner, a prefetch)
    current().store.unsubscribe(subject.email)
    links = _links(subject)
    # No dead end: resubscribe, or pause instead (the preferences page's own forms); once this email's preferences
    # link has expired (an old email: it mints no fresh one), the signup page instead, where it is open.
    again = not links and current().config.signup.enabled
    return page("unsubscribe", email=subject.email, done=True, resubscribe_url=links.preferences if links else None,
                pauses=PAUSES, signup_url=request.path.rsplit("/unsubscribe/", 1)[0] + "/subscribe" if again else None)


@blueprint.route("/preferences/<token>", methods=["GET", "POST"])
def preferences(token: str) -> str | Response:
    """Pause for a while, change how often, or resubscribe (or pause instead, once unsubscribed)."""
    subject = _token("preferences", token)
    email, app = subject.email, current()
    if request.method == "POST":
        _same_site_or_403()
    message = _apply(email, request.form) if request.method == "POST" else ""
    prefs = app.store.preference(email)
    profile = app.profiles.roster().find(email)
    frequency = (prefs.frequency if prefs and prefs.frequency else profile.frequency if profile else "daily")
    paused = prefs.paused_until if prefs and prefs.paused_until and prefs.paused_until >= date.today() else None
    reason = app.store.suppressed_among([email]).get(email.lower())
    held = held_back(reason) if reason is not None else None
    links = _links(subject)
    # the welcome page's dozen papers to rate, with the reader's feedback token (as the confirmation leads there)
    base = request.path.rsplit("/preferences/", 1)[0]
    rate_url = (f"{base}/welcome/{urlsplit(links.feedback).path.rsplit('/', 1)[1]}"
                if links and links.feedback and reason is None else None)
    return page("preferences", email=email, message=message, action=request.path, frequency=frequency,
                rate_url=rate_url,
                frequency_label=dict(FREQUENCIES).get(frequency, frequency).lower(), frequencies=FREQUENCIES,
                pauses=PAUSES, paused_until=paused, unsubscribed=reason is not None, held=held,
                unsubscribe_url=links.unsubscribe if links else "", forget_url=f"{request.path}/forget",
                # the archive's link dated like this page's (it expires with it); the feed's, the same for good
                archive_url=url_for("feeds.archive", token=app.signer.make("archive", email, _issued(subject))),
                feed_url=None if reason else url_for("feeds.feed", token=app.signer.make("feed", email, FOREVER)))


@blueprint.route("/preferences/<token>/forget", methods=["GET", "POST"])
def forget(token: str) -> str:
    """Erase my data: the GET asks (with what it means), the POST erases (as `digest subscribers forget`)."""
    subject = _token("preferences", token, erased=True)
    done = current().store.is_forgotten(subject.email)  # a second POST (or a reload) finds it done
    if request.method == "POST" and not done:
        _same_site_or_403()
        from digest.subscribers.privacy import forget as erase

        erase(current(), subject.email)
        done = True
    return page("forget", email=subject.email, action=request.path, done=done)


def held_back(reason: str) -> str:
    """Why no digest goes to the reader, in the words the preferences page uses for `digest status`'s reasons."""
    kind = reason.partition(":")[0]
    if kind == "unsubscribed":
        return "unsubscribed"
    if kind == "bounced":
        return "held back: mail to this address bounced"
    if kind == "complaint":
        return "unsubscribed: a digest was reported as spam from this address"
    return "held back"


def _resubscribe(email: str) -> str:
    """The Resubscribe button: lift the reader's unsubscribe, or the bounce or complaint that holds their digests
    back (a click here, from a link mailed to the address, shows that it works and wants them); the message says
    what holds now, as `digest status` does."""
    store = current().store
    lifted = store.resubscribe(email)
    held = store.suppressed_among([email]).get(email.lower())
    if held is not None:  # nothing a reader may lift (none today: an erased address has no page)
        return f"You are still not subscribed ({held_back(held)})."
    prefs = store.preference(email)
    paused = prefs.paused_until if prefs and prefs.paused_until and prefs.paused_until >= date.today() else None
    said = "Welcome back: you are subscribed again." if lifted is not None else "You are subscribed."
    if lifted is not None and lifted.startswith("bounced"):
        said += " Mail to this address had bounced: if the next digest bounces too, it is held back again."
    elif lifted is not None and lifted.startswith("complaint"):
        said += " A digest had been reported as spam from this address: that no longer holds your digests back."
    if paused:
        said += f" Paused until {paused:%A %d %B %Y}: resume to get the next digest as usual."
    return said


def _apply(email: str, form: dict[str, str]) -> str:
    """Carry out one preferences form; the message says what changed."""
    store, action = current().store, form.get("do", "")
    if action == "resubscribe":
        return _resubscribe(email)
    if action == "frequency" and form.get("frequency") in dict(FREQUENCIES):
        store.set_preference(email, frequency=form["frequency"])
        return f"Saved: {dict(FREQUENCIES)[form['frequency']].lower()}."
    days = whole(form.get("days", ""))
    if action in ("pause", "pause-instead") and days in dict(PAUSES):
        until = date.today() + timedelta(days=days)
        store.set_preference(email, paused_until=until)
        if action == "pause-instead":  # of the unsubscribe just done: subscribed again, from `until` on
            store.resubscribe(email)
            held = store.suppressed_among([email]).get(email.lower())
            if held is not None:
                return f"Paused until {until:%A %d %B %Y}, but still not subscribed ({held_back(held)})."
            return f"Subscribed again, and paused until {until:%A %d %B %Y}."
        return f"Paused until {until:%A %d %B %Y}."
    if action == "resume":
        store.set_preference(email, paused_until=None)
        return "Resumed: your next digest goes out as usual."
    abort(400)


@blueprint.get("/view/<token>")
def view(token: str) -> Response:
    """"View in browser": the token's subscriber's digest of the token's day, rendered as it was mailed.

    Composed again from the store like a preview: the papers received before that day are left out as they
    were then. The link expires like the preferences link; a token of the old, undated kind names no digest.
    """
    subject = _token("view", token)
    if subject.issued is None:
        abort(400)
    return mailed(subject.email, subject.issued)


def mailed(email: str, day: date) -> Response:
    """`email`'s digest of `day` as it was mailed (composed again, like a preview); 404 once not a subscriber."""
    app = current()
    subscriber = app.store.subscribers_by_email([email]).get(email)  # one row, not the whole roster
    if subscriber is None:
        abort(404)
    composed = app.composer.compose(subscriber, day, app.composer.pool(day))
    return Response(composed.rendered.html, content_type="text/html; charset=utf-8")


@blueprint.route("/feedback/<token>/<int:paper_id>/<any(more, less):direction>", methods=["GET", "POST"])
def feedback(token: str, paper_id: int, direction: str) -> str:
    """'More / less like this': the GET asks, the POST records (the same signal as `digest feedback`)."""
    subject = _token("feedback", token)
    app = current()
    paper = app.store.paper(paper_id) if paper_id <= MAX_ROW_ID else None
    if paper is None:
        abort(404)
    done = request.method == "POST"
    if done:
        _same_site_or_403()
        app.store.add_feedback(subject.email, paper_id, 1 if direction == "more" else -1)
    links = _links(subject)
    return page("feedback", paper=paper, more=direction == "more", done=done, action=request.path,
                preferences_url=links.preferences if links else None)
