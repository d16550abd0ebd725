"""Operator console: the subscribers a page at a time (search, filter by state), each one's standing and actions,
and any digest of any date rendered exactly as it will be sent.

Behind HTTP basic auth with the operator password (any user name) on every interface, loopback
included. Only when the login was turned off (`web.operator_login = false`, loopback-bound server)
are they open, and then never to a request that came through a proxy. Every form carries a CSRF
token and every POST must bring it back from a same-site page: the browser sends the password by
itself, so another site must not be able to make it post here. The actions call what the CLI's
commands call (`lift_suppression` for `digest subscribers lift`, `send_test` for `send --to`, …).
"""

from __future__ import annotations

import hmac
import os
import time
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, abort, current_app, redirect, request, url_for

from digest import daily, readiness
from digest.errors import DigestError
from digest.models import FIRST_DAY, LAST_DAY
from digest.numbers import whole
from digest.status import SUPPRESSED_LIMIT, shown_address, why_suppressed
from digest.store.console import STATES
from digest.subscribers.profiles import validate
from digest.subscribers.roster import import_one
from digest.web import console
from digest.web.common import CSP, FREQUENCIES, current, from_proxy, page
from digest.web.guard import SAFE_METHODS, same_site

blueprint = Blueprint("operator", __name__)

PAUSES = (7, 14, 30, 90)  # days the console's Pause button offers
HISTORY = 10  # send-log rows shown on a subscriber's page
READINESS_SECONDS = 60  # how long the console keeps what `digest check` finds (its subscribers' check reads the list)


@blueprint.before_request
def authorise() -> Response | None:
    password = current_app.config["OPERATOR_PASSWORD"]
    if password is None:
        if from_proxy() or not current_app.config["OPERATOR_OPEN_OK"]:  # a proxy makes every request look local
            abort(403)
    else:
        auth = request.authorization
        given = auth.password if auth and auth.type == "basic" and auth.password else ""
        if not hmac.compare_digest(given.encode(), password.encode()):
            return Response("operator password required\n", 401,
                            {"WWW-Authenticate": 'Basic realm="paper digest operator"'}, content_type="text/plain")
    if request.method not in SAFE_METHODS:
        given_token = request.form.get("csrf", "")
        if not same_site() or not hmac.compare_digest(given_token.encode(), csrf_token().encode()):
            return Response("this form is out of date or came from another site: reload the page\n", 403,
                            content_type="text/plain")
    return None


def csrf_token() -> str:
    """The token every operator form carries (one per server start)."""
    return hmac.new(current_app.config["CSRF_KEY"], b"operator-form", "sha256").hexdigest()


def _day(text: str | None = None) -> date:
    text = request.values.get("date", "") if text is None else text
    try:
        day = date.fromisoformat(text) if text else date.today()
    except ValueError:
        abort(400)
    if not FIRST_DAY <= day <= LAST_DAY:
        abort(400)
    return day


def _number(name: str, default: int, allowed: range | tuple[int, ...]) -> int:
    text = request.args.get(name, "")
    if not text:
        return default
    number = whole(text)
    if number is None or number not in allowed:
        abort(400)
    return number


def _listing() -> tuple[str, str, int, int]:
    """The list's search, state, page and page size from the query; a bad one is a 400."""
    search, state = request.args.get("q", ""), request.args.get("state", "all")
    if len(search) > console.MAX_SEARCH or state not in STATES:
        abort(400)
    return (search, state, _number("page", 1, range(1, console.MAX_PAGE)),
            _number("size", console.PAGE_SIZE, console.PAGE_SIZES))


@blueprint.get("/")
def index() -> str:
    """A page of subscribers (searched, filtered) with their state on the date, and the console's other parts."""
    app, day = current(), _day()
    search, state, number, size = _listing()
    problems = [str(p) for p in app.profiles.sync().problems]
    found = app.store.console_slice(day, search=search, state=state, offset=(number - 1) * size, limit=size)
    paging = console.Paging(number, size, found.total, found.exact)
    if number > paging.pages:  # past the end (the list shrank since the link was made): the last page
        paging = console.Paging(paging.pages, size, found.total)
        found = app.store.console_slice(day, search=search, state=state, offset=(paging.page - 1) * size, limit=size)
        paging = console.Paging(paging.page, size, found.total, found.exact)
    query = {"date": day.isoformat(), "q": search, "state": state, "size": size}
    runs, workers = console.activity(app)
    return page("admin", day=day, prev_day=day - timedelta(days=1), next_day=day + timedelta(days=1),
                readiness=_readiness(), search=search, state=state, states=STATES, sizes=console.PAGE_SIZES,
                paging=paging,
                page_url=lambda n: _url("operator.index", **query, page=n), back=_back(),
                rows=console.rows(app, found.keys, day), signups=found.signups, counts=console.counts(app, day),
                problems=problems, runs=runs, workers=workers, csrf=csrf_token(), actions=_actions(),
                frequencies=FREQUENCIES,
                held_signups=app.store.held_signups(),
                suppressions=[(shown_address(email), why_suppressed(reason), since)
                              for email, reason, since in app.store.suppression_records(SUPPRESSED_LIMIT)])


