"""The signup pages: `/subscribe` (the form), `/confirm/<token>` (a button, then the welcome with today's digest).

The work is done by `digest.signup.signups.Signups`; this module turns HTTP into its calls and its refusals into pages.
The form is protected against cross-site posts twice: the Origin/Referer check every POST here passes
(`guard.same_site`), and a double-submit CSRF token (a random cookie, SameSite=Strict, and a form field
holding its keyed hash). A GET of a confirmation link changes nothing (mail scanners follow links); the
button's POST confirms. A used link of a reader still subscribed leads on to their papers to rate and preferences.
"""

from __future__ import annotations

import hmac
import re
import secrets
from contextlib import nullcontext
from datetime import date
from urllib.parse import urlsplit

from flask import Blueprint, Response, abort, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from digest.signup.onboarding import offered
from digest.signup.signups import LIBRARY_INTEREST, Confirmed, Form, Invalid, Refused, Signups, rating_url, zones
from digest.subscribers.libraries import library_interest
from digest.web import access
from digest.web.backlog import Ticket
from digest.web.common import CSP, FREQUENCIES, current, page, zone_groups
from digest.web.guard import host_name, same_site
from digest.web.uploads import (
    BUSY,
    BUSY_RETRY,
    MAX_BODY_BYTES,
    allow_large_body,
    backlog,
    describe,
    lookup_said,
    upload_of,
)

blueprint = Blueprint("signup", __name__)

COOKIE = "digest_form"
_COOKIE_VALUE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")
SCRIPT = """// Fills in the reader's time zone from the browser; they can still change it.
(function () {
  var field = document.getElementById("timezone");
  if (!field || field.dataset.given) { return; }
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    for (var i = 0; i < field.options.length; i++) {  /* only a zone the list offers: else UTC stays chosen */
      if (field.options[i].value === zone) { field.value = zone; break; }
    }
  } catch (e) { /* an old browser: UTC stays */ }
})();
"""


def room() -> Signups:
    """The signup room of this web application (made on first use)."""
    found = current_app.config.get("SIGNUPS")
    if found is None:
        found = current_app.config["SIGNUPS"] = Signups(current(), dict(FREQUENCIES))
    return found  # type: ignore[no-any-return]


@blueprint.before_request
def _enabled() -> None:
    if not current().config.signup.enabled:
        abort(404)


def client_ip() -> str:
    """The reader's address: the connecting one, or (behind `signup.proxy_hops` proxies) the one they forwarded."""
    found = access.client(request.environ, current().config.signup.proxy_hops)
    return "" if found == "-" else found


def _refused(exc: Refused) -> Response:
    if isinstance(exc, Confirmed):  # a used link of a reader still subscribed: on to their pages, not a dead end
        return Response(page("confirmed", subscriber=exc.subscriber, frequency=room().describe(exc.subscriber),
                             rate_url=urlsplit(rating_url(exc.links)).path,
                             preferences_url=urlsplit(exc.links.preferences).path),
                        content_type="text/html; charset=utf-8")
    response = Response(page("message", heading=exc.heading, text=exc.text), exc.status,
                        content_type="text/html; charset=utf-8")
    if exc.retry_after:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _form(form: Form, problems: list[str], status: int, *, given: bool, action: str | None = None) -> Response:
    """The signup page (with the reader's values and what is wrong, after a POST), and its CSRF cookie; `action`:
    where the form posts (default: here)."""
    cookie = request.cookies.get(COOKIE, "")
    if not _COOKIE_VALUE.match(cookie):
        cookie = secrets.token_urlsafe(24)
    action = action or request.path
    zone = form.timezone if form.timezone in zones() else "UTC"  # (a zone typed outside the list is not offered back)
    html = page("subscribe", topics=current().config.topics, frequencies=FREQUENCIES, zones=zone_groups(zone),
                zone=zone, values=form, problems=problems, csrf=room().form_token(cookie), action=action, given=given,
                script_url=action.rsplit("/", 1)[0] + "/subscribe.js")
    response = Response(html, status, content_type="text/html; charset=utf-8")
    base = urlsplit(current().newsletter.base_url)
    response.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict", path=base.path.rstrip("/") or "/",
                        secure=host_name(request.host) == (base.hostname or "") and base.scheme == "https")
    response.headers["Content-Security-Policy"] = CSP + "; script-src 'self'"
    return response


