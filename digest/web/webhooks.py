"""`POST /webhooks/<provider>`: email providers' bounce and complaint events, recorded as `digest bounces` does.

Each provider's endpoint answers only once its secret is in the environment (the variable its
`webhooks.*_env` setting names); until then it is 404. A request whose signature (or, for Postmark,
basic-auth password) does not check out gets 401 and changes nothing. Each event is matched and
recorded in its own transaction under the provider's event id, so a retried delivery is answered 200
and counted once; one event that cannot be recorded does not stop the others.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Mapping
from datetime import date

from flask import Blueprint, Flask, Response, abort, current_app, request

from .. import bounces, webhooks
from .common import current

log = logging.getLogger("digest.webhooks")
blueprint = Blueprint("webhooks", __name__)


def secrets_from(settings: object, environ: Mapping[str, str]) -> dict[str, str]:
    """Each provider whose secret is set in the environment, with its secret (the others stay off)."""
    found = {}
    for provider in webhooks.PROVIDERS:
        name = getattr(settings, f"{provider}_env", "")
        if name and environ.get(name, "").strip():
            found[provider] = environ[name].strip()
    return found


def install(web: Flask, settings: object, url_prefix: str | None) -> None:
    """Answer the webhooks of the providers configured in `settings` (the `webhooks` section)."""
    web.config["WEBHOOK_SECRETS"] = secrets_from(settings, os.environ)
    web.register_blueprint(blueprint, url_prefix=url_prefix)


def _text(body: str, status: int, **headers: str) -> Response:
    return Response(body + "\n", status, headers, content_type="text/plain")


@blueprint.post("/webhooks/<provider>")
def receive(provider: str) -> Response:
    secret = current_app.config["WEBHOOK_SECRETS"].get(provider)
    if secret is None:
        abort(404)
    if provider == "postmark" and not _basic_password_is(secret):
        return _text("webhook password required", 401, **{"WWW-Authenticate": 'Basic realm="paper digest webhooks"'})
    body = request.get_data(cache=False)
    try:
        reports = webhooks.PROVIDERS[provider](body, request.headers, secret)
    except webhooks.BadSignature as exc:
        log.warning("%s webhook refused: %s", provider, exc)
        return _text(f"bad signature: {exc}", 401)
    except webhooks.BadEvent as exc:
        log.warning("%s webhook unreadable: %s", provider, exc)
        return _text(f"unreadable event: {exc}", 400)
    app = current()
    matcher, soft = bounces.policy(app, date.today())
    counts = {"recorded": 0, "seen": 0}
    for report in reports:
        outcome, made = bounces.record(app.store, report, matcher, soft)
        counts["seen" if made is None else "recorded"] += 1
        for email, reason in made or []:
            log.info("suppressed %s: %s (%s webhook)", email, reason, provider)
        if outcome == "unmatched":
            log.warning("%s webhook: a %s event about %s names no digest of ours", provider,
                        report.failures[0].kind, report.failures[0].recipient or "(no recipient)")
    return _text(f"recorded {counts['recorded']}, already recorded {counts['seen']}", 200)


def _basic_password_is(secret: str) -> bool:
    auth = request.authorization
    given = auth.password if auth and auth.type == "basic" and auth.password else ""
    return hmac.compare_digest(given.encode(), secret.encode())
