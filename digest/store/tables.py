"""The database schema (SQLAlchemy Core) and the helpers that turn rows into records and back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa

from digest.models import Paper
from digest.store.records import DeliveryRecord

metadata = sa.MetaData()

papers = sa.Table(
    "papers", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("arxiv_id", sa.String, unique=True),
    sa.Column("title_norm", sa.String, nullable=False, index=True),
    sa.Column("title", sa.String, nullable=False),
    sa.Column("abstract", sa.Text, nullable=False),
    sa.Column("data", sa.Text, nullable=False),  # the remaining Paper fields as JSON
    sa.Column("upvotes", sa.Integer),
    sa.Column("published", sa.Date),
    sa.Column("first_seen", sa.Date, nullable=False, index=True),
    sa.Column("updated_at", sa.DateTime, nullable=False),
    sa.Column("doi", sa.String),  # lower-case, no https://doi.org/ (revision 0009)
    sa.Column("version", sa.Integer),  # the newest version seen (revision 0009)
    # one row per DOI; rows without one are many (NULLs are distinct in a unique index on SQLite and PostgreSQL)
    sa.Index("ix_papers_doi", "doi", unique=True),
)

upvotes = sa.Table(
    "upvotes", metadata,
    sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
    sa.Column("observed_on", sa.Date, primary_key=True),
    sa.Column("upvotes", sa.Integer, nullable=False),
)

deliveries = sa.Table(
    "deliveries", metadata,
    sa.Column("subscriber", sa.String, primary_key=True),
    sa.Column("digest_date", sa.Date, primary_key=True),
    sa.Column("message_id", sa.String, nullable=False),
    # queued (due, waiting for a worker) | claimed (a worker holds it until lease_until) | pending (a temporary
    # failure: the next run sends it) | sent | failed | bounced
    sa.Column("status", sa.String, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("transport", sa.String, nullable=False),
    sa.Column("detail", sa.Text, nullable=False, default=""),
    sa.Column("updated_at", sa.DateTime, nullable=False),
    sa.Column("claimed_by", sa.String),  # the worker holding the claim (see digest.delivery.owners.Owner)
    sa.Column("lease_until", sa.DateTime),  # after this (UTC) another worker may take the claim over
    sa.Index("ix_deliveries_queue", "digest_date", "status"),
    sa.Index("ix_deliveries_message_id", "message_id"),  # a bounce report names the digest by its Message-ID
)

received = sa.Table(
    "received", metadata,
    sa.Column("subscriber", sa.String, primary_key=True),
    sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
    sa.Column("digest_date", sa.Date, nullable=False),
    # a send reads the papers received within the selection window from this index alone (revision 0005)
    sa.Index("ix_received_by_date", "subscriber", "digest_date", "paper_id"),
)

suppressions = sa.Table(
    "suppressions", metadata,
    sa.Column("email", sa.String, primary_key=True),  # lower-case (from revision 0002)
    sa.Column("reason", sa.String, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)

mail_reports = sa.Table(  # every message read by `digest bounces` (an unreadable one too), so none counts twice
    "mail_reports", metadata,
    sa.Column("key", sa.String, primary_key=True),  # message-id:<…> of the report, else sha256:<hex> of its bytes
    sa.Column("outcome", sa.String, nullable=False),  # hard | soft | complaint | unmatched | ignored | unreadable
    sa.Column("processed_at", sa.DateTime, nullable=False),
    # which sent digest it matched and by what (its Message-ID, its return path), or why it matched none (0008)
    sa.Column("evidence", sa.Text, nullable=False, server_default=""),
)

bounces = sa.Table(  # what the reports said about each address: hard and soft bounces, complaints
    "bounces", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("report", sa.String, nullable=False),  # mail_reports.key (lifted:<when> for an operator's lift)
    sa.Column("email", sa.String, nullable=False, index=True),  # lower-case; the forgotten key once erased
    sa.Column("kind", sa.String, nullable=False),  # hard | soft | complaint | lifted (by the operator)
    sa.Column("status", sa.String, nullable=False),  # the DSN status (5.1.1) or the feedback type (abuse)
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("digest_date", sa.Date),  # the digest it was about, when known
    sa.Column("reported_at", sa.DateTime, nullable=False),  # the report's Date (UTC)
)

webhook_tokens = sa.Table(  # a provider signature's one-use token, taken by its first request (revision 0008)
    "webhook_tokens", metadata,
    sa.Column("key", sa.String, primary_key=True),  # provider:sha256 of the token
    sa.Column("expires_at", sa.DateTime, nullable=False, index=True),  # the signature is refused after this anyway
)

fetches = sa.Table(
    "fetches", metadata,
    sa.Column("source", sa.String, primary_key=True),  # the source's label
    sa.Column("url", sa.String, nullable=False),
    sa.Column("fetched_at", sa.DateTime, nullable=False),
    sa.Column("result", sa.String, nullable=False),  # ok | not-modified | failed
    sa.Column("papers", sa.Integer, nullable=False),
    sa.Column("errors", sa.Integer, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("etag", sa.String),
    sa.Column("last_modified", sa.String),
    sa.Column("last_ok_at", sa.DateTime),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("command", sa.String, nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("status", sa.String, nullable=False),  # running | ok | failed
    sa.Column("summary", sa.Text, nullable=False, default=""),
)

preferences = sa.Table(
    "preferences", metadata,
    sa.Column("email", sa.String, primary_key=True),  # lower-case
    sa.Column("frequency", sa.String),  # overrides the profile's when set
    sa.Column("paused_until", sa.Date),  # no digest dated on or before this day
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

locks = sa.Table(
    "locks", metadata,
    sa.Column("name", sa.String, primary_key=True),
    sa.Column("owner", sa.String, nullable=False),
    sa.Column("heartbeat_at", sa.DateTime, nullable=False),
)

feedback = sa.Table(
    "feedback", metadata,
    sa.Column("subscriber", sa.String, primary_key=True),
    sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
    sa.Column("value", sa.Integer, nullable=False),  # +1 more like this, -1 less like this
    sa.Column("created_at", sa.DateTime, nullable=False),
)

cache = sa.Table(  # derived data worth keeping between runs (term statistics); safe to delete
    "cache", metadata,
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

embeddings = sa.Table(
    "embeddings", metadata,
    sa.Column("paper_key", sa.String, primary_key=True),
    sa.Column("model", sa.String, primary_key=True),
    sa.Column("vector", sa.LargeBinary, nullable=False),  # float32, little-endian
)

libraries = sa.Table(  # readers' libraries, by digest: a profile keeps the digest, not the entries (revision 0006)
    "libraries", metadata,
    sa.Column("key", sa.String, primary_key=True),  # sha256 of the entries (`Interest.library_key`)
    sa.Column("entries", sa.Text, nullable=False),  # JSON list of entries (title, abstract, ids, authors, added, line)
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

subscribers = sa.Table(  # every valid subscriber, whatever its source (profile file, import, web signup)
    "subscribers", metadata,
    sa.Column("email_key", sa.String, primary_key=True),  # lower-case address: one subscriber per address
    sa.Column("email", sa.String, nullable=False),  # as written
    sa.Column("source", sa.String, nullable=False),  # file | import | web (a confirmed signup)
    sa.Column("path", sa.String),  # the profile file, for source = file
    sa.Column("timezone", sa.String, nullable=False),
    sa.Column("send_at", sa.String, nullable=False),  # HH:MM
    sa.Column("frequency", sa.String, nullable=False),
    sa.Column("profile", sa.Text, nullable=False),  # the whole validated profile as JSON
    sa.Column("updated_at", sa.DateTime, nullable=False),
    sa.Index("ix_subscribers_slot", "timezone", "send_at", "frequency"),
)

profile_files = sa.Table(  # what was last read from each profile file, so unchanged files are not parsed again
    "profile_files", metadata,
    sa.Column("path", sa.String, primary_key=True),
    sa.Column("mtime_ns", sa.BigInteger, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String, nullable=False),
    sa.Column("email_key", sa.String),  # the subscriber it defines, when valid
    sa.Column("problems", sa.Text),  # JSON [[line, message], ...] when invalid
    sa.Column("checked_at", sa.DateTime, nullable=False),
    sa.Column("libraries", sa.Text),  # JSON [[path, mtime_ns, size], ...] of the library files it names (0006)
)

workers = sa.Table(  # each send run or worker process: who, where, how far (for digest status)
    "workers", metadata,
    sa.Column("owner", sa.String, primary_key=True),
    sa.Column("command", sa.String, nullable=False),
    sa.Column("digest_date", sa.Date),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("heartbeat_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("claimed", sa.Integer, nullable=False, default=0),
    sa.Column("sent", sa.Integer, nullable=False, default=0),
    sa.Column("failed", sa.Integer, nullable=False, default=0),
    sa.Column("deferred", sa.Integer, nullable=False, default=0),
    sa.Column("skipped", sa.Integer, nullable=False, default=0),
)

signups = sa.Table(  # web signups waiting for their confirmation link to be followed (revision 0004)
    "signups", metadata,
    sa.Column("email_key", sa.String, primary_key=True),  # lower-case: one open signup per address
    sa.Column("email", sa.String, nullable=False),  # as typed
    sa.Column("status", sa.String, nullable=False),  # pending | held (a profile file or an import has the address)
    sa.Column("nonce", sa.String, nullable=False),  # names the latest confirmation link; older links are void
    sa.Column("profile", sa.Text, nullable=False),  # the profile asked for, as the subscribers table keeps it
    sa.Column("requested_at", sa.DateTime, nullable=False, index=True),
    sa.Column("form_version", sa.String, nullable=False),  # the wording the reader saw (see digest.signup.signups)
    sa.Column("ip_hash", sa.String, nullable=False),  # keyed hash of the address the form came from
    sa.Column("detail", sa.String, nullable=False),  # for the operator: who holds the address, when held
)

consents = sa.Table(  # the record of each confirmed signup (double opt-in): when, which wording, from where
    "consents", metadata,
    sa.Column("nonce", sa.String, primary_key=True),  # the confirmation link's: a second use finds it here
    sa.Column("email_key", sa.String, nullable=False, index=True),
    sa.Column("requested_at", sa.DateTime, nullable=False),
    sa.Column("confirmed_at", sa.DateTime, nullable=False),
    sa.Column("form_version", sa.String, nullable=False),
    sa.Column("ip_hash", sa.String, nullable=False),  # of the form's sender
    sa.Column("confirm_ip_hash", sa.String, nullable=False),  # of whoever pressed the confirm button
)

rate_limits = sa.Table(  # hits per key and fixed window, shared by every `digest serve` process on the store
    "rate_limits", metadata,
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("window_start", sa.BigInteger, primary_key=True),  # seconds since the epoch
    sa.Column("hits", sa.Integer, nullable=False),
)

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# Paper fields kept in the JSON column (the rest have columns of their own).
_COLUMN_FIELDS = {"title", "abstract", "arxiv_id", "upvotes", "published", "doi", "version", "store_id"}
_JSON_FIELDS = [f.name for f in fields(Paper) if f.name not in _COLUMN_FIELDS]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _to_json(paper: Paper) -> str:
    out: dict[str, Any] = {}
    for name in _JSON_FIELDS:
        value = getattr(paper, name)
        if value in (None, (), ""):
            continue
        out[name] = value.isoformat() if isinstance(value, date) else value
    return json.dumps(out, sort_keys=True, ensure_ascii=False)


def _from_row(row: Any) -> Paper:
    data = json.loads(row.data)
    for name in ("authors", "categories", "keywords"):
        if name in data:
            data[name] = tuple(data[name])
    if "listed_on" in data:
        data["listed_on"] = date.fromisoformat(data["listed_on"])
    return Paper(title=row.title, abstract=row.abstract, arxiv_id=row.arxiv_id, upvotes=row.upvotes,
                 published=row.published, doi=row.doi, version=row.version, store_id=row.id, **data)


def _record(row: Any) -> DeliveryRecord:
    return DeliveryRecord(**row._mapping)


CHUNK = 500  # rows per statement: below SQLite's bound-parameter limit, few round trips


def _chunks(items: Sequence[str] | None) -> list[Sequence[str] | None]:
    """`items` in statements' worth (a None for "all")."""
    if items is None:
        return [None]
    return [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
