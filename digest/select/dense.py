"""The text model in the pipeline: papers' and interests' embeddings and interests' profiles, kept in the store.

A paper's embedding is computed once, by the ingest or fetch that brings it in, and kept in the
store keyed by the paper and `neural.MODEL_NAME`; an interest's words are embedded when the interest
is stored, keyed by a hash of their text. An interest's `DenseProfile` (`vectors.py`: its query, its
learned model, their reference statistics) is made from those and kept in the store's cache, so a
send reads vectors and multiplies matrices; a process keeps the last MEMO_TEXTS texts and
MEMO_PROFILES profiles it used.

A library (an interest's `library` or `seed_papers`) is read entry by entry: an entry the store
knows (by arXiv id, DOI or title) counts as the stored paper, its embedding read from the store;
any other with a title or abstract is embedded from them; one with neither (an arXiv id or DOI the
store has not seen yet) is left out and logged, never guessed. Beside its profile a library keeps its
papers' term counts (`LibraryWords`, in the store's cache under `words_key`, read in the same query as the
profile), so a send weighs the library's own words against the day's papers without analysing its text again.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from digest.models import Interest, LibraryEntry, Paper
from digest.select.corpus import Fields, PaperTerms
from digest.select.neural import DIM, MODEL_NAME, TextModel, load
from digest.select.text import ANALYZER_VERSION, N_FEATURES
from digest.select.vectors import (
    MAX_NEIGHBOURS,
    DenseProfile,
    library_key,
    library_profile,
    profiles_from_bytes,
    text_key,
    text_profiles,
)

if TYPE_CHECKING:
    from digest.store import Store

log = logging.getLogger("digest")
MEMO_TEXTS = 50_000  # query texts' embeddings a process keeps in memory (1.5 kB each)
# Interests' profiles a process keeps in memory (about 4 kB each, a library's more, with the stored bytes they are
# read from): the most used stay between batches. 20,000 held 120 MB at 10,000 readers with interests of their own,
# which no later batch asked for again; readers who share interests share a few hundred profiles.
MEMO_PROFILES = 2_000
# papers' embeddings kept in memory between calls (the rest are read from the store again): a pool keeps its own
# array of them, and a week's window held 11 MB here besides (a scheduler daemon, every day's papers)
MEMO_PAPERS = 2_000
# libraries' term counts kept in memory, in (paper, term) entries: about 300 a paper, 12 bytes each
MEMO_LIBRARY_TERMS = 1_000_000
PROGRESS_AT = 200  # papers from which an ingest on a terminal shows a progress bar


def paper_text(paper: Paper) -> str:
    return f"{paper.title}. {paper.abstract}"


def entry_text(entry: LibraryEntry) -> str:
    return ". ".join(part for part in (entry.title, entry.abstract) if part)


def interest_text(interest: Interest) -> str:
    """What an interest says in words, as the text model reads it: its keywords, then its description."""
    return ". ".join(part for part in (", ".join(interest.keywords), interest.description) if part)


def stored_text_key(text: str) -> str:
    """A query text's key in the store's embeddings table (beside the papers' keys, which have no `text:`)."""
    return "text:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


@dataclass(frozen=True, eq=False)
class LibraryWords:
    """A library's words: the term counts of the papers its profile was made from (`key`: the profile's key)."""

    key: str
    terms: PaperTerms


@dataclass(frozen=True)
class InterestVectors:
    """An interest's profiles: of its words, and of its library (None for what it does not have)."""

    text: DenseProfile | None
    library: DenseProfile | None
    library_titles: tuple[str, ...] = ()  # the library papers the profile was made from, in its order
    library_words: LibraryWords | None = None  # with a library: its papers' words


def words_key(key: str) -> str:
    """The store cache key of a library's term counts (`key`: its profile's, which ends with the library's digest)."""
    return f"library-words/{ANALYZER_VERSION}/{N_FEATURES}/{key.rsplit('/', 1)[-1]}"


class DenseEmbedder:
    """Embeddings of papers and query texts, and interests' profiles, read from the store where it has them."""

    def __init__(self, store: Store | None = None, model: TextModel | None = None, *,
                 progress: bool = False) -> None:
        self._model = model
        self.store = store
        self.progress = progress
        # (OrderedDicts: the oldest go first in O(1); a plain dict's first live entry is found past every deleted one)
        self._texts: OrderedDict[str, np.ndarray] = OrderedDict()
        self._papers: dict[str, np.ndarray] = {}
        self._profiles: OrderedDict[str, DenseProfile] = OrderedDict()
        self._words: dict[str, LibraryWords] = {}
        self._words_held = 0  # their entries

    @property
    def model(self) -> TextModel:
        if self._model is None:  # loaded on first use: status and the web pages never need it
            self._model = load()
        return self._model

    def _encode(self, texts: Sequence[str], label: str = "") -> np.ndarray:
        bar = _bar(len(texts), label) if self.progress and label and len(texts) >= PROGRESS_AT else None
        try:
            return self.model.embed(texts, progress=bar.update if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of query texts: from memory, else the store, else computed (and stored)."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        found = {t: self._texts[t] for t in dict.fromkeys(texts) if t in self._texts}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing and self.store is not None:
            keys = {stored_text_key(t): t for t in missing}
            found.update((keys[k], v) for k, v in self.store.embeddings(list(keys), MODEL_NAME).items())
            missing = [t for t in missing if t not in found]
        if missing:
            computed = dict(zip(missing, self._encode(missing, "embedding interests"), strict=True))
            if self.store is not None:
                self.store.put_embeddings({stored_text_key(t): v for t, v in computed.items()}, MODEL_NAME)
            found.update(computed)
        for text, vector in found.items():
            self._texts[text] = vector
            self._texts.move_to_end(text)  # most recently used last
        while len(self._texts) > MEMO_TEXTS:
            self._texts.popitem(last=False)
        return np.vstack([found[t] for t in texts])

    def papers(self, papers: Sequence[Paper]) -> np.ndarray:
        """Embeddings of papers: from memory, else the store, else computed (and stored)."""
        if not papers:
            return np.zeros((0, DIM), dtype=np.float32)
        keys = [p.key for p in papers]
        wanted = [k for k in dict.fromkeys(keys) if k not in self._papers]
        if wanted and self.store is not None:
            self._papers.update(self.store.embeddings(wanted, MODEL_NAME))
        missing = list({keys[n]: n for n, key in enumerate(keys) if key not in self._papers}.values())
        if missing:
            fresh = self._encode([paper_text(papers[n]) for n in missing], "embedding papers")
            computed = {keys[n]: fresh[j] for j, n in enumerate(missing)}
            if self.store is not None:
                self.store.put_embeddings(computed, MODEL_NAME)
            self._papers.update(computed)
        out = np.vstack([np.asarray(self._papers[key], dtype=np.float32) for key in keys])
        for key in list(self._papers)[:max(len(self._papers) - MEMO_PAPERS, 0)]:  # the oldest first
            del self._papers[key]
        return out

    # -- interests ----------------------------------------------------------------------------------

    def interests(self, interests: Sequence[Interest], seeds: Callable[[Interest], Sequence[Paper]] | None = None,
                  ) -> list[InterestVectors]:
        """Each interest's profiles (from memory, the store's cache, or made now and kept).

        `seeds`: the papers an interest's `seed_papers` name (as the store found them); without it the
        store is asked.
        """
        texts = [interest_text(i) if i.has_text else None for i in interests]
        keys = {t: text_key(t) for t in dict.fromkeys(texts) if t is not None}
        found = {key: self._profiles[key] for key in keys.values() if key in self._profiles}
        found.update(self._read([key for key in keys.values() if key not in found]))
        todo = [t for t, key in keys.items() if key not in found]
        if todo:
            from threadpoolctl import threadpool_limits

            vectors = self.texts(todo)
            with threadpool_limits(limits=1, user_api="blas"):  # small products: threads would only spin
                made = dict(zip([keys[t] for t in todo], text_profiles(vectors), strict=True))
            self._save(made)
            found.update(made)
        self._remember(found)  # (after this call's profiles are all in hand: remembering evicts the oldest)
        libraries = {n: self._library_papers(i, seeds) for n, i in enumerate(interests) if i.has_library}
        wanted = [k for key, _ in filter(None, libraries.values()) for k, known in (
            (key, key in self._profiles), (words_key(key), key in self._words)) if not known]
        saved = self.store.get_caches(list(dict.fromkeys(wanted))) if self.store is not None and wanted else {}
        out = []
        for n, words in enumerate(texts):
            library, titles, counts = self._library(*libraries[n], saved) if libraries.get(n) else (None, (), None)
            out.append(InterestVectors(found[keys[words]] if words is not None else None, library, titles, counts))
        return out

    def _library_papers(self, interest: Interest, seeds: Callable[[Interest], Sequence[Paper]] | None,
                        ) -> tuple[str, list[tuple[str, str, Paper | None]]] | None:
        """The key of the interest's library profile and its papers (`library_papers`); None for no papers."""
        papers = self.library_papers(interest, seeds)
        if not papers:
            return None
        digest = hashlib.sha256("\x00".join(f"{key}\x01{text}" for key, text, _ in papers).encode(
            "utf-8", "surrogatepass")).hexdigest()[:40]
        return library_key(digest), papers

    def _library(self, key: str, papers: list[tuple[str, str, Paper | None]], saved: Mapping[str, bytes],
                 ) -> tuple[DenseProfile, tuple[str, ...], LibraryWords]:
        """A library's profile and words: from memory, `saved` (what the store's cache held of this call's
        libraries, read in one go), or made now and kept."""
        profile = self._profiles.get(key) or (self._parse({key: saved[key]}).get(key) if key in saved else None)
        if profile is None:
            stored = [p for _, _, p in papers if p is not None]
            vectors = np.zeros((len(papers), DIM), dtype=np.float32)
            if stored:
                found = self.papers(stored)
                at = [n for n, (_, _, p) in enumerate(papers) if p is not None]
                vectors[at] = found
            others = [n for n, (_, _, p) in enumerate(papers) if p is None]
            if others:
                vectors[others] = self.texts([papers[n][1] for n in others])
            profile = library_profile(vectors)
            self._save({key: profile})
        self._remember({key: profile})
        titles = tuple(text.split(". ", 1)[0] for _, text, _ in papers)
        return profile, titles, self._library_words(key, papers, saved.get(words_key(key)))

    def _library_words(self, key: str, papers: Sequence[tuple[str, str, Paper | None]], stored: bytes | None,
                       ) -> LibraryWords:
        """The term counts of the library papers its profile reads (the most recent MAX_NEIGHBOURS): from memory,
        the store's cache (`stored`, read with the profile), or counted now and kept."""
        found = self._words.pop(key, None)
        if found is not None:
            self._words_held -= len(found.terms.local)
        else:
            try:
                found = LibraryWords(key, PaperTerms.from_bytes(stored)) if stored is not None else None
            except ValueError as exc:
                log.warning("a library's stored words could not be read (%s); counting them again", exc)
        if found is None:
            pairs = [(p.title, p.abstract) if p is not None else _title_abstract(text) for _, text, p in papers]
            found = LibraryWords(key, PaperTerms.of(Fields.of_texts(pairs[:MAX_NEIGHBOURS])))
            if self.store is not None:
                self.store.put_cache(words_key(key), found.terms.to_bytes())
        self._words[key] = found  # most recently used last
        self._words_held += len(found.terms.local)
        while self._words_held > MEMO_LIBRARY_TERMS and len(self._words) > 1:
            self._words_held -= len(self._words.pop(next(iter(self._words))).terms.local)
        return found

    def library_papers(self, interest: Interest, seeds: Callable[[Interest], Sequence[Paper]] | None = None,
                       ) -> list[tuple[str, str, Paper | None]]:
        """The interest's library as (key, text, stored paper or None), most recently added first; entries with
        nothing to read are logged and left out."""
        entries = list(interest.library)
        if not entries and interest.library_key and self.store is not None:
            entries = list(self.store.library_entries(interest.library_key))
        dated = sorted((e for e in entries if e.added), key=lambda e: e.added, reverse=True)  # type: ignore[arg-type, return-value]
        entries = dated + [e for e in entries if not e.added]
        refs = [r for e in entries for r in (e.arxiv_id, e.title) if r]
        known = self.store.find_papers(refs) if self.store is not None and refs else {}
        out: list[tuple[str, str, Paper | None]] = []
        for entry in entries:  # the stored paper by its arXiv id, else by its title
            paper = known.get(entry.arxiv_id or "") or known.get(entry.title)
            if paper is not None:
                out.append((paper.key, paper_text(paper), paper))
            elif entry.title or entry.abstract:
                out.append((f"entry:{entry.title}", entry_text(entry), None))
            else:
                where = f"{interest.library_source}:{entry.line}" if interest.library_source else interest.name
                log.info("%s: %s is not in the store yet, so it does not count until a source brings it in",
                         where, entry.arxiv_id or entry.doi)
        for paper in (seeds(interest) if seeds is not None else self._seed_papers(interest)):
            out.append((paper.key, paper_text(paper), paper if paper.store_id is not None else None))
        return list({key: (key, text, paper) for key, text, paper in out}.values())

    def _seed_papers(self, interest: Interest) -> list[Paper]:
        """The papers an interest's `seed_papers` name: stored ones, and titles the store lacks as text."""
        found = self.store.find_papers(interest.seed_papers) if self.store is not None and interest.seed_papers else {}
        out = []
        for ref in interest.seed_papers:
            if ref in found:
                out.append(found[ref])
            elif not (any(ch.isdigit() for ch in ref) and " " not in ref.strip()):  # a title, not an unknown id
                out.append(Paper(title=ref, abstract=""))
        return out

    def _read(self, keys: Sequence[str]) -> dict[str, DenseProfile]:
        """The stored profiles of these keys (those the store has and that can be read)."""
        if self.store is None or not keys:
            return {}
        return self._parse(self.store.get_caches(list(keys)))

    @staticmethod
    def _parse(stored: Mapping[str, bytes]) -> dict[str, DenseProfile]:
        """Profiles from their stored bytes (those that can be read)."""
        out: dict[str, DenseProfile] = {}
        for key, found in zip(stored, profiles_from_bytes(list(stored.values())), strict=True):
            if isinstance(found, DenseProfile):
                out[key] = found
            else:  # made again, and kept again
                log.warning("an interest's stored profile could not be read (%s); making it again", found)
        return out

    def _save(self, profiles: Mapping[str, DenseProfile]) -> None:
        """Keep newly made profiles in the store's cache."""
        if self.store is not None:
            for key, profile in profiles.items():
                self.store.put_cache(key, profile.to_bytes())

    def _remember(self, profiles: Mapping[str, DenseProfile]) -> None:
        """Keep these profiles in memory as the most recently used, forgetting the oldest beyond MEMO_PROFILES."""
        for key, profile in profiles.items():
            self._profiles[key] = profile
            self._profiles.move_to_end(key)
        while len(self._profiles) > MEMO_PROFILES:
            self._profiles.popitem(last=False)


def _title_abstract(text: str) -> tuple[str, str]:
    """An entry's title and abstract back from `entry_text` (a title the store lacks: the title alone)."""
    title, _, abstract = text.partition(". ")
    return title, abstract


def _bar(total: int, label: str):  # type: ignore[no-untyped-def]
    """A progress bar on a terminal's stderr (None elsewhere: logs stay clean)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit=" texts", leave=False, file=sys.stderr)
