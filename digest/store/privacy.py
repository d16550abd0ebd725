"""A subscriber's data across every repository: everything the store holds about one address, and erasing it (it
owns no table; it reads and deletes one address's rows in all of them).

Erasing keeps one thing: the address as a hash (`forgotten_key`) on the suppression list, so that
it is never mailed again, whichever way it comes back (a profile file, an import, a signup); every
check of the suppression list looks for the hash too.

A reader's library is stored once for every subscriber whose library has the same digest: an export
gives its entries with the profile, and erasing deletes it unless another profile still names it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from digest.store.engine import Base
from digest.store.subscribers import drop_unused_libraries
from digest.store.tables import (
    _now,
    bounces,
    cache,
    consents,
    deliveries,
    feedback,
    libraries,
    papers,
    preferences,
    profile_files,
    received,
    signups,
    subscribers,
    suppressions,
)

FORGOTTEN = "forgotten"  # the suppression reason of an erased address (kept only as its hash)
_PREFIX = "sha256:"


def forgotten_key(email: str) -> str:
    """The suppression list's key for an erased address: a hash of it (lower-case), not the address."""
    return _PREFIX + hashlib.sha256(b"paper-digest forgotten\n" + email.strip().lower().encode()).hexdigest()


def is_hashed(key: str) -> bool:
    return key.startswith(_PREFIX)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds") + "Z"
    if isinstance(value, date):
        return value.isoformat()
    return value


def _rows(result: Any) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row._mapping.items()} for row in result]


def _library_keys(profile: dict[str, Any]) -> set[str]:
    """The digests of the libraries a stored profile's interests name."""
    return {i["library_key"] for i in profile["interests"] if i.get("library_key")}


def _exported(conn: Connection, text: str | None) -> dict[str, Any] | None:
    """A stored profile as exported: each interest with the authors it follows and its library's entries."""
    if text is None:
        return None
    profile = json.loads(text)
    query = sa.select(libraries.c.key, libraries.c.entries).where(libraries.c.key.in_(sorted(_library_keys(profile))))
    stored = {r.key: r.entries for r in conn.execute(query)}
    for interest in profile["interests"]:
        interest.setdefault("authors", [])
        if interest.get("library_key"):  # entries as stored: title, abstract, arxiv_id, doi, authors, added, line
            interest["library"] = json.loads(stored.get(interest["library_key"], "[]"))
    return profile


def _drop_unshared(conn: Connection, keys: Iterable[str]) -> int:
    """Delete these libraries but those a remaining profile (a subscriber's of any source, a signup's) names."""
    return drop_unused_libraries(conn, keys)


