"""Selection: score the day's papers against a subscriber's interests, group them, say why.

The score of a paper for one interest is lexical: each keyword (a word or a phrase) found in the
title counts `title_weight`, found in the abstract counts 1 for the first mention and 0.5 for each
further one (at most 2.5), each weighted by how rare the keyword is in the day's pool (idf). That
relevance, times the interest's weight, is multiplied by a trending boost
`1 + upvote_weight * log(1 + upvotes) / log(1 + most upvotes in the pool)` and a recency boost
`1 + recency_weight * 0.5 ** (age in days / recency_half_life_days)`. A paper enters the digest only
if its raw match strength (the sum before idf) reaches `relevance_floor`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache

import snowballstemmer

from .models import Digest, Interest, Item, Paper, Section, Subscriber

_WORD = re.compile(r"[a-z0-9]+")
_ACRONYM_PLURAL = re.compile(r"\b([A-Z][A-Z0-9]*[A-Z0-9])s\b")  # LLMs → LLM, GPUs → GPU
_STEMMER = snowballstemmer.stemmer("english")
TRENDING_SECTION = "Trending"


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def tokens(text: str) -> tuple[str, ...]:
    """Stemmed lower-case word tokens, so that kernel/kernels and cache/caching match."""
    text = _ACRONYM_PLURAL.sub(r"\1", text).lower()
    return tuple(_stem(w) for w in _WORD.findall(text))


@dataclass(frozen=True)
class SelectSettings:
    """The knobs of the scoring formula (the `[select]` settings)."""

    relevance_floor: float = 2.0
    title_weight: float = 3.0
    upvote_weight: float = 0.5
    recency_weight: float = 0.3
    recency_half_life_days: float = 30.0


@dataclass(frozen=True)
class Match:
    """How often one keyword occurs in one paper's title and abstract."""

    title: int
    abstract: int

    def strength(self, title_weight: float) -> float:
        abstract = min(1 + 0.5 * (self.abstract - 1), 2.5) if self.abstract else 0.0
        return (title_weight if self.title else 0.0) + abstract


def _count(haystack: tuple[str, ...], needle: tuple[str, ...]) -> int:
    n = len(needle)
    first = needle[0]
    return sum(1 for i, tok in enumerate(haystack) if tok == first and haystack[i:i + n] == needle)


class Pool:
    """The papers one digest date draws from, tokenised once and shared by every subscriber."""

    def __init__(self, papers: Sequence[Paper]) -> None:
        self.papers = list(papers)
        self._titles = [tokens(p.title) for p in self.papers]
        self._abstracts = [tokens(p.abstract) for p in self.papers]
        self._postings: dict[str, set[int]] = defaultdict(set)
        for i, (title, abstract) in enumerate(zip(self._titles, self._abstracts, strict=True)):
            for tok in set(title) | set(abstract):
                self._postings[tok].add(i)
        self._matches: dict[tuple[str, ...], dict[int, Match]] = {}
        self._by_phrase: dict[str, dict[int, Match]] = {}
        self._boosts: dict[tuple[date, SelectSettings], list[float]] = {}
        self._strengths: dict[tuple[str, float], list[tuple[int, float, float]]] = {}
        self.index = {p.store_id: i for i, p in enumerate(self.papers) if p.store_id is not None}
        ups = [p.upvotes or 0 for p in self.papers]
        self.max_upvotes = max(ups, default=0)

    def matches(self, phrase: str) -> dict[int, Match]:
        """Papers (by index) containing the phrase, with counts; cached per phrase."""
        found = self._by_phrase.get(phrase)
        if found is None:
            found = self._by_phrase[phrase] = self._match_tokens(tokens(phrase))
        return found

    def boosts(self, day: date, settings: SelectSettings) -> list[float]:
        """Every paper's trending × recency boost on `day` (the same for every subscriber)."""
        key = (day, settings)
        if key not in self._boosts:
            self._boosts[key] = [_boost(paper, self, day, settings) for paper in self.papers]
        return self._boosts[key]

    def _match_tokens(self, needle: tuple[str, ...]) -> dict[int, Match]:
        if not needle:
            return {}
        if needle not in self._matches:
            candidates = set.intersection(*(self._postings.get(t, set()) for t in needle))
            found = {}
            for i in candidates:
                match = Match(_count(self._titles[i], needle), _count(self._abstracts[i], needle))
                if match.title or match.abstract:
                    found[i] = match
            self._matches[needle] = found
        return self._matches[needle]

    def strengths(self, phrase: str, title_weight: float) -> list[tuple[int, float, float]]:
        """(paper index, match strength, strength × idf) for every paper matching `phrase`; cached."""
        key = (phrase, title_weight)
        if key not in self._strengths:
            idf = self.idf(phrase)
            found = [(i, m.strength(title_weight)) for i, m in self.matches(phrase).items()]
            self._strengths[key] = [(i, strength, strength * idf) for i, strength in found]
        return self._strengths[key]

    def idf(self, phrase: str) -> float:
        """Rarer keywords say more about a paper: 1 + log((N + 1) / (df + 1))."""
        return 1.0 + math.log((len(self.papers) + 1) / (len(self.matches(phrase)) + 1))


