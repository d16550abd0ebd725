"""Why a paper was picked: how strong a match it is, and the words, papers and authors of the reader's it matched.

Computed only for the papers that are shown, so a digest of ten papers pays for ten explanations,
not for the whole pool. The reasons name only what the reader gave, whole:

- a followed author ("by Tri Dao, whom you follow");
- a keyword, a phrase only when the paper has it as a phrase (all its word pairs): never one of its words;
- a phrase of the reader's sentence (`chunks`): the sentence is cut at punctuation and stop words
  ("of" joins: *mixture of experts*) into chunks, and the words that frame a request rather than name a
  topic (`LEADING`, `TRAILING`: "I want papers on", "making", "faster") are trimmed from their ends; a chunk counts
  where the paper has a run of two or more of its words as a phrase (all its word pairs, one of them in
  no more than one paper in fifteen), a chunk of one word where the paper has it and the word is itself
  that rare. So never a stop word, a word of a longer phrase alone, or a lone common word;
- the library paper it is closest to, or the paper marked "more" it resembles, by title.

The strength is the calibrated relevance (the probability that the paper is on the interest's topic,
`scores.py`) in words: "strong match" from STRONG_MATCH (88%, log-odds SECTION_SURE: where the sections
count an interest as sure), "good match" from GOOD_MATCH (70%: seven papers in ten such on the topic),
"possible match" below (at the default floor, 0.5, a paper between one in two and seven in ten). On the
relevance benchmark's report set (`bench/why_bands.py`) 90% of strong, 74% of good and 60% of possible
matches were on the topic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from digest.models import Paper
from digest.select.authors import matched
from digest.select.pool import Index, Pool
from digest.select.profile import Part, papers_unit
from digest.select.scores import SECTION_SURE, Scored
from digest.select.text import STOP_WORDS, bigrams, columns, tokens
from digest.select.vectors import centred

MENTION_SHARE = 0.15  # a seed paper is named when it gives this share of the raw score (words alone)
LIFT = 0.5  # a liked paper is named when the learned model lifts the log-odds by this much
NEIGHBOUR_Z = 1.5  # a library paper is named when the paper is this unusually close to the library
QUERY_Z = 3.0  # "close in meaning" when no words matched and the paper is this unusually close to the words
TITLE_CHARS = 60
NEAREST = 3  # a library or liked paper is named only when it is among the pick's NEAREST of them
MAX_NAMED = 3  # ... and has been named by fewer picks of the digest than this (else the next nearest, or none)
SHARED_WORDS = 2  # what a pick and the paper it is "like" share, named in the reason
STRONG_MATCH = 1 / (1 + math.exp(-SECTION_SURE))  # 0.881
GOOD_MATCH = 0.7
COMMON_SHARE = 1 / 15  # a word (or word pair) in more papers than this names no topic on its own
# Words that frame a request rather than name its topic: before a topic ("I want papers on", "making", "recent
# work on") and after one ("... faster", "... papers"). Trimmed from the ends of a sentence's chunks, so only words
# that no topic's phrase starts (LEADING) or ends (TRAILING) with: not "novel" (novel view synthesis), "study"
# (case study), "methods" (kernel methods), "field" (radiance field), "understanding" (scene understanding).
LEADING = frozenset("""
    want wants wanted like likes love interested read follow following keep track looking find finding papers paper
    including include includes work works research recent latest current new especially particularly mainly mostly
    really generally specifically lots lot kind kinds sort sorts making make makes getting improving improve
    improves reducing reduce using use applying apply help helping better faster cheaper approaches techniques
    methods ways way
""".split())  # noqa: SIM905 - word lists read better as text (as text.STOP_WORDS)
TRAILING = frozenset("""
    papers paper work works research ideas stuff topics faster better cheaper reliably efficiently quickly easily
    possible especially particularly
