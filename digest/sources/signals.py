"""Trend signals asked of outside services for the window's papers: GitHub stars of their code, citation counts.

The Daily Papers API reports upvotes and comments, and GitHub stars for the papers whose code it knows; a paper from
an arXiv feed or bioRxiv reports none. Where `[signals]` asks for them (both off by default: no request is made),
`refresh` runs after the day's fetch, for the papers new within `select.window_days`:

- `github = true`: each paper naming a GitHub repository (the source's `githubRepo`, else the first
  github.com/OWNER/REPO link of its abstract) gets the repository's `stargazers_count` from the GitHub REST API
  (`GET {github_api}/repos/OWNER/REPO`), one request a repository, with the token in `github_token_env` when it is
  set (GitHub allows 60 requests an hour without one, 5,000 with), at most `github_budget` requests a day.
- `citations = "openalex"`: each paper with an arXiv id or a DOI gets its `cited_by_count` from OpenAlex
  (`GET {openalex_api}/works?filter=doi:A|B|…&select=doi,cited_by_count`, an arXiv paper by arXiv's DataCite DOI
  10.48550/arXiv.ID), OPENALEX_BATCH papers a request, `mailto` sent for OpenAlex's polite pool, at most
  `citations_budget` requests a day.

Each answer is kept in the store's cache (`signal:github:owner/repo`, `signal:citations:ref`) with the day it was
asked, so a key asked today is not asked again until tomorrow (several runs a day share one request; the budgets are
counted in the cache too), and the counts are written into the papers (`Paper.stars`, `Paper.citations`), where the
ranking's trend reads them (`select.pool.trend`). What a service does not know (a 404, a work absent from the
answer) is kept as asked and changes nothing. A failure (a timeout, an HTTP error, a body that is not the API's
JSON, a Retry-After beyond fetch.max_wait) ends that service's part of the step with one line in the run's report;
papers go out with the counts they had, and the send never waits for it or fails because of it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from digest.errors import FetchError
from digest.models import ARXIV_DOI_PREFIX, Paper, code_repository
from digest.sources import _json
from digest.sources.fetch import Fetcher
from digest.store import Store

GITHUB_API = "https://api.github.com"
OPENALEX_API = "https://api.openalex.org"
OPENALEX_BATCH = 50  # DOIs one OpenAlex request asks for (its filter takes up to 50 values joined by "|")
MAX_BODY = 2_000_000  # bytes of one answer
MAX_COUNT = 10**12  # a count larger than any real one is not read
PREFIX = "signal:"  # + "github:owner/repo" or "citations:ref": "<day> <count>" ("<day> -" when not known)
BUDGET_PREFIX = "signal-budget:"  # + "github:" or "citations:" + the day: requests made that day
KEEP_DAYS = 30  # an answer not asked again for this long is dropped from the cache


@dataclass(frozen=True)
class SignalPolicy:
    """The `[signals]` settings."""

    github: bool = False
    github_api: str = GITHUB_API
    github_token_env: str = "GITHUB_TOKEN"
    github_budget: int = 50
    citations: str = ""  # "" (none) or "openalex"
    openalex_api: str = OPENALEX_API
    mailto: str = ""
    citations_budget: int = 20
    deadline: float = 120.0  # seconds the whole step may take in a run; no request is started after it

    @classmethod
    def of(cls, settings: Any) -> SignalPolicy:
        """From the `[signals]` settings (`config.signals`)."""
        return cls(github=bool(settings.github), github_api=settings.github_api.rstrip("/") or GITHUB_API,
                   github_token_env=settings.github_token_env, github_budget=settings.github_budget,
                   citations=settings.citations, openalex_api=settings.openalex_api.rstrip("/") or OPENALEX_API,
                   mailto=settings.mailto, citations_budget=settings.citations_budget,
                   deadline=float(settings.deadline))

    @property
    def wanted(self) -> bool:
        return self.github or bool(self.citations)


@dataclass
class SignalReport:
    """What the step did, for the run's report."""

    stars: int = 0  # repositories whose stars were read
    citations: int = 0  # papers whose citation count was read
    requests: int = 0
    unknown: int = 0  # repositories or works the services do not know
    left: int = 0  # keys not asked for want of budget or time
    changed: int = 0  # papers whose counts changed
    problems: list[str] = field(default_factory=list)  # one line a failed service
    late: bool = False  # the step's deadline passed

    def line(self) -> str:
        parts = [f"signals: {self.requests} request{'s' if self.requests != 1 else ''}",
                 f"{self.stars} repositories' stars", f"{self.citations} citation counts",
                 f"{self.changed} papers changed"]
        if self.unknown:
            parts.append(f"{self.unknown} not known")
        if self.left:
            parts.append(f"{self.left} left for a later run")
        return ", ".join(parts) + "".join(f"; {p}" for p in self.problems)