class PrivacyStore(Base):
    """Export and erase one subscriber's data; the forgotten addresses."""

    def forgotten_among(self, emails: Sequence[str]) -> set[str]:
        """Of these addresses, the lower-case ones that were erased (`digest subscribers forget`)."""
        keys = {forgotten_key(e): e.lower() for e in emails}
        found: set[str] = set()
        with self.engine.connect() as conn:
            items = list(keys)
            for start in range(0, len(items), 500):
                query = sa.select(suppressions.c.email).where(suppressions.c.email.in_(items[start:start + 500]))
                found.update(keys[k] for k in conn.execute(query).scalars())
        return found

    def is_forgotten(self, email: str) -> bool:
        return bool(self.forgotten_among([email]))

    def subscriber_data(self, email: str) -> dict[str, Any]:
        """Everything stored about one address (any case), as JSON-ready values."""
        key = email.strip().lower()
        mine = sa.func.lower(deliveries.c.subscriber) == key
        with self.engine.connect() as conn:
            profile = conn.execute(sa.select(subscribers).where(subscribers.c.email_key == key)).first()
            prefs = conn.execute(sa.select(preferences).where(preferences.c.email == key)).first()
            suppression = conn.execute(sa.select(suppressions).where(suppressions.c.email == key)).first()
            erased = conn.execute(sa.select(suppressions.c.created_at).where(
                suppressions.c.email == forgotten_key(key))).scalar()
            marks = conn.execute(
                sa.select(feedback.c.paper_id, papers.c.arxiv_id, papers.c.title, feedback.c.value,
                          feedback.c.created_at).join(papers, papers.c.id == feedback.c.paper_id)
                .where(sa.func.lower(feedback.c.subscriber) == key).order_by(feedback.c.created_at))
            sent = conn.execute(sa.select(deliveries.c.digest_date, deliveries.c.status, deliveries.c.message_id,
                                          deliveries.c.attempts, deliveries.c.transport, deliveries.c.detail,
                                          deliveries.c.updated_at).where(mine).order_by(deliveries.c.digest_date))
            got = conn.execute(
                sa.select(received.c.digest_date, received.c.paper_id, papers.c.arxiv_id, papers.c.title)
                .join(papers, papers.c.id == received.c.paper_id)
                .where(sa.func.lower(received.c.subscriber) == key)
                .order_by(received.c.digest_date, received.c.paper_id))
            signup = conn.execute(sa.select(signups.c.email, signups.c.status, signups.c.profile,
                                            signups.c.requested_at, signups.c.form_version)
                                  .where(signups.c.email_key == key)).first()
            consent = conn.execute(sa.select(consents.c.requested_at, consents.c.confirmed_at,
                                             consents.c.form_version, consents.c.ip_hash, consents.c.confirm_ip_hash)
                                   .where(consents.c.email_key == key).order_by(consents.c.confirmed_at))
            reports = conn.execute(sa.select(bounces.c.kind, bounces.c.status, bounces.c.detail,
                                             bounces.c.digest_date, bounces.c.reported_at)
                                   .where(bounces.c.email == key).order_by(bounces.c.reported_at))
            data = {
                "email": profile.email if profile else key,
                "source": ({"kind": profile.source, "path": profile.path, "stored_at": _plain(profile.updated_at)}
                           if profile else None),
                "profile": _exported(conn, profile.profile if profile else None),
                "preferences": ({"frequency": prefs.frequency, "paused_until": _plain(prefs.paused_until),
                                 "updated_at": _plain(prefs.updated_at)} if prefs else None),
                "suppression": ({"reason": suppression.reason, "since": _plain(suppression.created_at)}
                                if suppression else None),
                "signup": ({"email": signup.email, "status": signup.status, "profile": _exported(conn, signup.profile),
                            "requested_at": _plain(signup.requested_at), "form_version": signup.form_version}
                           if signup else None),
                "consents": _rows(consent),
                "feedback": _rows(marks),
                "deliveries": _rows(sent),
                "received_papers": _rows(got),
                "bounce_reports": _rows(reports),
                "forgotten": {"since": _plain(erased)} if erased else None,
            }
        return data

    def forget(self, email: str) -> dict[str, int]:
        """Erase one address from every table, in one transaction; keep its hash on the suppression list.

        The send log keeps its rows (they count what was sent) under the hash, with their details
        (which may quote the address) cleared. The libraries the address's profiles named go too, unless
        another subscriber's profile names the same one. Returns how many rows each table lost or had rewritten.
        """
        key, hashed = email.strip().lower(), forgotten_key(email)
        counts: dict[str, int] = {}
        with self.write() as conn:
            def count(name: str, result: Any) -> None:
                counts[name] = counts.get(name, 0) + int(result.rowcount or 0)

            named = {k for text in conn.execute(sa.union_all(
                sa.select(subscribers.c.profile).where(subscribers.c.email_key == key),
                sa.select(signups.c.profile).where(signups.c.email_key == key))).scalars()
                for k in _library_keys(json.loads(text))}
            count("subscribers", conn.execute(subscribers.delete().where(subscribers.c.email_key == key)))
            count("preferences", conn.execute(preferences.delete().where(preferences.c.email == key)))
            count("feedback", conn.execute(feedback.delete().where(sa.func.lower(feedback.c.subscriber) == key)))
            count("received", conn.execute(received.delete().where(sa.func.lower(received.c.subscriber) == key)))
            count("suppressions", conn.execute(suppressions.delete().where(suppressions.c.email == key)))
            count("signups", conn.execute(signups.delete().where(signups.c.email_key == key)))
            count("consents", conn.execute(consents.delete().where(consents.c.email_key == key)))
            counts["libraries"] = _drop_unshared(conn, named)  # once their own rows are gone, so they do not count
            owned = sa.func.lower(deliveries.c.subscriber) == key
            taken = conn.execute(sa.select(deliveries.c.digest_date).where(
                deliveries.c.subscriber == hashed)).scalars().all()
            if taken:  # forgotten before and mailed since (cannot happen, but keep one row a date)
                conn.execute(deliveries.delete().where(owned & deliveries.c.digest_date.in_(taken)))
            count("deliveries", conn.execute(deliveries.update().where(owned).values(
                subscriber=hashed, detail="", claimed_by=None, lease_until=None)))
            count("bounces", conn.execute(bounces.update().where(bounces.c.email == key).values(
                email=hashed, detail="")))
            # The learned model is keyed by the address as written (`select.learn`), so matched in lower case.
            # The text model's profiles (`dense-profile/...`) and libraries' term counts (`library-words/...`)
            # stay: derived data keyed by a digest of a text or a library's content, shared by whoever has the
            # same, and naming no one.
            count("cache", conn.execute(cache.delete().where(sa.func.lower(cache.c.key) == f"feedback-model/{key}")))
            # A profile file still naming the address is read again by the next sync, and refused there.
            conn.execute(profile_files.delete().where(profile_files.c.email_key == key))
            if not conn.execute(sa.select(suppressions.c.email).where(suppressions.c.email == hashed)).first():
                conn.execute(suppressions.insert().values(email=hashed, reason=FORGOTTEN, created_at=_now()))
        return counts