def _readiness() -> list[readiness.Finding]:
    """What `digest check` finds for this server as it was started (its bind address, and the port the request came
    to), the sample's readers among the subscribers included; kept READINESS_SECONDS, as that part reads the list."""
    kept = current_app.config.get("READINESS")
    now = time.monotonic()
    if kept is not None and now - kept[0] < READINESS_SECONDS:
        return kept[1]  # type: ignore[no-any-return]
    app = current()
    port = whole(request.environ.get("SERVER_PORT", ""), 1, 65535) or readiness.SERVE_PORT
    serve = readiness.Serve(current_app.config.get("BIND", readiness.SERVE_HOST), port)
    found = [*readiness.check(app.config, os.environ, serve), *readiness.readers(app.store)]
    current_app.config["READINESS"] = (now, found)
    return found


@blueprint.get("/subscriber")
def subscriber() -> str:
    """One subscriber: source, schedule, pause, suppression, the digest of the date, recent sends, and actions."""
    app, day = current(), _day()
    email = request.args.get("email", "")
    app.profiles.sync()
    found = app.store.subscribers_by_email([email]).get(email)
    if found is None:
        abort(404)
    [row] = console.rows(app, (found.email.lower(),), day)
    suppression = app.store.suppression_of(found.email)
    return page("admin-subscriber", day=day, row=row, csrf=csrf_token(), actions=_actions(), back=_back(),
                pauses=PAUSES, since=suppression[1] if suppression else None,
                history=app.store.deliveries_of(found.email, HISTORY), removable=row.source in ("import", "web"),
                done=request.args.get("done", ""), to=request.args.get("to", ""),
                preview_url=_url("operator.preview", subscriber=found.email, date=day.isoformat()),
                index_url=_url("operator.index", date=day.isoformat()))


# -- actions (POST: the password, the CSRF token and a same-site origin are checked before these run) ----------


@blueprint.post("/lift")
def lift() -> Response:
    """Lift a bounce or complaint suppression, recorded as `digest subscribers lift` records it."""
    email = request.form.get("subscriber", "")
    app = current()
    if app.store.lift_suppression(email) is None:
        reason = app.store.suppressed_among([email]).get(email.lower())
        why = (f"its suppression is {why_suppressed(reason)!r}, not a bounce or complaint (an unsubscribe is the "
               "reader's to undo)" if reason else "it is not suppressed")
        return _refused(f"No bounce or complaint suppression of {email} to lift: {why}.")
    return _done("lifted")


@blueprint.post("/pause")
def pause() -> Response:
    """Pause a subscriber's digests for a number of days (what the reader's preferences page does)."""
    email, days = _known(), whole(request.form.get("days", ""))
    if days is None or days not in PAUSES:
        return _refused(f"Pause for one of {', '.join(map(str, PAUSES))} days.")
    current().store.set_preference(email, paused_until=date.today() + timedelta(days=days))
    return _done("paused")


@blueprint.post("/resume")
def resume() -> Response:
    """End a pause: the next digest due goes out."""
    current().store.set_preference(_known(), paused_until=None)
    return _done("resumed")


@blueprint.post("/test")
def test_copy() -> Response:
    """Send a copy of a subscriber's digest of the date to an address, as `digest send --subscriber … --to …`."""
    email, to = _known(), request.form.get("to", "").strip()
    try:
        _, outcome = daily.send_test(current(), _day(request.form.get("date", "")), email, to)  # type: ignore[arg-type]
    except DigestError as exc:
        return _refused(str(exc))
    if outcome.status != "sent":
        return _refused(f"The test copy to {to} was not sent: {outcome.reason or outcome.status}.", 502)
    return _done("test", to=to)