def repository(paper: Paper) -> str | None:
    """The paper's GitHub repository as "owner/repo" (`models.code_repository`), lower-case as the cache keys it
    (GitHub's names ignore case); None without one."""
    repo = code_repository(paper)
    return repo.lower() if repo else None


def work_doi(paper: Paper) -> str | None:
    """The DOI OpenAlex knows the paper by: its own, else arXiv's DataCite DOI of its arXiv id (lower-case)."""
    if paper.doi:
        return paper.doi
    return f"{ARXIV_DOI_PREFIX}{paper.arxiv_id}".lower() if paper.arxiv_id else None


def refresh(store: Store, policy: SignalPolicy, papers: Sequence[Paper], fetcher: Fetcher, day: date, *,
            clock: Callable[[], float] = time.monotonic) -> SignalReport:
    """Ask the configured services for the counts of `papers` (the window's) not asked today, starting no request
    once `policy.deadline` seconds have passed; write what they say into the papers. Never raises for a service's
    failure: that is the report's line."""
    report = SignalReport()
    if not policy.wanted:
        return report
    end = clock() + policy.deadline

    def late() -> bool:
        if clock() < end:
            return False
        if not report.late:
            report.late = True
            report.problems.append(f"the step's deadline ({policy.deadline:g} s) passed; the rest wait for the "
                                   "next run")
        return True

    now = datetime.now(UTC).replace(tzinfo=None)
    store.purge_caches(PREFIX, now - timedelta(days=KEEP_DAYS))
    store.purge_caches(BUDGET_PREFIX, now - timedelta(days=2))
    counts: dict[int, dict[str, int | None]] = {}
    if policy.github:
        _github(store, policy, papers, fetcher, day, report, counts, late)
    if policy.citations == "openalex" and not late():
        _openalex(store, policy, papers, fetcher, day, report, counts, late)
    report.changed = store.put_signals(counts)
    return report


def _github(store: Store, policy: SignalPolicy, papers: Sequence[Paper], fetcher: Fetcher, day: date,
            report: SignalReport, counts: dict[int, dict[str, int | None]], late: Callable[[], bool]) -> None:
    by_repo = _grouped(papers, repository)
    answers = _asked(store, "github", list(by_repo), day)
    token = os.environ.get(policy.github_token_env, "") if policy.github_token_env else ""
    headers = {"X-GitHub-Api-Version": "2022-11-28"} | ({"Authorization": f"Bearer {token}"} if token else {})
    budget = _Budget(store, "github", day, policy.github_budget)
    todo = sorted((r for r in by_repo if r not in answers), key=lambda r: -_newest(by_repo[r]))
    for n, repo in enumerate(todo):
        if late() or not budget.take():
            report.left += len(todo) - n
            break
        report.requests += 1
        try:
            answers[repo] = _stars(fetcher, policy.github_api, repo, headers)
        except FetchError as exc:
            report.problems.append(f"GitHub: {exc}")
            break
        finally:
            budget.save()
        store.put_cache(f"{PREFIX}github:{repo}", _kept(day, answers[repo]))
    report.stars, unknown = _written(by_repo, answers, "stars", counts)
    report.unknown += unknown


def _stars(fetcher: Fetcher, api: str, repo: str, headers: dict[str, str]) -> int | None:
    """A repository's `stargazers_count`, or None when GitHub does not know it (404, a name taken down: 451)."""
    url = f"{api}/repos/{quote(repo, safe='/')}"
    try:
        body = fetcher.get(url, accept=("application/json",), limit=MAX_BODY, headers=headers).body
    except FetchError as exc:
        if exc.status in (404, 410, 451):
            return None
        raise
    return read_stars(body, url)


def read_stars(body: bytes, url: str) -> int:
    """A "Get a repository" answer's `stargazers_count`; FetchError naming `url` when the body is not one."""
    count = _count(_object(body, url).get("stargazers_count"))
    if count is None:
        raise FetchError(url, "stargazers_count is not a count")
    return count


def _openalex(store: Store, policy: SignalPolicy, papers: Sequence[Paper], fetcher: Fetcher, day: date,
              report: SignalReport, counts: dict[int, dict[str, int | None]], late: Callable[[], bool]) -> None:
    by_doi = _grouped(papers, work_doi)
    answers = _asked(store, "citations", list(by_doi), day)
    todo = sorted((d for d in by_doi if d not in answers), key=lambda d: -_newest(by_doi[d]))
    budget = _Budget(store, "citations", day, policy.citations_budget)
    for start in range(0, len(todo), OPENALEX_BATCH):
        batch = todo[start:start + OPENALEX_BATCH]
        if late() or not budget.take():
            report.left += len(todo) - start
            break
        report.requests += 1
        try:
            found = _cited_by(fetcher, policy, batch)
        except FetchError as exc:
            report.problems.append(f"OpenAlex: {exc}")
            break
        finally:
            budget.save()
        answers.update({doi: found.get(doi) for doi in batch})
        store.put_caches({f"{PREFIX}citations:{doi}": _kept(day, found.get(doi)) for doi in batch})
    report.citations, unknown = _written(by_doi, answers, "citations", counts)
    report.unknown += unknown


