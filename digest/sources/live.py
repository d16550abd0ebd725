"""Live sources (`[[sources]]` in digest.toml): what each kind fetches and how its body is parsed."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from digest.models import ParseResult, RecordError
from digest.sources import (
    ARXIV_FEED,
    HF_API_JSON,
    HF_PAGE_HTML,
    MAX_DOCUMENT_BYTES,
    PARSERS,
    SourceError,
    biorxiv,
    iter_paths,
    openreview,
    parse_bytes,
    parse_file,
    vet,
)

if TYPE_CHECKING:
    from digest.sources.fetch import Fetched, Fetcher, Validators

HF_DAILY = "hf_daily"
HF_PAGE = "hf_page"
ARXIV = "arxiv"
FILE = "file"
BIORXIV, MEDRXIV = biorxiv.KINDS
OPENREVIEW = openreview.KIND
KINDS = (HF_DAILY, HF_PAGE, ARXIV, FILE, BIORXIV, MEDRXIV, OPENREVIEW)

DEFAULT_URLS = {
    HF_DAILY: "https://huggingface.co/api/daily_papers?date={date}",
    HF_PAGE: "https://huggingface.co/papers/date/{date}",
}
ARXIV_LISTING = "https://rss.arxiv.org/atom/{}"
ARXIV_QUERY = ("https://export.arxiv.org/api/query?search_query={}"
               "&sortBy=submittedDate&sortOrder=descending&max_results=200")
_FORMATS = {HF_DAILY: HF_API_JSON, HF_PAGE: HF_PAGE_HTML, ARXIV: ARXIV_FEED}
_ACCEPT = {
    HF_DAILY: ("application/json",),
    HF_PAGE: ("text/html", "application/xhtml+xml"),
    ARXIV: ("application/atom+xml", "application/rss+xml", "application/xml", "text/xml"),
}


@dataclass(frozen=True)
class SourceSpec:
    """One configured source. `url` may hold `{date}`, filled with the day being fetched."""

    kind: str
    name: str = ""
    url: str = ""
    path: str = ""  # for `file`: a path or a glob, relative to the config file's folder
    categories: tuple[str, ...] = ()
    query: str = ""
    days: int = 1  # for `biorxiv` and `medrxiv`: the days read, ending on the day fetched
    venue: str = ""  # for `openreview`: the venue id whose notes are read (ICLR.cc/2025/Conference)

    @property
    def label(self) -> str:
        """How reports and `digest status` name this source."""
        where = self.path or self.venue or self.url or "+".join(self.categories) or self.query
        return self.name or (f"{self.kind}:{where}" if where else self.kind)

    def url_for(self, day: date) -> str:
        """The URL to fetch for `day` (for `biorxiv`, `medrxiv` and `openreview`: the first page of the walk)."""
        if self.kind in biorxiv.KINDS:
            return biorxiv.details_url(self, day)
        if self.kind == OPENREVIEW:
            return openreview.notes_url(self)
        if self.url:
            return self.url.replace("{date}", day.isoformat())
        if self.kind in DEFAULT_URLS:
            return DEFAULT_URLS[self.kind].format(date=day.isoformat())
        if self.categories:
            return ARXIV_LISTING.format("+".join(self.categories))
        return ARXIV_QUERY.format(quote(self.query))

    def problem(self) -> str | None:
        """What is missing or contradictory in this entry, or None when it can run."""
        if self.days != 1 and self.kind not in biorxiv.KINDS:
            return f"`days` is only for `biorxiv` and `medrxiv` sources, not {self.kind!r}"
        if self.venue and self.kind != OPENREVIEW:
            return f"`venue` is only for `openreview` sources, not {self.kind!r}"
        if self.kind == OPENREVIEW and (problem := openreview.venue_problem(self.venue)):
            return problem
        if self.kind == FILE:
            return None if self.path else "a `file` source needs `path`"
        if self.path:
            return f"`path` is only for `file` sources, not {self.kind!r}"
        if self.kind == ARXIV and sum(map(bool, (self.url, self.categories, self.query))) != 1:
            return "an `arxiv` source needs exactly one of `url`, `categories` or `query`"
        if self.kind in biorxiv.KINDS:
            if self.query:
                return f"`query` is only for `arxiv` sources, not {self.kind!r}"
            if not 1 <= self.days <= biorxiv.MAX_DAYS:
                return f"`days` must be from 1 to {biorxiv.MAX_DAYS}, not {self.days!r}"
            return None
        if self.kind != ARXIV and (self.categories or self.query):
            return f"`categories` and `query` are only for `arxiv`, `biorxiv` and `medrxiv` sources, not {self.kind!r}"
        return None


@dataclass(frozen=True)
class SourceResult:
    """What one source gave on one run."""

    spec: SourceSpec
    parsed: ParseResult
    fetched: Fetched | None = None  # None for files

    @property
    def not_modified(self) -> bool:
        return self.fetched is not None and self.fetched.not_modified


def read_source(spec: SourceSpec, day: date, fetcher: Fetcher, have: Validators) -> SourceResult:
    """Fetch (or read) one source and parse it; FetchError or SourceError when the whole source fails."""
    if spec.kind == FILE:
        return _read_files(spec, day)
    if spec.kind in (*biorxiv.KINDS, OPENREVIEW):  # a page at a time, never conditional: `have` is not asked
        walk = biorxiv.walk if spec.kind in biorxiv.KINDS else openreview.walk
        parsed, fetched = walk(spec, day, fetcher, limit=MAX_DOCUMENT_BYTES)
        return SourceResult(spec, vet(parsed, spec.label), fetched)
    fetched = fetcher.get(spec.url_for(day), accept=_ACCEPT[spec.kind], have=have, limit=MAX_DOCUMENT_BYTES)
    if fetched.not_modified:
        return SourceResult(spec, ParseResult(()), fetched)
    parsed = parse_bytes(fetched.body, spec.label, seen_on=day, parser=PARSERS[_FORMATS[spec.kind]])
    return SourceResult(spec, vet(parsed, spec.label), fetched)


def _read_files(spec: SourceSpec, day: date) -> SourceResult:
    if glob.has_magic(spec.path):
        paths = sorted(Path(p) for p in glob.glob(spec.path))
    else:
        paths = iter_paths([Path(spec.path)])
    if not paths:
        raise SourceError(spec.label, f"no files match {spec.path}")
    papers, errors = [], []
    for path in paths:
        try:
            result = vet(parse_file(path, seen_on=day), str(path))
        except SourceError as exc:
            errors.append(RecordError(str(path), None, exc.reason))
            continue
        papers.extend(result.papers)
        errors.extend(result.errors)
    return SourceResult(spec, ParseResult(tuple(papers), tuple(errors)))
