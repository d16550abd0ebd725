"""A reader's digests outside the inbox: a private Atom feed (`/feed/<token>`) and a web archive (`/archive/<token>`).

The feed carries the papers of the reader's last FEED_DIGESTS digests, at most FEED_ENTRIES of them, as the send
log recorded them (`received`): one entry per paper (its title, a link to its page, the source's AI summary, else
the one a model made (`[summaries]`), and the abstract, its first FEED_AUTHORS authors, `updated` the day of the
digest that carried it). The reasons a digest gave ("Why") are not in the send log, and composing each past digest
again on every poll would cost a digest's composition per digest: the feed goes without them, the archive shows
them. A poll costs three queries (the suppression list, the papers, their kept summaries).

The feed's address is the same for good (its token is made for the day `tokens.FOREVER`, whatever link led to
it) and never expires, as a feed reader keeps it for years, like the unsubscribe link; it answers 410 once the
address is suppressed (unsubscribed, bounced, complained, erased). Its ids are name-based UUIDs under a namespace
derived from the links' secret, so they are stable per reader and per (reader, paper) and name nobody.
Caching: the feed is private (the token is the reader's key), so `Cache-Control: private, max-age=FEED_MAX_AGE`
instead of the pages' `no-store` (a feed reader may keep it an hour, a shared cache never), with an ETag (of the
body) and Last-Modified (the newest digest's day) so that a poll between two digests is answered 304.

The archive lists the reader's last ARCHIVE_DIGESTS digests that went out; each opens as mailed (`public.mailed`,
"View in browser"'s rendering). Its link is dated like the preferences link that offered it and expires with it.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time
from xml.etree import ElementTree as ET

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from flask import Blueprint, Response, abort, request

from digest import summaries
from digest.models import Paper
from digest.render.filters import display_title, format_date, paper_url, summary_label, truncate_words
from digest.tokens import BadToken
from digest.web.common import current, page
from digest.web.public import _links, _token, mailed

blueprint = Blueprint("feeds", __name__)

FEED_DIGESTS = 30  # the digests a feed carries, newest first (a month of a daily digest)...
FEED_ENTRIES = 200  # ...and at most this many papers of them (about 250 KB of XML)
FEED_AUTHORS = 10  # authors named per entry (a paper with 3,000 authors is no feed entry)
FEED_MAX_AGE = 3600  # seconds a feed reader may keep the feed without asking again (digests come once a day)
ARCHIVE_DIGESTS = 100  # the past digests the archive lists
SUMMARY_CHARS = 1000  # of an entry's abstract
ATOM = "http://www.w3.org/2005/Atom"
# What XML 1.0 cannot carry (C0 controls but tab, newline, carriage return; surrogates; U+FFFE, U+FFFF), and the
# C1 controls and DEL, which it can but no reader shows: a space each. The store refuses them at ingest already.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


@blueprint.get("/feed/<token>")
def feed(token: str) -> Response:
    """The reader's Atom feed; 304 when the reader's copy is current, 410 once the address is suppressed."""
    app = current()
    try:
        subject = app.signer.check("feed", token)
    except BadToken:
        abort(400)
    if subject.legacy:
        abort(400)  # (no feed token was ever made the old way)
    if app.store.suppressed_among([subject.email]):  # unsubscribed, bounced, complained, or erased (by its hash)
        return Response(page("message", heading="This feed has stopped",
                             text="The address it was made for gets no digests any more."), 410)
    entries = app.store.received_lately(subject.email, FEED_DIGESTS, FEED_ENTRIES)
    updated = entries[0][0] if entries else date.today()
    body = atom(entries, feed_id=reader_id(app.signer.secret, subject.email), updated=updated,
                title=f"{app.newsletter.name}: your papers", author=app.newsletter.name,
                self_url=f"{app.newsletter.base_url}/feed/{token}",
                made=summaries.kept(app.store, [paper for _, paper in entries]))
    response = Response(body, content_type="application/atom+xml; charset=utf-8")
    response.headers["Cache-Control"] = f"private, max-age={FEED_MAX_AGE}"  # (the app's default is no-store)
    response.set_etag(hashlib.sha256(body).hexdigest()[:32])
    response.last_modified = min(_midnight(updated), datetime.now(UTC))  # (a local date can run ahead of UTC)
    return response.make_conditional(request)


@blueprint.get("/archive/<token>")
def archive(token: str) -> str:
    """The reader's past digests by day, newest first, each a link to it as mailed."""
    subject = _token("archive", token)  # 400 forged, 410 expired or erased
    if subject.legacy:
        abort(400)
    digests = current().store.past_digests(subject.email, ARCHIVE_DIGESTS)
    links = _links(subject)
    return page("archive", email=subject.email, limit=ARCHIVE_DIGESTS,
                digests=[(day, papers, f"{request.path}/{day.isoformat()}") for day, papers in digests],
                preferences_url=links.preferences if links else None)


