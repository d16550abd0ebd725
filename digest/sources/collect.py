"""Collect: fetch every configured source and merge what it gave into the store, one source at a time.

A source that fails (unreachable, refusing, wrong content, or an error nobody foresaw in its fetch or
parse) is recorded and reported in one line, and the others still count: a failing source never stops the
send of what the store already holds. Each source's outcome is kept in the store for `digest status`,
with the validators that make its next fetch conditional.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from digest.errors import FetchError
from digest.models import Paper, RecordError
from digest.sources import SourceError
from digest.sources.fetch import Fetcher, Validators
from digest.sources.live import SourceResult, SourceSpec, read_source
from digest.store import FetchRecord, Store

log = logging.getLogger("digest")

@dataclass(frozen=True)
class SourceOutcome:
    """One source on one run."""

    label: str
    result: str  # ok | not-modified | failed
    records: int = 0
    new: int = 0
    updated: int = 0
    errors: tuple[RecordError, ...] = ()
    detail: str = ""

    def line(self) -> str:
        if self.result == "failed":
            return f"{self.label}: failed: {self.detail}"
        if self.result == "not-modified":
            return f"{self.label}: not modified since the last fetch"
        return (f"{self.label}: {self.records} records, {self.new} new, {self.updated} updated, "
                f"{len(self.errors)} errors")


@dataclass
class CollectReport:
    """Every source's outcome on one run."""

    outcomes: list[SourceOutcome] = field(default_factory=list)
    new_papers: list[Paper] = field(default_factory=list)  # the papers of the sources that gave new ones

    @property
    def failed(self) -> list[SourceOutcome]:
        return [o for o in self.outcomes if o.result == "failed"]

    def summary(self) -> str:
        new = sum(o.new for o in self.outcomes)
        records = sum(o.records for o in self.outcomes)
        errors = sum(len(o.errors) for o in self.outcomes)
        return (f"fetched {len(self.outcomes)} sources ({len(self.failed)} failed): {records} records, "
                f"{new} new papers, {errors} record errors")


def collect(store: Store, specs: Sequence[SourceSpec], fetcher: Fetcher, day: date) -> CollectReport:
    """Fetch, parse and store every source; a failing one is recorded and the rest go on."""
    report = CollectReport()
    for spec in specs:
        report.outcomes.append(_one(store, spec, fetcher, day, report.new_papers))
    return report


def _one(store: Store, spec: SourceSpec, fetcher: Fetcher, day: date, new_papers: list[Paper]) -> SourceOutcome:
    url = spec.path if spec.kind == "file" else spec.url_for(day)
    last = store.last_fetch(spec.label)
    have = Validators(last.etag, last.last_modified) if last and last.url == url else Validators()
    now = datetime.now(UTC).replace(tzinfo=None)
    try:
        result = read_source(spec, day, fetcher, have)
    except (FetchError, SourceError) as exc:
        attempts = exc.attempts if isinstance(exc, FetchError) else 1
        return _failed(store, FetchRecord(spec.label, url, now, "failed", 0, 0, attempts, exc.reason),
                       getattr(exc, "url", None) or url)
    except Exception as exc:  # a bug, or a library's error on input nobody foresaw: this source fails, not the run
        log.debug("source %s failed", spec.label, exc_info=True)
        reason = (f"an unexpected error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); nothing from "
                  "it was stored (--debug shows where)")
        return _failed(store, FetchRecord(spec.label, url, now, "failed", 0, 0, 1, reason), url)
    counts = store.add_papers(result.parsed.papers, seen_on=day)
    if counts.new:
        new_papers.extend(result.parsed.papers)
    outcome = "not-modified" if result.not_modified else "ok"
    store.record_fetch(_record(spec, url, now, outcome, result))
    return SourceOutcome(spec.label, outcome, len(result.parsed.papers), counts.new, counts.updated,
                         result.parsed.errors)


def _failed(store: Store, record: FetchRecord, where: str) -> SourceOutcome:
    store.record_fetch(record)
    return SourceOutcome(record.source, "failed", detail=f"{where}: {record.detail}")


def _record(spec: SourceSpec, url: str, now: datetime, outcome: str, result: SourceResult) -> FetchRecord:
    fetched = result.fetched
    return FetchRecord(spec.label, url, now, outcome, len(result.parsed.papers), len(result.parsed.errors),
                       fetched.attempts if fetched else 1, "",
                       fetched.validators.etag if fetched else None,
                       fetched.validators.last_modified if fetched else None)