def _grouped(papers: Sequence[Paper], key: Callable[[Paper], str | None]) -> dict[str, list[Paper]]:
    """The stored papers by what a service is asked about them (a repository, a DOI); those without one left out."""
    out: dict[str, list[Paper]] = {}
    for paper in papers:
        asked = key(paper)
        if asked and paper.store_id is not None:
            out.setdefault(asked, []).append(paper)
    return out


def _written(groups: dict[str, list[Paper]], answers: dict[str, int | None], name: str,
             counts: dict[int, dict[str, int | None]]) -> tuple[int, int]:
    """Each answered key's count set as `name` of its papers in `counts`; (keys with a count, keys not known)."""
    known = unknown = 0
    for key, kept in groups.items():
        if key not in answers:
            continue
        if answers[key] is None:
            unknown += 1
            continue
        known += 1
        for paper in kept:
            counts.setdefault(paper.store_id or 0, {})[name] = answers[key]
    return known, unknown


def _cited_by(fetcher: Fetcher, policy: SignalPolicy, dois: Sequence[str]) -> dict[str, int]:
    """OpenAlex's `cited_by_count` of each of `dois` it knows (by the DOI it answers with, lower-case)."""
    query = {"filter": "doi:" + "|".join(dois), "select": "doi,cited_by_count", "per-page": str(len(dois))}
    if policy.mailto:
        query["mailto"] = policy.mailto
    url = f"{policy.openalex_api}/works?{urlencode(query, safe=':|/')}"
    return read_citations(fetcher.get(url, accept=("application/json",), limit=MAX_BODY).body, url)


def read_citations(body: bytes, url: str) -> dict[str, int]:
    """The `cited_by_count` of each work of an OpenAlex list answer, by its DOI (lower-case, no resolver); a work
    without a DOI or a count is skipped. FetchError naming `url` when the body is not a list answer."""
    data = _object(body, url)
    results = data.get("results")
    if not isinstance(results, list):
        raise FetchError(url, "not an OpenAlex list: no 'results' list")
    out = {}
    for work in results:
        doi = work.get("doi") if isinstance(work, dict) else None
        if not isinstance(doi, str):
            continue
        doi = re.sub(r"^https?://(?:dx\.)?doi\.org/", "", doi.strip(), flags=re.IGNORECASE).lower()
        count = _count(work.get("cited_by_count"))
        if count is not None:
            out[doi] = count
    return out


def _object(body: bytes, url: str) -> dict[str, Any]:
    """The body as a JSON object (read with the limits of `_json`); FetchError naming the URL otherwise."""
    try:
        data = _json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FetchError(url, f"not JSON: {' '.join(str(exc).split())[:120]}") from exc
    if not isinstance(data, dict):
        raise FetchError(url, "not a JSON object")
    return data


def _count(value: object) -> int | None:
    """`value` when it is a whole number from 0 to MAX_COUNT (JSON's true is not one), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _asked(store: Store, kind: str, keys: Sequence[str], day: date) -> dict[str, int | None]:
    """What was asked about `keys` today already (a count, or None for not known)."""
    found = store.get_caches([f"{PREFIX}{kind}:{k}" for k in keys])
    out: dict[str, int | None] = {}
    for key, value in found.items():
        on, _, count = value.decode("ascii", "replace").partition(" ")
        if on == day.isoformat():
            out[key[len(PREFIX) + len(kind) + 1:]] = int(count) if count.isascii() and count.isdigit() else None
    return out


def _kept(day: date, count: int | None) -> bytes:
    return f"{day.isoformat()} {'-' if count is None else count}".encode("ascii")


def _newest(papers: Sequence[Paper]) -> int:
    return max((p.store_id or 0) for p in papers)


class _Budget:
    """Requests a service may still be sent today (counted in the store, so the day's runs share it)."""

    def __init__(self, store: Store, kind: str, day: date, limit: int) -> None:
        self.store, self.key, self.limit = store, f"{BUDGET_PREFIX}{kind}:{day.isoformat()}", limit
        text = (store.get_cache(self.key) or b"0").decode("ascii", "replace")
        self.spent = int(text) if text.isascii() and text.isdigit() else 0

    def take(self) -> bool:
        if self.spent >= self.limit:
            return False
        self.spent += 1
        return True

    def save(self) -> None:
        self.store.put_cache(self.key, str(self.spent).encode("ascii"))