@blueprint.get("/archive/<token>/<day>")
def archived(token: str, day: str) -> Response:
    """One past digest as it was mailed; 404 for a day the reader got none."""
    subject = _token("archive", token)
    if subject.legacy:
        abort(400)
    when = _day(day)
    delivery = current().store.delivery(subject.email, when) if when else None
    if when is None or delivery is None or delivery.status != "sent":
        abort(404)
    return mailed(subject.email, when)


def _day(text: str) -> date | None:
    """`text` as a date when it is one written YYYY-MM-DD (one address per digest), else None."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    return day if day.isoformat() == text else None


def atom(entries: Sequence[tuple[date, Paper]], *, feed_id: uuid.UUID, updated: date, title: str, author: str,
         self_url: str, made: Mapping[int, str] | None = None) -> bytes:
    """An Atom 1.0 document (RFC 4287) of these (digest day, paper) entries, built as a tree: every text is
    escaped by the serialiser, and what XML cannot carry is replaced first. `made`: the summaries a model made
    (`digest.summaries`), by store id."""
    root = ET.Element("feed", xmlns=ATOM)
    _text(root, "id", feed_id.urn)
    _text(root, "title", title)
    _text(root, "updated", _stamp(updated))
    ET.SubElement(root, "link", rel="self", type="application/atom+xml", href=self_url)
    _text(ET.SubElement(root, "author"), "name", author)
    _text(root, "generator", "paper-digest")
    for day, paper in entries:
        entry = ET.SubElement(root, "entry")
        _text(entry, "id", uuid.uuid5(feed_id, f"paper {paper.store_id}").urn)
        _text(entry, "title", _line(display_title(paper), 500))
        ET.SubElement(entry, "link", rel="alternate", type="text/html", href=paper_url(paper))
        _text(entry, "updated", _stamp(day))
        if paper.published:
            _text(entry, "published", _stamp(paper.published))
        for name in paper.authors[:FEED_AUTHORS]:
            _text(ET.SubElement(entry, "author"), "name", _line(name, 200))
        _text(entry, "summary", _summary(paper, day, (made or {}).get(paper.store_id or 0)))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _summary(paper: Paper, day: date, made: str | None = None) -> str:
    """The source's summary (else the one a model `made`), the abstract (cut at SUMMARY_CHARS), and the digest
    that carried the paper."""
    tldr = paper.summary or made
    label = summary_label(paper) if paper.summary else "TL;DR (AI summary)"
    parts = [f"{label}: {_line(tldr, SUMMARY_CHARS)}"] if tldr else []
    return "\n\n".join([*parts, _line(paper.abstract, SUMMARY_CHARS), f"In your digest of {format_date(day, 'long')}."])


def _text(parent: ET.Element, tag: str, text: str) -> None:
    ET.SubElement(parent, tag).text = text


def _line(text: str, limit: int) -> str:
    """`text` as XML can carry it, its whitespace collapsed, cut at a word boundary to `limit` characters."""
    return truncate_words(_NOT_XML.sub(" ", text), limit)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), UTC)


def _stamp(day: date) -> str:
    return _midnight(day).isoformat().replace("+00:00", "Z")


def reader_id(secret: str, email: str) -> uuid.UUID:
    """The feed's id for `email`: a name-based UUID under a namespace only the links' secret gives, so that it is
    the same on every poll and tells nobody the address; its entries' ids are made under it."""
    key = HKDF(hashes.SHA256(), 16, salt=None, info=b"paper-digest.feed-ids.v1").derive(secret.encode())
    return uuid.uuid5(uuid.UUID(bytes=key), email.strip().lower())