""".split())  # noqa: SIM905
_PIECE = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9'’-]")  # a word, or a mark that ends a phrase
_ACRONYM_PLURAL = re.compile(r"[A-Z][A-Z0-9]*[A-Z0-9]s")  # as `text.tokens` reads them: LLMs → LLM


def _short(title: str) -> str:
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1].rstrip() + "…"


def strength(relevance: float) -> str:
    """The calibrated relevance in words (see the module doc for the thresholds)."""
    if relevance >= STRONG_MATCH:
        return "strong match"
    return "good match" if relevance >= GOOD_MATCH else "possible match"


@lru_cache(maxsize=50_000)
def _phrase(keyword: str) -> np.ndarray:
    """A phrase's columns to find in a paper: its words' and its word pairs' (none for a single word)."""
    words = tokens(keyword)
    return columns([*words, *bigrams(words)]) if len(words) > 1 else columns(())


@dataclass(frozen=True)
class Chunk:
    """A run of a sentence's words between stop words and punctuation, filler trimmed from its ends."""

    words: tuple[str, ...]  # lightly stemmed, as the index has them
    spans: tuple[tuple[int, int], ...]  # each word's place in the sentence
    cols: np.ndarray  # its words' columns, then its word pairs' (a pair alone could be another term's hash)


@lru_cache(maxsize=10_000)
def chunks(sentence: str) -> tuple[Chunk, ...]:
    """The chunks of a reader's sentence that can name a topic (see the module doc)."""
    found: list[list[tuple[str, int, int]]] = [[]]
    for piece in _PIECE.finditer(sentence):
        word = piece.group()
        if not word[0].isalnum() or (word.lower() in STOP_WORDS and word.lower() != "of"):
            found.append([])  # punctuation or a stop word ends a chunk ("of" joins one)
        elif len(word) > 1 and word.lower() != "of":
            light = tokens(word[:-1] if _ACRONYM_PLURAL.fullmatch(word) else word)
            found[-1] += [(light[0], piece.start(), piece.end())] if light else []
    out = []
    for chunk in found:
        while chunk and sentence[chunk[0][1]:chunk[0][2]].lower() in LEADING:
            chunk = chunk[1:]
        while chunk and sentence[chunk[-1][1]:chunk[-1][2]].lower() in TRAILING:
            chunk = chunk[:-1]
        if chunk:
            words = tuple(w for w, _, _ in chunk)
            out.append(Chunk(words, tuple((a, b) for _, a, b in chunk), columns([*words, *bigrams(words)])))
    return tuple(out)


@lru_cache(maxsize=10_000)
def _sentence_columns(sentence: str) -> np.ndarray:
    """Every chunk's columns in turn (looked up in a paper at once)."""
    found = [chunk.cols for chunk in chunks(sentence)]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


@lru_cache(maxsize=50_000)
def _word_set(text: str) -> frozenset[str]:
    return frozenset(tokens(text))


def shared_words(paper: Paper, title: str, index: Index, limit: int = SHARED_WORDS) -> list[str]:
    """What a pick shares with a paper it is "like" (`title`: that paper's): the phrases of that title (two words,
    else one) that the pick's title or abstract also has and that name a topic (in at most one paper in fifteen of
    the store), in the title's order, at most `limit`, as that title writes them; [] when they share none."""
    ours = _word_set(f"{paper.title}. {paper.abstract}")
    words = [(w, tokens(w)) for w in (p.group() for p in _PIECE.finditer(title)) if w[0].isalnum()]
    rare = math.log(1 / COMMON_SHARE)
    idf = index.corpus.idf()

    def named(toks: list[str]) -> bool:
        return bool(toks) and toks[0] in ours and toks[0] not in STOP_WORDS

    found: list[str] = []
    k = 0
    while k < len(words) and len(found) < limit:
        (word, toks), nxt = words[k], words[k + 1] if k + 1 < len(words) else None
        if nxt is not None and named(toks) and named(nxt[1]) and max(idf[columns([toks[0], nxt[1][0]])]) >= rare:
            found.append(f"{word} {nxt[0]}")
            k += 2
            continue
        if named(toks) and len(word) > 2 and idf[columns([toks[0]])][0] >= rare:
            found.append(word)
        k += 1
    return list(dict.fromkeys(found))


