"""`POST /webhooks/<provider>`: email providers' bounce and complaint events, recorded as `digest bounces` does.

Each provider's endpoint answers only once its secret is in the environment (the variable its
`webhooks.*_env` setting names), Amazon SES's once `webhooks.ses_topics` names its SNS topics; until
then it is 404. A request whose signature (or, for Postmark,
basic-auth password) does not check out gets 401 and changes nothing; a Mailgun request whose
signature's token an earlier request took (a replay, perhaps with other events) gets 406, which
Mailgun takes as refused for good, and changes nothing. Each event is matched and recorded in its
own transaction under the provider's event id, so a retried delivery is answered 200 and counted
once; one event that cannot be recorded does not stop the others.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Mapping
from datetime import UTC, date, datetime

import httpx
from flask import Blueprint, Flask, Response, abort, current_app, request

from digest.bounces import intake, webhooks
from digest.bounces.reports import Report
from digest.errors import DigestError
from digest.web.common import current

MAX_BODY_BYTES = 1024 * 1024  # a webhook's body: an SNS message is up to 256 KB, a SendGrid batch of 1,000 events more
REPLAYED = 406  # a signature's token used again: Mailgun takes 406 as refused for good and does not retry

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
    web.config["SES_TOPICS"] = tuple(getattr(settings, "ses_topics", ()))
    web.config["SNS_ORIGIN"] = ("https", webhooks.SNS_HOST)  # tests alone point it at a local server
    web.config["SNS_CERTS"] = {}
    web.register_blueprint(blueprint, url_prefix=url_prefix)


def _text(body: str, status: int, **headers: str) -> Response:
    return Response(body + "\n", status, headers, content_type="text/plain")


@blueprint.post("/webhooks/<provider>")
def receive(provider: str) -> Response:
    request.max_content_length = MAX_BODY_BYTES  # (the other routes keep the app's 64 KiB)
    if provider == "ses":
        return _ses()
    secret = current_app.config["WEBHOOK_SECRETS"].get(provider)
    if secret is None:
        abort(404)
    if provider == "postmark" and not _basic_password_is(secret):
        return _text("webhook password required", 401, **{"WWW-Authenticate": 'Basic realm="paper digest webhooks"'})
    try:
        signed = webhooks.PROVIDERS[provider](request.get_data(cache=False), request.headers, secret)
    except (webhooks.BadSignature, webhooks.BadEvent) as exc:
        return _refused(provider, exc)
    if not signed.once:
        return _record(provider, signed.reports)
    store = current().store
    if not store.take_webhook_token(signed.once, signed.once_until or datetime.now(UTC).replace(tzinfo=None)):
        log.warning("%s webhook refused: its signature's token was used already (a replay)", provider)
        return _text("refused: this signature's token was used already (a replay)", REPLAYED)
    try:
        return _record(provider, signed.reports)
    except BaseException:
        store.give_back_webhook_token(signed.once)  # not recorded: the provider's retry may use it
        raise


def _refused(provider: str, exc: webhooks.BadSignature | webhooks.BadEvent) -> Response:
    log.warning("%s webhook refused: %s", provider, exc)
    if isinstance(exc, webhooks.BadSignature):
        return _text(f"bad signature: {exc}", 401)
    return _text(f"unreadable event: {exc}", 400)


def _record(provider: str, reports: list[Report]) -> Response:
    """Match and record each event in its own transaction, as `digest bounces` does a mailbox's reports."""
    app = current()
    matcher, soft = intake.policy(app, date.today())
    counts = {"recorded": 0, "seen": 0}
    for report in reports:
        done = intake.record(app.store, report, matcher, soft)
        counts["seen" if done.made is None else "recorded"] += 1
        for email, reason in done.made or []:
            log.info("suppressed %s: %s (%s webhook)", email, reason, provider)
        if done.outcome == "unmatched" and done.made is not None:
            log.warning("%s webhook: event %s: %s", provider, report.key, done.note)
    return _text(f"recorded {counts['recorded']}, already recorded {counts['seen']}", 200)


# -- Amazon SES via SNS ---------------------------------------------------------------------------------------------

SNS_TIMEOUT = 10  # seconds to fetch a signing certificate or follow a subscription's confirmation link


def _ses() -> Response:
    topics = current_app.config["SES_TOPICS"]
    if not topics:
        abort(404)
    try:
        message = webhooks.sns_message(request.get_data(cache=False), topics, _certificate)
        if message["Type"] == "SubscriptionConfirmation":
            return _confirm(message)
        if message["Type"] == "UnsubscribeConfirmation":
            log.warning("ses webhook: SNS says %s unsubscribed this endpoint", message.get("TopicArn"))
            return _text("noted", 200)
        reports = webhooks.ses(message)
    except (webhooks.BadSignature, webhooks.BadEvent) as exc:
        return _refused("ses", exc)
    except _Unavailable as exc:  # our side could not check it now: SNS retries a 5xx
        log.warning("ses webhook deferred: %s", exc)
        return _text(str(exc), 503)
    return _record("ses", reports)


class _Unavailable(DigestError):
    """SNS's certificate or confirmation link could not be reached (answered 503, so SNS retries)."""


def _sns_url_ok(url: str, suffix: str = "") -> bool:
    scheme, host = current_app.config["SNS_ORIGIN"]
    return webhooks.sns_url_ok(url, scheme=scheme, host=host, suffix=suffix)


def _certificate(url: str) -> bytes:
    """SNS's signing certificate at `url` (only ever one of SNS's own), fetched once per server."""
    cache: dict[str, bytes] = current_app.config["SNS_CERTS"]
    if url in cache:
        return cache[url]
    if not _sns_url_ok(url, ".pem"):
        raise webhooks.BadSignature(f"SigningCertURL {url[:200]!r} is not SNS's (https on sns.<region>.amazonaws.com)")
    body = _get(url)
    if len(body) > webhooks.MAX_CERT_BYTES:
        raise webhooks.BadSignature(f"the signing certificate is over {webhooks.MAX_CERT_BYTES} bytes")
    cache[url] = body
    return body


def _confirm(message: dict[str, object]) -> Response:
    """Follow a verified SubscriptionConfirmation's link (SNS's own only), so the topic starts posting here."""
    url = str(message.get("SubscribeURL", ""))
    if not _sns_url_ok(url):
        raise webhooks.BadSignature(f"SubscribeURL {url[:200]!r} is not SNS's")
    _get(url)
    log.warning("ses webhook: subscribed to %s", message.get("TopicArn"))
    return _text("subscribed", 200)


def _get(url: str) -> bytes:
    try:
        with httpx.stream("GET", url, timeout=SNS_TIMEOUT, follow_redirects=False) as response:
            if response.status_code != 200:
                raise _Unavailable(f"{url[:200]} answered {response.status_code}")
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > webhooks.MAX_CERT_BYTES:
                    break
            return body
    except httpx.HTTPError as exc:
        raise _Unavailable(f"{url[:200]}: {exc}") from exc


def _basic_password_is(secret: str) -> bool:
    auth = request.authorization
    given = auth.password if auth and auth.type == "basic" and auth.password else ""
    return hmac.compare_digest(given.encode(), secret.encode())