@blueprint.post("/add")
def add() -> Response:
    """Add (or replace) an imported subscriber, checked as an import checks a CSV row."""
    form = request.form
    data: dict[str, Any] = {k: form.get(k, "").strip() for k in ("email", "name", "timezone", "send_at", "frequency")}
    data = {k: v for k, v in data.items() if v}
    keywords = [k.strip() for k in form.get("keywords", "").split(";") if k.strip()]
    data["interests"] = [{"name": form.get("interest", "").strip() or "Interests", "keywords": keywords}] \
        if keywords else []
    app = current()
    found, problems = validate(data, "the add form", lambda _key, _n: 0)
    if found is not None:
        problems += import_one(app.store, found, "the add form", app.analysis.interests)
    if problems:
        return _refused("; ".join(p.message for p in problems))
    return _done("added", email=found.email)  # type: ignore[union-attr]


@blueprint.post("/remove")
def remove() -> Response:
    """Remove an imported (or web) subscriber, as `digest subscribers remove`; a profile file's is the file's."""
    email = request.form.get("subscriber", "")
    store = current().store
    if not (store.remove_subscriber(email, "import") or store.remove_subscriber(email, "web")):
        owner = store.owners([email.lower()]).get(email.lower())
        where = f": it is defined by the profile file {owner[1]}; delete that file" if owner else ""
        return _refused(f"No imported subscriber {email}{where}.")
    return _done("removed", leave=True)


def _actions() -> dict[str, str]:
    """The console's URLs the templates link and post to."""
    return {name: url_for(f"operator.{name}") for name in ("index", "subscriber", "preview", "lift", "pause",
                                                           "resume", "add", "remove")} | {
        "test": url_for("operator.test_copy")}


def _known() -> str:
    """The subscriber a form names; 404 when there is none."""
    email = request.form.get("subscriber", "")
    if current().store.subscribers_by_email([email]).get(email) is None:
        abort(404)
    return email


def _back() -> str:
    """This page's own path and query: where a form on it returns to."""
    return request.full_path.rstrip("?")


def _done(what: str, *, leave: bool = False, **extra: str) -> Response:
    """Back to the page the form was on (a subscriber's page says what was done); only to a page of the console."""
    back = request.form.get("back", "")
    if not back.startswith("/admin/") or "//" in back or "\\" in back:
        back = url_for("operator.index")
    if leave and back.startswith("/admin/subscriber"):
        back = url_for("operator.index")
    elif back.startswith("/admin/subscriber") or "email" in extra:
        email = extra.pop("email", request.form.get("subscriber", ""))
        back = _url("operator.subscriber", email=email, date=request.form.get("date", ""), done=what, **extra)
    response = redirect(back, 303)
    response.autocorrect_location_header = False
    return response


def _refused(text: str, status: int = 400) -> Response:
    return Response(page("message", heading="Not done", text=text), status, content_type="text/html; charset=utf-8")


def _url(endpoint: str, **params: object) -> str:
    """A console URL with these query parameters (empty ones left out)."""
    query = urlencode({k: v for k, v in params.items() if v not in ("", None)})
    return url_for(endpoint) + (f"?{query}" if query else "")


# -- preview ---------------------------------------------------------------------


def _composed(email: str, day: date):  # noqa: ANN202 (a models.Composed)
    app = current()
    app.profiles.sync()
    subscriber = app.store.subscribers_by_email([email]).get(email)
    if subscriber is None:
        abort(404)
    return subscriber, app.composer.compose(subscriber, day, app.composer.pool(day))


@blueprint.get("/preview")
def preview() -> Response:
    """Subject, preheader, the HTML at desktop and phone widths, and the text, side by side."""
    email, day = request.args.get("subscriber", ""), _day()
    subscriber, composed = _composed(email, day)
    record = current().store.delivery(subscriber.email, day)
    html = page("preview", subscriber=subscriber, day=day, rendered=composed.rendered, digest=composed.digest,
                quiet_policy=current().config.delivery.quiet_days,
                delivery=f"{record.status} ({record.detail})" if record and record.detail else
                (record.status if record else ""),
                index_url=_url("operator.index", date=day.isoformat()),
                subscriber_url=_url("operator.subscriber", email=subscriber.email, date=day.isoformat()),
                html_url=_url("operator.preview_html", subscriber=subscriber.email, date=day.isoformat()))
    response = Response(html, content_type="text/html; charset=utf-8")
    response.headers["Content-Security-Policy"] = CSP + "; frame-src 'self'"
    return response


@blueprint.get("/preview.html")
def preview_html() -> Response:
    """The digest's HTML part alone, for the preview's frames (same-origin framing only)."""
    _, composed = _composed(request.args.get("subscriber", ""), _day())
    response = Response(composed.rendered.html, content_type="text/html; charset=utf-8")
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Content-Security-Policy"] = ("default-src 'none'; style-src 'unsafe-inline'; "
                                                   "img-src https: data:; frame-ancestors 'self'")
    return response