@blueprint.get("/subscribe")
def subscribe_page() -> Response:
    """The form: email, name, topics from the catalogue, own words, how often, time zone."""
    return _form(Form(), [], 200, given=False)


def landing_form(action: str) -> Response:
    """The signup form as the landing page (`/`), posting to `action` (the /subscribe beside it)."""
    return _form(Form(), [], 200, given=False, action=action)


@blueprint.get("/subscribe.js")
def subscribe_script() -> Response:
    return Response(SCRIPT, content_type="text/javascript; charset=utf-8")


@blueprint.post("/subscribe")
def subscribe() -> Response:
    """A form sent: the same "check your inbox" page for every address; a clear page for anything refused.

    The form may carry a library (a file, or pasted ids), so its body may be as large as a library upload."""
    if not same_site():
        abort(403)
    allow_large_body(request)
    try:
        form = Form.of(request.form, upload_of(request))
    except RequestEntityTooLarge:
        return _form(Form.of({}), [f"Your library is larger than {MAX_BODY_BYTES // 2**20} MB, more than we take: "
                                   "export one collection, or leave out the files and notes."], 413, given=True)
    cookie = request.cookies.get(COOKIE, "")
    token = request.form.get("csrf", "")
    if not cookie or not hmac.compare_digest(token.encode(), room().form_token(cookie).encode()):
        return _form(form, ["This form had expired. Please check it and send it again."], 403, given=True)
    # A form with a library needs a place for the work on it (made while the reader finds the email, for the welcome
    # page's preview) before anything is recorded; a full queue: 429, and nothing is.
    with backlog().reserve(form.email) if form.library is not None else nullcontext(Ticket("")) as ticket:
        if ticket is None:
            return _refused(Refused(429, *BUSY, retry_after=BUSY_RETRY))
        try:
            library = room().request(form, client_ip())
        except Invalid as exc:
            return _form(form, exc.problems, 422, given=True)
        except Refused as exc:
            return _refused(exc)
        looked = ""
        if library:
            given = library_interest(LIBRARY_INTEREST, library)
            looked, ask = lookup_said(given, library.entries, "your library page, linked from every digest, says "
                                      "what was found")
            ticket.add([given], look_up=ask)
    return Response(page("subscribe-sent", email=form.email, hours=current().config.signup.confirm_hours,
                         library_read=describe(library) if library else "", library_lookup=looked,
                         library_problems=library.problems if library else ()),
                    content_type="text/html; charset=utf-8")


@blueprint.get("/confirm/<token>")
def confirm_page(token: str) -> Response:
    """What the signup asks for, and a button: a GET (a person, or a scanner following the link) confirms nothing."""
    try:
        link = room().link(token)
        subscriber = room().pending(link)
    except Refused as exc:
        return _refused(exc)
    return Response(page("confirm", subscriber=subscriber, frequency=room().describe(subscriber),
                         action=request.path), content_type="text/html; charset=utf-8")


@blueprint.post("/confirm/<token>")
def confirm(token: str) -> Response:
    """The button: the subscription starts, the welcome email goes, and the page shows today's digest."""
    if not same_site():
        abort(403)
    try:
        welcome = room().confirm(room().link(token), client_ip())
    except Refused as exc:
        return _refused(exc)
    links = welcome.links
    # The papers to rate (`signup.onboarding`), their forms posting to /welcome/<the reader's feedback token>/rate.
    feedback_token = urlsplit(links.feedback).path.rsplit("/", 1)[1]
    rate_url = f"{request.path.rsplit('/confirm/', 1)[0]}/welcome/{feedback_token}/rate"
    html = page("welcome", subscriber=welcome.subscriber, updated=welcome.updated, preview=welcome.preview,
                frequency=room().describe(welcome.subscriber), problems=welcome.problems, confirmed=True,
                preferences_url=urlsplit(links.preferences).path, unsubscribe_url=urlsplit(links.unsubscribe).path,
                choices=offered(current(), welcome.subscriber, date.today()), rate_url=rate_url,
                script_url=f"{request.path.rsplit('/confirm/', 1)[0]}/welcome.js")
    response = Response(html, content_type="text/html; charset=utf-8")
    # (the digest's frame, and the script of the papers to rate: web/welcome.py, which posts their marks here)
    response.headers["Content-Security-Policy"] = CSP + "; frame-src 'self'; script-src 'self'; connect-src 'self'"
    return response
