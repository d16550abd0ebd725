"""Operator pages: every subscriber and any digest of any date, rendered exactly as it will be sent.

Behind HTTP basic auth with the operator password (any user name) on every interface, loopback
included. Only when the login was turned off (`web.operator_login = false`, loopback-bound server)
are they open, and then never to a request that came through a proxy. Every form carries a CSRF
token and every POST must bring it back from a same-site page: the browser sends the password by
itself, so another site must not be able to make it post here.
"""

from __future__ import annotations

import hmac
from datetime import date, timedelta

from flask import Blueprint, Response, abort, current_app, redirect, request, url_for

from ..models import FIRST_DAY, LAST_DAY
from ..status import SUPPRESSED_LIMIT, shown_address, why_suppressed
from ..subscribers import Roster
from .common import CSP, current, from_proxy, page
from .guard import SAFE_METHODS, same_site

blueprint = Blueprint("operator", __name__)


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


def _day() -> date:
    try:
        day = date.fromisoformat(request.args.get("date", "")) if request.args.get("date") else date.today()
    except ValueError:
        abort(400)
    if not FIRST_DAY <= day <= LAST_DAY:
        abort(400)
    return day


@blueprint.get("/")
def index() -> str:
    """The subscribers (valid or not, with their state on the date) and the recent runs."""
    app, day = current(), _day()
    roster = app.roster()
    return page("admin", day=day, prev_day=day - timedelta(days=1), next_day=day + timedelta(days=1),
                rows=_rows(roster, day), problems=[str(p) for p in roster.problems],
                runs=app.store.recent_runs(15), csrf=csrf_token(), lift_url=url_for("operator.lift"),
                held_signups=app.store.held_signups(),
                suppressions=[(shown_address(email), why_suppressed(reason), since)
                              for email, reason, since in app.store.suppression_records(SUPPRESSED_LIMIT)],
                suppressed_total=app.store.count_suppressed())


@blueprint.post("/lift")
def lift() -> Response:
    """Lift a bounce suppression (the operator fixed the address), then back to the list."""
    current().store.lift_bounce(request.form.get("subscriber", ""))
    response = redirect(url_for("operator.index"), 303)
    response.autocorrect_location_header = False
    return response


def _rows(roster: Roster, day: date) -> list[dict[str, object]]:
    app = current()
    suppressed = app.store.suppressed()
    sent = {r.subscriber.lower(): r for r in app.store.deliveries_on(day)}
    rows: list[dict[str, object]] = []
    for sub in roster.subscribers:
        record = sent.get(sub.email.lower())
        state = record.status if record else "suppressed" if sub.email.lower() in suppressed else "not sent"
        detail = (record.detail if record else why_suppressed(suppressed.get(sub.email.lower(), ""))) or ""
        rows.append({"email": sub.email, "name": sub.name, "valid": True, "state": state, "detail": detail,
                     "bounced": suppressed.get(sub.email.lower(), "").startswith("bounced"),
                     "schedule": f"{sub.frequency} at {sub.send_at:%H:%M} {sub.timezone}",
                     "topics": ", ".join(i.name for i in sub.interests) or "(trending)",
                     "preview_url": url_for("operator.preview", subscriber=sub.email, date=day.isoformat())})
    for path in roster.invalid_files:
        rows.append({"email": path, "name": "", "valid": False, "state": "invalid profile", "detail": "",
                     "bounced": False, "schedule": "", "topics": "", "preview_url": ""})
    return rows


def _composed(email: str, day: date):  # noqa: ANN202 (a pipeline.Composed)
    app = current()
    subscriber = app.roster().find(email)
    if subscriber is None:
        abort(404)
    return subscriber, app.compose(subscriber, day, app.pool(day))


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
                index_url=url_for("operator.index", date=day.isoformat()),
                html_url=url_for("operator.preview_html", subscriber=subscriber.email, date=day.isoformat()))
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
