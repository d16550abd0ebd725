"""What the selector keeps about the store, made when papers or interests come in rather than at every send.

The store's term statistics (BM25F's document frequencies and field lengths) are cached in the store and
brought up to date once a run; with the text model, the papers' and the interests' embeddings are made by
the ingest, fetch, import or profile change that brings them in, and kept in the store (`dense`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from digest.models import Paper, Subscriber
from digest.select.corpus import CorpusStats
from digest.select.dense import DenseEmbedder

if TYPE_CHECKING:
    from digest.store import Store


class Analysis:
    """The store's term statistics (read once a run) and the text model's embeddings of what comes in."""

    def __init__(self, store: Store, dense: DenseEmbedder | None) -> None:
        self.store, self.dense = store, dense
        self._corpus: CorpusStats | None = None

    def corpus(self) -> CorpusStats:
        """Term statistics of the whole store: cached in it, brought up to date once per run."""
        if self._corpus is None:
            saved = self.store.get_cache(CorpusStats.KEY)
            stats = CorpusStats.from_bytes(saved) if saved else CorpusStats()
            if stats.add_texts(self.store.texts_after(stats.max_id)) or saved is None:
                self.store.put_cache(CorpusStats.KEY, stats.to_bytes())
            self._corpus = stats
        return self._corpus

    def papers(self, papers: Sequence[Paper]) -> None:
        """Analyse papers just brought in (by an ingest or a fetch) once, here, rather than in every send (and
        every worker) that reads them: the store's term statistics brought up to date, and their embeddings by
        the text model kept in the store (papers seen before are only looked up; a progress bar on a terminal)."""
        self._corpus = None
        self.corpus()
        if self.dense is not None and papers:
            self.dense.papers(list({p.key: p for p in papers}.values()))  # a file may repeat a paper many times

    def interests(self, subscribers: Sequence[Subscriber]) -> None:
        """Make the profiles of the interests of subscribers just stored (imported, or a profile file changed) in
        the text model's space and keep them in the store, so that the first send after an import reads them as
        every later send does, instead of making a million while it sends. A send still makes any it finds
        missing."""
        if self.dense is not None:
            self.dense.interests([i for s in subscribers for i in s.interests])