@dataclass
class _Scored:
    """One interest's match with one paper: idf-weighted relevance, raw strength, and its parts."""

    relevance: float = 0.0
    strength: float = 0.0
    parts: list[tuple[float, str]] = field(default_factory=list)

    @property
    def reasons(self) -> tuple[str, ...]:
        """The matched keywords, the one that counted most first (computed only for picked papers)."""
        return tuple(keyword for _, keyword in sorted(self.parts, key=lambda part: -part[0]))


def _score_interest(pool: Pool, interest: Interest, title_weight: float) -> dict[int, _Scored]:
    scored: dict[int, _Scored] = {}
    for keyword in interest.keywords:
        for i, strength, weighted in pool.strengths(keyword, title_weight):
            entry = scored.get(i)
            if entry is None:
                entry = scored[i] = _Scored()
            entry.relevance += interest.weight * weighted
            entry.strength += strength
            entry.parts.append((weighted, keyword))
    return scored


def _boost(paper: Paper, pool: Pool, day: date, settings: SelectSettings) -> float:
    trend = 0.0
    if pool.max_upvotes > 0 and paper.upvotes:
        trend = math.log1p(paper.upvotes) / math.log1p(pool.max_upvotes)
    recency = 0.0
    if paper.published:
        age = max((day - paper.published).days, 0)
        recency = 0.5 ** (age / settings.recency_half_life_days)
    return (1 + settings.upvote_weight * trend) * (1 + settings.recency_weight * recency)


def _excluded(pool: Pool, phrases: Iterable[str]) -> set[int]:
    return {i for phrase in phrases for i in pool.matches(phrase)}


def _trending(pool: Pool, subscriber: Subscriber, day: date, skip: set[int],
              settings: SelectSettings) -> tuple[Section, ...]:
    boosts = pool.boosts(day, settings)
    ranked = sorted((i for i in range(len(pool.papers)) if i not in skip),
                    key=lambda i: (-(pool.papers[i].upvotes or 0), -boosts[i], i))
    items = []
    for i in ranked[:subscriber.max_papers]:
        paper = pool.papers[i]
        reason = f"trending: {paper.upvotes} upvotes" if paper.upvotes else "new today"
        items.append(Item(paper=paper, score=float(paper.upvotes or 0), reasons=(reason,)))
    return (Section(TRENDING_SECTION, tuple(items)),) if items else ()


def _personal(pool: Pool, subscriber: Subscriber, day: date, skip: set[int],
              settings: SelectSettings) -> tuple[Section, ...]:
    best: dict[int, tuple[float, Interest, _Scored]] = {}
    boosts = pool.boosts(day, settings)
    for interest in subscriber.interests:
        for i, scored in _score_interest(pool, interest, settings.title_weight).items():
            if i in skip or scored.strength < settings.relevance_floor:
                continue
            score = scored.relevance * boosts[i]
            if i not in best or score > best[i][0]:
                best[i] = (score, interest, scored)
    top = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:subscriber.max_papers]
    groups: dict[str, list[Item]] = {}
    for i, (score, interest, scored) in top:
        groups.setdefault(interest.name, []).append(Item(pool.papers[i], round(score, 4), scored.reasons))
    return tuple(Section(name, tuple(items)) for name, items in groups.items())


def select_digest(pool: Pool, subscriber: Subscriber, *, day: date, received: set[int],
                  settings: SelectSettings) -> Digest:
    """Pick, rank and group the papers of `pool` for one subscriber on one date."""
    skip = {pool.index[paper_id] for paper_id in received if paper_id in pool.index}
    skip |= _excluded(pool, subscriber.exclude)
    if not subscriber.interests:
        return Digest(subscriber, day, _trending(pool, subscriber, day, skip, settings), trending=True)
    return Digest(subscriber, day, _personal(pool, subscriber, day, skip, settings))
