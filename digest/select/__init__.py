"""Selection: score a pool of papers against a subscriber's profile, pick, group and explain.

The selector is one pass: profile → query units (`profile.py`), pool → index (`pool.py`),
(query, index) → scores (`core.py`: one reader over every paper with `scores.py`, a batch as matrix
products with `batch.py`, or stored matches with `stored.py`), scores → picks → sections (`rank.py`) →
reasons (`explain.py`). `Pool` analyses one day's papers once; `rank` orders them for one subscriber
(with the parts of every score); `select_digest` turns the picks into a `Digest`; `select_many` does it
for a batch of subscribers. The formula is in `rank.py`.
"""

from __future__ import annotations

from digest.select.core import group, select_digest, select_many
from digest.select.corpus import CorpusStats
from digest.select.pool import Embedder, Pool
from digest.select.profile import Signals
from digest.select.rank import TRENDING_SECTION, Ranked, rank
from digest.select.scores import LIKED_SECTION, SelectSettings
from digest.select.text import tokens

__all__ = ["LIKED_SECTION", "TRENDING_SECTION", "CorpusStats", "Embedder", "Pool", "Ranked", "SelectSettings",
           "Signals", "group", "rank", "select_digest", "select_many", "tokens"]
