"""Why a paper was picked: the parts of its score and the terms and papers it matched.

Computed only for the papers that are shown, so a digest of ten papers pays for ten explanations,
not for the whole pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..models import Paper
from .authors import matched
from .pool import Index, Pool
from .profile import Part, papers_unit
from .scores import Scored
from .text import bigrams, columns, surface_forms, tokens

MENTION_SHARE = 0.15  # a seed paper is named when it gives this share of the raw score (words alone)
LIFT = 0.5  # a liked paper is named when the learned model lifts the log-odds by this much
NEIGHBOUR_Z = 1.5  # a library paper is named when the paper is this unusually close to the library
QUERY_Z = 3.0  # "close in meaning" when no keyword matched and the paper is this unusually close to the words
TITLE_CHARS = 60


def _short(title: str) -> str:
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1].rstrip() + "…"


@lru_cache(maxsize=50_000)
def _phrase(keyword: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """A keyword's words as written, the columns of its word pairs, and of its words."""
    words = tokens(keyword)
    forms = surface_forms(keyword)
    return tuple(forms.get(w, w) for w in words), columns(bigrams(words)), columns(words)


class Explainer:
    """Score parts and reasons for the picks of one subscriber's ranking (positions in their `Scored`)."""

    def __init__(self, pool: Pool, index: Index, scores: Scored, picks: Sequence[int]) -> None:
        self.pool, self.index, self.scores = pool, index, scores
        self.picks = np.asarray(picks, dtype=np.int64)
        self.column = {int(j): n for n, j in enumerate(picks)}
        # (per pick, as Python numbers: a digest reads them a few times each)
        self._at: list[int] = scores.papers[self.picks].tolist()
        self._best: list[int] = scores.best[self.picks].tolist()
        self._keywords: dict[int, tuple[list[str], list[list[float]]]] = {}

    def _strongest(self, n: int, j: int) -> list[str]:
        """Interest n's keywords that pick j matches, strongest first (ties in the interest's order)."""
        found = self._keywords.get(n)
        if found is None:  # every pick at once: a digest's picks share their interests
            found = self._keywords[n] = self._keyword_scores(n)
        labels, values = found
        hits = [(-v, k) for k, v in enumerate(values[self.column[j]]) if v > 0]
        if len(hits) > 1:
            hits.sort()  # by score, ties in the interest's order
        return [labels[k] for _, k in hits]

    def _keyword_scores(self, n: int) -> tuple[list[str], list[list[float]]]:
        """Interest n's keywords, and their scores of each pick (picks × keywords)."""
        parts = [p for p in self.scores.interests[n].parts if p.kind == "keyword"]
        rows = self.index.unit_rows([p.unit for p in parts])
        values = self.index.unit_scores[rows[:, None], self.scores.papers[self.picks][None, :]].T.tolist()
        return [p.label for p in parts], values

    def _part(self, part: Part, j: int) -> float:
        return part.coef * float(self.index.scores(part.unit)[self.scores.papers[j]])

    def parts(self, j: int) -> dict[str, float]:
        """Pick j's score parts: its best interest's lexical score split into keywords and description (BM25
        units) and the interest's unit, the text model's z-scores (query, model, neighbours), the relevance before
        feedback, and the learned model's probability and share."""
        s = self.scores
        n = int(s.best[j])
        out = dict.fromkeys(("keywords", "description"), 0.0)
        for part in s.interests[n].parts:
            if part.kind in ("keyword", "description"):
                out[part.kind if part.kind != "keyword" else "keywords"] += self._part(part, j)
        out["unit"] = s.units[n]
        dense = s.dense
        out["query"] = float(dense.query[n][j]) if dense is not None else 0.0
        out["model"] = float(dense.model[n][j]) if dense is not None else 0.0
        out["neighbours"] = float(dense.neighbours[n][j]) if dense is not None else 0.0
        out["lexical"] = float(s.lexical_relevance[j])
        out["feedback"] = float(1 / (1 + np.exp(-s.model_logit[j]))) if s.model_logit is not None else 0.0
        out["feedback_share"] = s.share
        return {k: round(v, 4) for k, v in out.items()}

    def reasons(self, j: int) -> tuple[str, ...]:
        """The followed authors, the matched keywords (strongest first), description words, the library paper it is
        closest to, and the liked paper it resembles."""
        s = self.scores
        c = self.column[j]
        n, i = self._best[c], self._at[c]
        ci = s.interests[n]
        paper = self.pool.papers[i]
        followed = [name for other in s.interests for name in other.interest.authors]
        reasons = [f"by {name}, whom you follow" for name in dict.fromkeys(matched(followed, paper.authors))]
        strongest = self._strongest(n, j)
        # Whole keywords only: a phrase's stray words ("KV", "cache") say little; when no keyword matched
        # whole, the strongest one is named as matched in part.
        words = [label for label in strongest if self._as_matched(label, i) == [label]]
        if not words and strongest:
            words = [f"{strongest[0]} (in part)"]
        reasons += words
        if ci.description_words:
            cols = np.array(list(ci.description_words), dtype=np.int64)
            present = self.pool.has_terms(i, cols)
            reasons += list(dict.fromkeys(ci.description_words[col] for col in cols[present].tolist()))
        dense = s.dense
        if dense is not None and n < len(s.vectors):
            vectors = s.vectors[n]
            if dense.library[n][j] and vectors.library is not None and vectors.library_titles \
                    and dense.neighbours[n][j] >= NEIGHBOUR_Z:
                closest = self.pool.dense_unit()[i] @ vectors.library.neighbours.T
                reasons.append(f"like “{_short(vectors.library_titles[int(np.argmax(closest))])}” in your library")
            elif not words and ci.interest.has_text and dense.query[n][j] >= QUERY_Z:
                reasons.append("close in meaning to your words")
        if ci.seed_papers and (dense is None):
            raw = max(float(s.raw(n)[j]), 1e-9)
            for part in ci.parts:
                if part.kind == "seeds" and self._part(part, j) >= MENTION_SHARE * raw:
                    reasons.append(f"like seed “{_short(self._closest('seed:', ci.seed_papers, i).title)}”")
        if s.liked and s.model_logit is not None and s.relevance_lift(j) >= LIFT:
            reasons.append(f"like “{_short(self._closest('liked1:', s.liked, i).title)}”, marked more")
        return tuple(reasons)

    def _as_matched(self, keyword: str, i: int) -> list[str]:
        """The keyword when paper i has it (a phrase: all its word pairs), else the words of it the paper has."""
        key = ("matched", keyword, i)
        found = self.index.memo.get(key)
        if found is None:  # the same keyword and paper come up for many subscribers of a run
            found = self.index.memo[key] = self._match(keyword, i)
        return found  # type: ignore[no-any-return]

    def _match(self, keyword: str, i: int) -> list[str]:
        shown, pairs, cols = _phrase(keyword)
        if not len(pairs) or self.pool.has_terms(i, pairs).all():
            return [keyword]
        present = self.pool.has_terms(i, cols)
        return list(dict.fromkeys(word for word, hit in zip(shown, present, strict=True) if hit))  # once each

    def _closest(self, prefix: str, papers: Sequence[Paper], i: int) -> Paper:
        """Of several papers, the one whose own vector scores paper i highest."""
        if len(papers) == 1:
            return papers[0]
        values = [float(self.index.scores(papers_unit(prefix, [p], self.index))[i]) for p in papers]
        return papers[int(np.argmax(values))]
