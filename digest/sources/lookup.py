"""Library ids looked up: arXiv ids and DOIs a reader's library names that the store lacks, and what they are about.

A library given as a list of ids (or an export whose entries carry an id and no title) says nothing the ranking can
read until the papers are known. Ids the store holds count as the stored papers; the others are asked of the public
arXiv API (`id_list`, up to ARXIV_BATCH a request) and, for DOIs, of Crossref (`/works/DOI`, one a request), with
the fetch client's retries, `Retry-After` and limits, at most MAX_IDS a lookup. What is found fills the entry's
title and abstract (the library is kept again under its key: its profile is made from them on next use); what is
not found stays as it was, named by its line; what could not be asked (offline, a failing service) is "not yet
looked up" and asked again next time. The web side runs them in its bounded library backlog (`web.backlog`), so a
web request never waits for one.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from urllib.parse import quote, urlencode

from digest.errors import FetchError
from digest.models import LibraryEntry
from digest.sources import arxivfeed
from digest.sources.fetch import Fetcher

log = logging.getLogger("digest")
ARXIV_API = "https://export.arxiv.org/api/query"
DOI_API = "https://api.crossref.org/works/"
ARXIV_BATCH = 50  # ids a request to the arXiv API asks for (its documentation asks for modest batches)
MAX_IDS = 500  # ids one lookup asks for; the rest wait for the next
MAX_BODY = 5_000_000  # bytes of one answer
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Looked:
    """What a lookup of a library's ids found, counted as the reader is told."""

    ids: int = 0  # entries named only by an id
    in_store: int = 0
    from_arxiv: int = 0
    from_doi: int = 0
    not_found: list[int] = field(default_factory=list)  # lines (or positions) of ids no service knows
    not_looked: int = 0  # ids not asked yet (offline, a failing service, more than MAX_IDS)
    problems: list[str] = field(default_factory=list)  # why some were not asked (one line each)

    def summary(self) -> str:
        """"8 ids: 3 in the store, 4 fetched from arXiv, 1 not found (line 7)"."""
        if not self.ids:
            return ""
        parts = [f"{self.in_store} in the store"] if self.in_store else []
        if self.from_arxiv:
            parts.append(f"{self.from_arxiv} fetched from arXiv")
        if self.from_doi:
            parts.append(f"{self.from_doi} fetched from Crossref")
        if self.not_found:
            lines = ", ".join(str(n) for n in self.not_found[:10]) + (" …" if len(self.not_found) > 10 else "")
            parts.append(f"{len(self.not_found)} not found (line{'s' if len(self.not_found) > 1 else ''} {lines})")
        if self.not_looked:
            parts.append(f"{self.not_looked} not yet looked up")
        return f"{self.ids} id{'s' if self.ids != 1 else ''}: " + ", ".join(parts)

    def to_json(self) -> str:
        return json.dumps({k: getattr(self, k) for k in ("ids", "in_store", "from_arxiv", "from_doi", "not_found",
                                                         "not_looked", "problems")})

    @classmethod
    def from_json(cls, text: str) -> Looked:
        data = json.loads(text)
        return cls(**{k: data[k] for k in ("ids", "in_store", "from_arxiv", "from_doi", "not_found", "not_looked",
                                           "problems") if k in data})


def bare(entry: LibraryEntry) -> bool:
    """Whether an entry is named by an id alone (nothing to read until it is looked up)."""
    return not (entry.title or entry.abstract) and bool(entry.arxiv_id or entry.doi)


def look_up(entries: Sequence[LibraryEntry], known: Callable[[list[str]], set[str]], fetcher: Fetcher, *,
            arxiv_api: str = ARXIV_API, doi_api: str = DOI_API) -> tuple[list[LibraryEntry], Looked]:
    """The entries with what the services know of the bare ones filled in, and what was found. `known`: of some
    references (arXiv ids, "doi:…"), those the store holds (those count as the stored papers and are not asked)."""
    out = list(entries)
    looked = Looked()
    todo = [n for n, e in enumerate(out) if bare(e)]
    looked.ids = len(todo)
    stored = known([out[n].ref for n in todo]) if todo else set()
    todo = [n for n in todo if out[n].ref not in stored]
    looked.in_store = looked.ids - len(todo)
    asked, later = todo[:MAX_IDS], todo[MAX_IDS:]
    looked.not_looked += len(later)
    by_arxiv = [n for n in asked if out[n].arxiv_id]
    by_doi = [n for n in asked if not out[n].arxiv_id and out[n].doi]
    for start in range(0, len(by_arxiv), ARXIV_BATCH):
        batch = by_arxiv[start:start + ARXIV_BATCH]
        try:
            found = _arxiv(fetcher, arxiv_api, [out[n].arxiv_id or "" for n in batch])
        except FetchError as exc:
            looked.not_looked += len(by_arxiv) - start
            looked.problems.append(f"arXiv: {exc}")
            break
        for n in batch:
            paper = found.get(out[n].arxiv_id or "")
            if paper is None:
                looked.not_found.append(out[n].line or n + 1)
            else:
                out[n] = replace(out[n], title=paper[0], abstract=paper[1])
                looked.from_arxiv += 1
    for k, n in enumerate(by_doi):
        try:
            work = _crossref(fetcher, doi_api, out[n].doi or "")
        except FetchError as exc:
            if exc.status == 404:
                looked.not_found.append(out[n].line or n + 1)
                continue
            looked.not_looked += len(by_doi) - k
            looked.problems.append(f"Crossref: {exc}")
            break
        if work is None:
            looked.not_found.append(out[n].line or n + 1)
        else:
            out[n] = replace(out[n], title=work[0], abstract=work[1])
            looked.from_doi += 1
    looked.not_found.sort()
    return out, looked


def _arxiv(fetcher: Fetcher, api: str, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The arXiv API's title and abstract of each id it knows (the Atom feed read as `arxivfeed` reads it)."""
    url = f"{api}?{urlencode({'id_list': ','.join(ids), 'max_results': len(ids)})}"
    body = fetcher.get(url, accept=("application/atom+xml", "application/xml", "text/xml"), limit=MAX_BODY).body
    result = arxivfeed.parse(body.decode("utf-8", "replace"), url, seen_on=date.today())
    return {p.arxiv_id: (p.title, p.abstract) for p in result.papers if p.arxiv_id and p.title}


def _crossref(fetcher: Fetcher, api: str, doi: str) -> tuple[str, str] | None:
    """Crossref's title and abstract (its JATS markup taken out) of a DOI, or None when it has no title."""
    body = fetcher.get(api + quote(doi, safe="/"), accept=("application/json",), limit=MAX_BODY).body
    try:
        message = json.loads(body)["message"]
        titles = message.get("title") or []
        title = " ".join(str(titles[0]).split()) if titles else ""
        abstract = " ".join(_TAG.sub(" ", str(message.get("abstract") or "")).split())
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise FetchError(api + doi, f"not a Crossref work: {exc.__class__.__name__}", 1) from exc
    return (title, abstract) if title else None


LOOKUP_KEY = "library-lookup/"  # + a library's key: what its ids' lookup found (the store's cache)