class Explainer:
    """Score parts and reasons for the picks of one subscriber's ranking (positions in their `Scored`)."""

    def __init__(self, pool: Pool, index: Index, scores: Scored, picks: Sequence[int],
                 filed: Mapping[int, int] | None = None) -> None:
        """`filed`: the interest a pick was filed under when the reader's interests shared the places (a pick not
        in it is explained by its best interest)."""
        self.pool, self.index, self.scores = pool, index, scores
        self.picks = np.asarray(picks, dtype=np.int64)
        self.column = {int(j): n for n, j in enumerate(picks)}
        # (per pick, as Python numbers: a digest reads them a few times each)
        self._at: list[int] = scores.papers[self.picks].tolist()
        self._best: list[int] = scores.best[self.picks].tolist()
        if filed:
            self._best = [filed.get(int(j), n) for j, n in zip(picks, self._best, strict=True)]
        self._keywords: dict[int, tuple[list[str], list[list[float]]]] = {}
        self._followed = [name for other in scores.interests for name in other.interest.authors]  # (the reader's)
        self._named: dict[str, int] = {}  # how many picks of the digest named each library or liked paper so far
        self._liked_of: list[int] | None = None  # each liked paper's interest (worked out on first use)

    def _strongest(self, n: int, j: int) -> list[str]:
        """Interest n's keywords that pick j matches, strongest first (ties in the interest's order)."""
        labels, values = self._keyword_scores(n)
        hits = [(-v, k) for k, v in enumerate(values[self.column[j]]) if v > 0]
        if len(hits) > 1:
            hits.sort()  # by score, ties in the interest's order
        return [labels[k] for _, k in hits]

    def _keyword_scores(self, n: int) -> tuple[list[str], list[list[float]]]:
        """Interest n's keywords, and their scores of each pick (picks × keywords): every interest's at once, on
        the picks only (scored on the whole pool, they cost as much as the window was long)."""
        if not self._keywords:
            parts = [[p for p in interest.parts if p.kind == "keyword"] for interest in self.scores.interests]
            units = [p.unit for found in parts for p in found]
            values = self.index.scores_on(units, self.scores.papers[self.picks]) if units else np.zeros((0, 0))
            start = 0
            for m, found in enumerate(parts):
                mine = values[start:start + len(found)].T.tolist() if found else [[] for _ in self.picks]
                self._keywords[m] = ([p.label for p in found], mine)
                start += len(found)
        return self._keywords[n]

    def _part(self, part: Part, j: int) -> float:
        return part.coef * float(self.index.scores(part.unit)[self.scores.papers[j]])

    def parts(self, j: int) -> dict[str, float]:
        """Pick j's score parts: its best interest's lexical score split into keywords and description (BM25
        units) and the interest's unit, the text model's z-scores (query, model, neighbours), the relevance before
        feedback, and the learned model's probability and share."""
        s = self.scores
        n = self._best[self.column[j]] if j in self.column else int(s.best[j])
        out = dict.fromkeys(("keywords", "description"), 0.0)
        for part in s.interests[n].parts:
            if part.kind in ("keyword", "description"):
                out[part.kind if part.kind != "keyword" else "keywords"] += self._part(part, j)
        out["unit"] = s.units[n]
        row = s.text_row(n)
        out["query"] = float(row.query[j]) if row is not None else 0.0
        out["model"] = float(row.model[j]) if row is not None else 0.0
        out["neighbours"] = float(row.neighbours[j]) if row is not None else 0.0
        out["lexical"] = float(s.lexical_relevance[j])
        out["feedback"] = float(1 / (1 + np.exp(-s.model_logit[j]))) if s.model_logit is not None else 0.0
        out["feedback_share"] = s.share
        return {k: round(v, 4) for k, v in out.items()}

    def strength(self, j: int) -> str:
        """How strong a match pick j is, in words, from its calibrated relevance."""
        return strength(float(self.scores.relevance[j]))

    def reasons(self, j: int) -> tuple[str, ...]:
        """The followed authors, the keywords matched whole (strongest first), the phrases of the description the
        paper has, the library paper it is closest to, and the liked paper it resembles."""
        s = self.scores
        c = self.column[j]
        n, i = self._best[c], self._at[c]
        ci = s.interests[n]
        paper = self.pool.papers[i]
        reasons = [f"by {name}, whom you follow" for name in dict.fromkeys(matched(self._followed, paper.authors))]
        # Whole keywords only: a phrase's stray words ("KV", "cache") say little.
        words = [label for label in self._strongest(n, j) if self._whole(label, i)]
        if ci.interest.description:
            phrases = self._phrases(ci.interest.description, i)
            if phrases:  # not again inside a keyword named ("agents" in LLM agents)
                said = [_word_set(label) for label in words]
                words += [f"“{p}”" for p in phrases if not any(_word_set(p) <= named for named in said)]
        reasons += words
        if s.has_text_parts and n < len(s.vectors):
            vectors = s.vectors[n]
            library = vectors.library is not None and bool(vectors.library_titles)
            unsaid = not words and ci.interest.has_text
            row = s.text_row(n) if library or unsaid else None  # (worked out only where it may count)
            named = None
            if row is not None and library and row.neighbours[j] >= NEIGHBOUR_Z:
                closeness = self.pool.dense_unit(np.array([i]))[0] @ vectors.library.neighbours.T  # type: ignore[union-attr]
                order = np.argsort(-closeness, kind="stable")
                named = self._neighbour(paper, [vectors.library_titles[k] for k in order])
                if named is not None:
                    reasons.append(f"like “{_short(named[0])}” in your library ({named[1]})")
            if named is None and row is not None and unsaid and row.query[j] >= QUERY_Z:
                reasons.append("close in meaning to your words")
        if ci.seed_papers and not s.has_text_parts:
            raw = max(float(s.raw(n)[j]), 1e-9)
            for part in ci.parts:
                if part.kind == "seeds" and self._part(part, j) >= MENTION_SHARE * raw:
                    named = self._neighbour(paper, [p.title for p in self._nearest('seed:', ci.seed_papers, i)])
                    if named is not None:
                        reasons.append(f"like “{_short(named[0])}” in your library ({named[1]})")
        if s.liked and s.model_logit is not None and s.relevance_lift(j) >= LIFT:
            ours = set(self._liked_interest(n))
            nearest = [p for p in self._nearest('liked1:', s.liked, i)[:NEAREST] if p.key in ours]
            named = self._neighbour(paper, [p.title for p in nearest])
            if named is not None:
                reasons.append(f"like “{_short(named[0])}”, which you marked more ({named[1]})")
        return tuple(reasons)

    def _neighbour(self, paper: Paper, titles: Sequence[str]) -> tuple[str, str] | None:
        """Of a pick's nearest library or liked papers (nearest first), the first among the NEAREST that fewer than
        MAX_NAMED picks of the digest named: (its title, what the two share: "both on …", or "close in meaning"
        when no word names it); None when all of them were named enough (the reason is left out)."""
        for title in titles[:NEAREST]:
            if self._named.get(title, 0) >= MAX_NAMED:
                continue
            self._named[title] = self._named.get(title, 0) + 1
            words = shared_words(paper, title, self.index)
            return title, "both on " + " and ".join(words) if words else "close in meaning"
        return None

    def _liked_interest(self, n: int) -> list[str]:
        """The keys of the liked papers that belong to interest n: the interest whose words (or library) each is
        closest to in the text model's space (all of them without the text model, or for a reader of one
        interest)."""
        s = self.scores
        if len(s.interests) < 2 or not s.vectors or self.pool.dense is None:
            return [p.key for p in s.liked]
        if self._liked_of is None:
            units = centred(self.pool.dense.papers(list(s.liked)))  # type: ignore[attr-defined]
            profiles = [v.text if v.text is not None else v.library for v in s.vectors]
            closeness = np.stack([units @ (pr.query if pr.kind == "text" else pr.centre) if pr is not None
                                  else np.full(len(units), -np.inf) for pr in profiles])
            self._liked_of = closeness.argmax(axis=0).tolist()
        return [p.key for p, m in zip(s.liked, self._liked_of, strict=True) if m == n]

    def _phrases(self, sentence: str, i: int) -> list[str]:
        """The phrases of a reader's sentence that paper i has (see the module doc), as the reader wrote them."""
        key = ("phrases", sentence, i)
        found = self.index.memo.get(key)
        if found is None:  # the same sentence and paper come up for many subscribers of a run
            found = self.index.memo[key] = self._find_phrases(sentence, i)
        return found  # type: ignore[no-any-return]

    def _find_phrases(self, sentence: str, i: int) -> list[str]:
        cols = _sentence_columns(sentence)
        present = self.pool.has_terms(i, cols).tolist()
        key = ("specific", sentence)
        specific = self.index.memo.get(key)
        if specific is None:  # which terms are rare: the store's, not the paper's
            rare = math.log(1 / COMMON_SHARE)  # the idf of a term in COMMON_SHARE of the papers
            specific = self.index.memo[key] = (self.index.corpus.idf()[cols] >= rare).tolist()
        out, at = [], 0
        for chunk in chunks(sentence):
            n, spans = len(chunk.words), chunk.spans
            has, rare = present[at:at + len(chunk.cols)], specific[at:at + len(chunk.cols)]
            at += len(chunk.cols)
            if n == 1:
                if has[0] and rare[0]:
                    out.append(sentence[spans[0][0]:spans[0][1]])
                continue
            # pair k joins words k and k + 1: the paper has it when it has the pair and both words
            pairs = [has[n + k] and has[k] and has[k + 1] for k in range(n - 1)]
            k = 0  # runs of pairs the paper has, one of them rare
            while k < len(pairs):
                end = k
                while pairs[k] and end + 1 < len(pairs) and pairs[end + 1]:
                    end += 1
                if pairs[k] and any(rare[n + k:n + end + 1]):
                    out.append(sentence[spans[k][0]:spans[end + 1][1]])
                k = end + 1
        return list(dict.fromkeys(out))

    def _whole(self, keyword: str, i: int) -> bool:
        """Whether paper i has the keyword whole (a phrase: its words and all its word pairs)."""
        key = ("whole", keyword, i)
        found = self.index.memo.get(key)
        if found is None:  # the same keyword and paper come up for many subscribers of a run
            cols = _phrase(keyword)
            found = self.index.memo[key] = not len(cols) or bool(self.pool.has_terms(i, cols).all())
        return found  # type: ignore[no-any-return]

    def _nearest(self, prefix: str, papers: Sequence[Paper], i: int) -> list[Paper]:
        """Several papers, nearest to paper i first: by the text model where the pool has it, else by how high each
        one's own words score paper i (ties in their order)."""
        if len(papers) == 1:
            return list(papers)
        if self.pool.dense is not None:
            closeness = centred(self.pool.dense.papers(list(papers))) @ self.pool.dense_unit(np.array([i]))[0]  # type: ignore[attr-defined]
            return [papers[k] for k in np.argsort(-closeness, kind="stable")]
        values = [float(self.index.scores(papers_unit(prefix, [p], self.index))[i]) for p in papers]
        return [papers[k] for k in np.argsort(-np.array(values), kind="stable")]
