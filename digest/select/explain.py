"""Why a paper was picked: the parts of its score and the terms and papers it matched.

Computed only for the papers that are shown, so a digest of ten papers pays for ten explanations,
not for the whole pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..models import Paper
from .profile import Part, papers_unit
from .text import bigrams, columns, surface_forms, tokens

if TYPE_CHECKING:
    from .rank import Scores

MENTION_SHARE = 0.15  # a seed paper or semantic match is named when it gives this share of the raw score
LIFT = 0.5  # a liked paper is named when the learned model lifts the log-odds by this much
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
    """Score parts and reasons for the papers of one subscriber's ranking."""

    def __init__(self, scores: Scores, picks: Sequence[int]) -> None:
        self.scores = scores
        self.index = scores.index
        self.column = {int(i): n for n, i in enumerate(picks)}
        self.picks = np.asarray(picks, dtype=np.int64)
        self._keywords: dict[int, tuple[list[str], np.ndarray]] = {}

    def _keyword_values(self, n: int) -> tuple[list[str], np.ndarray]:
        """Interest n's keywords and their scores on every pick (keywords × picks), one row per keyword."""
        if n not in self._keywords:
            parts = [p for p in self.scores.interests[n].parts if p.kind == "keyword"]
            values = np.array([self.index.scores(p.unit)[self.picks] for p in parts])
            values = values.reshape(len(parts), len(self.picks))
            self._keywords[n] = [p.label for p in parts], values
        return self._keywords[n]

    def _part(self, part: Part, i: int) -> float:
        return part.coef * float(self.index.scores(part.unit)[i])

    def parts(self, i: int) -> dict[str, float]:
        """Paper i's raw score split into keywords, description, seeds and semantic (BM25 units), the
        interest's unit, the dense similarity's log-odds, the relevance before feedback, and the learned
        model's probability and share."""
        s = self.scores
        n = int(s.best[i])
        ci = s.interests[n]
        out = dict.fromkeys(("keywords", "description", "seeds"), 0.0)
        for part in ci.parts:
            out[part.kind if part.kind != "keyword" else "keywords"] += self._part(part, i)
        out["semantic"] = float(s.raw(n)[i]) - sum(out.values()) if s.semantic is not None else 0.0
        out["unit"] = s.units[n]
        out["dense"] = s.settings.dense_weight * float(s.dense[n][i]) if s.dense is not None else 0.0
        out["lexical"] = float(s.lexical_relevance[i])
        out["feedback"] = float(1 / (1 + np.exp(-s.model_logit[i]))) if s.model is not None else 0.0
        out["feedback_share"] = s.share
        return {k: round(v, 4) for k, v in out.items()}

    def reasons(self, i: int) -> tuple[str, ...]:
        """The matched keywords (strongest first), description words, and the papers it resembles."""
        s = self.scores
        n = int(s.best[i])
        ci = s.interests[n]
        raw = max(float(s.raw(n)[i]), 1e-9)
        key = (ci.key, i)  # shared by every interest with these keywords
        reasons = self.index.memo.get(key)
        if reasons is None:
            labels, values = self._keyword_values(int(s.best[i]))
            column = values[:, self.column[i]]
            strongest = [labels[k] for k in np.argsort(-column, kind="stable") if column[k] > 0]
            reasons = self.index.memo[key] = list(dict.fromkeys(
                term for label in strongest for term in self._as_matched(label, i)))
        reasons = list(reasons)
        if ci.description_words:
            cols = np.array(list(ci.description_words), dtype=np.int64)
            present = self.scores.pool.has_terms(i, cols)
            reasons += list(dict.fromkeys(ci.description_words[int(c)] for c in cols[present]))
        for part in ci.parts:
            if part.kind == "seeds" and self._part(part, i) >= MENTION_SHARE * raw:
                reasons.append(f"like seed “{_short(self._closest('seed:', ci.seed_papers, i).title)}”")
        if s.semantic is not None:
            semantic = float(s.raw(n)[i]) - float(s.lexical[n][i])
            if semantic >= MENTION_SHARE * raw:
                reasons.append(f"close in meaning ({float(s.semantic[n][i]):.2f})")
        if s.liked and s.model is not None and s.share * (s.model_logit[i] - s.lexical_logit[i]) >= LIFT:
            reasons.append(f"like “{_short(self._closest('liked1:', self._liked(), i).title)}”, marked more")
        return tuple(reasons)

    def _as_matched(self, keyword: str, i: int) -> list[str]:
        """The keyword when the paper has it (a phrase: all its word pairs), else the words of it the paper has."""
        key = ("matched", keyword, i)
        found = self.index.memo.get(key)
        if found is None:  # the same keyword and paper come up for many subscribers of a run
            found = self.index.memo[key] = self._match(keyword, i)
        return found  # type: ignore[no-any-return]

    def _match(self, keyword: str, i: int) -> list[str]:
        shown, pairs, cols = _phrase(keyword)
        if not len(pairs) or self.scores.pool.has_terms(i, pairs).all():
            return [keyword]
        present = self.scores.pool.has_terms(i, cols)
        return [word for word, hit in zip(shown, present, strict=True) if hit]

    def _liked(self) -> Sequence[Paper]:
        return self.scores.liked

    def _closest(self, prefix: str, papers: Sequence[Paper], i: int) -> Paper:
        """Of several papers, the one whose own vector scores paper i highest."""
        if len(papers) == 1:
            return papers[0]
        values = [float(self.index.scores(papers_unit(prefix, [p], self.index))[i]) for p in papers]
        return papers[int(np.argmax(values))]
