"""A subscriber's profile as query units: keywords, description and seed papers.

Each interest is a weighted sum of units, every unit a weighted set of terms scored with BM25F:

- a keyword or phrase: its stemmed words and its bigrams (a phrase's single words count
  `PHRASE_WORD_WEIGHT`, so *speculative decoding* is about the phrase, not about every *decoding*);
- the description: its words and bigrams, each counting `description_weight`;
- the seed papers: the unit-length centroid of their BM25F vectors, times `seed_weight`.

Each interest also has a reference score (`reference`): what one mention of a typical one of its
keywords in an abstract scores. The calibration in `rank.py` reads a paper's score in those units,
so a twelve-keyword interest and a three-keyword one, rare words and common ones, mean the same by
the same number. Feedback is a learned model (`learn.py`), not part of the query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from digest.models import Interest, Paper, normalise_title
from digest.select.learn import FeedbackModel
from digest.select.pool import Index, Unit
from digest.select.text import STEM_WEIGHT, bigrams, columns, stems, tokens

PHRASE_WORD_WEIGHT = 0.5
DESCRIPTION_WORDS = 3.0  # a description is matched like a keyword when this many of its words are
SEED_SIMILARITY = 0.3  # a paper like the seeds scores this share of what the seeds score themselves


@dataclass(frozen=True)
class Signals:
    """What the store knows that shapes one subscriber's ranking."""

    received: frozenset[int] = frozenset()
    liked: tuple[Paper, ...] = ()
    disliked: tuple[Paper, ...] = ()
    seeds: Mapping[str, Paper] = field(default_factory=dict)  # a profile's seed reference → its paper
    model: FeedbackModel | None = None  # learned from liked, disliked and seed papers (None: learned on the pool)


@dataclass(frozen=True)
class Part:
    """One unit of an interest with its coefficient and what the reasons call it."""

    unit: Unit
    coef: float
    kind: str  # keyword | description | seeds
    label: str


@dataclass(frozen=True)
class CompiledInterest:
    """An interest ready to score: its parts, and its seed papers."""

    interest: Interest
    parts: tuple[Part, ...]
    seed_papers: tuple[Paper, ...] = ()
    key: object = None  # what interests with the same words share (memo keys)


def _unit(key: str, weighted: Mapping[str, float]) -> Unit:
    names = list(weighted)
    cols = columns(names)
    merged: dict[int, float] = {}
    for col, name in zip(cols.tolist(), names, strict=True):
        merged[col] = merged.get(col, 0.0) + weighted[name]
    return Unit(key, np.array(list(merged), dtype=np.int64), np.array(list(merged.values()), dtype=np.float64))


@lru_cache(maxsize=100_000)
def keyword_unit(keyword: str) -> Unit:
    """A keyword or phrase: its words and bigrams, the words of a phrase counting less."""
    words = tokens(keyword)
    word_weight = PHRASE_WORD_WEIGHT if len(words) > 1 else 1.0
    weighted = dict.fromkeys(words, word_weight)
    weighted.update(dict.fromkeys(bigrams(words), 1.0))
    found = stems(keyword)
    for stem in found:
        weighted[stem] = weighted.get(stem, 0.0) + STEM_WEIGHT * word_weight
    # the stems in the key too: words light-stemmed alike can have other stems ("poses": pos, ~pose; "POS": pos, ~pos)
    return _unit("kw:" + " ".join(words) + "|" + " ".join(found), weighted)


@lru_cache(maxsize=100_000)
def keyword_part(keyword: str) -> Part:
    """A keyword as a part of an interest (shared: parts are immutable, and keywords recur across profiles)."""
    return Part(keyword_unit(keyword), 1.0, "keyword", keyword)


@lru_cache(maxsize=10_000)
def description_unit(text: str) -> Unit:
    """A description's words and bigrams, and its words' stems."""
    words, found = tokens(text), stems(text)
    weighted = dict.fromkeys([*words, *bigrams(words)], 1.0)
    weighted.update(dict.fromkeys(found, STEM_WEIGHT))
    return _unit("desc:" + " ".join(words) + "|" + " ".join(found), weighted)  # (stems: as a keyword's)


def seed_papers(interest: Interest, seeds: Mapping[str, Paper]) -> tuple[Paper, ...]:
    """The papers an interest's seed references name; a title the store lacks still counts as text."""
    found = []
    for ref in interest.seed_papers:
        paper = seeds.get(ref)
        if paper is None and not _looks_like_id(ref):
            paper = Paper(title=ref, abstract="")
        if paper is not None:
            found.append(paper)
    return tuple(found)


def _looks_like_id(ref: str) -> bool:
    return any(ch.isdigit() for ch in ref) and " " not in ref.strip()


def papers_unit(prefix: str, papers: Sequence[Paper], index: Index) -> Unit:
    """The unit-length centroid of some papers' BM25F vectors, as a query unit."""
    key = prefix + "|".join(sorted(p.key or normalise_title(p.title) for p in papers))
    if key not in index.memo:
        index.memo[key] = Unit(key, *index.vector(papers))
    return index.memo[key]  # type: ignore[no-any-return]


def compile_interest(interest: Interest, index: Index, seeds: Mapping[str, Paper], *,
                     description_weight: float, seed_weight: float, with_seeds: bool = True) -> CompiledInterest:
    """The parts of one interest (its words; its seed papers' centroid too, `with_seeds`, when the text model does
    not read them as a library)."""
    parts = [keyword_part(k) for k in interest.keywords]
    if interest.description:
        parts.append(Part(description_unit(interest.description), description_weight, "description", "description"))
    papers = seed_papers(interest, seeds)
    if papers and with_seeds:
        parts.append(Part(papers_unit("seeds:", papers, index), seed_weight, "seeds", "seed papers"))
    return CompiledInterest(interest, tuple(parts), papers)


def unit_reference(unit: Unit, kind: str, idf: np.ndarray) -> float:
    """What one part scores on one mention in an abstract of average length (before its coefficient).

    A keyword's full match scores the sum of its terms' weights × idf; a description counts as
    matched when DESCRIPTION_WORDS of its words are; seed papers when a paper is SEED_SIMILARITY as
    close to them as they are to themselves.
    """
    full = float(unit.weights @ idf[unit.cols]) if len(unit.cols) else 0.0
    if kind == "description":
        full *= min(1.0, DESCRIPTION_WORDS / max(len(unit.cols) / 3, 1.0))  # its words, bigrams and stems
    elif kind == "seeds":
        full *= SEED_SIMILARITY
    return full


def mean_reference(values: Sequence[float]) -> float:
    """The interest's unit: the mean of its parts' references (1 when none has any)."""
    positive = [v for v in values if v > 0]
    return sum(positive) / len(positive) if positive else 1.0


def reference(parts: Sequence[Part], idf: np.ndarray) -> float:
    """What a typical part of the interest scores on one mention: the unit its calibration reads scores in."""
    return mean_reference([part.coef * unit_reference(part.unit, part.kind, idf) for part in parts])
