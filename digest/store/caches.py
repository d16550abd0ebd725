"""Caches and vectors: what the selector computes once and reads back (tables `cache` and `embeddings`).

`cache` holds bytes by key (the store's term statistics, a pool's term counts by block of papers, interests'
profiles in the text model's space and their stored matches), each with when it was written, so what no run
wrote for a while can be purged by prefix; `embeddings` holds the text model's vectors of papers and query
texts, keyed by paper and model. Nothing here is a subscriber's data: all of it can be deleted and is made again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from digest.store.engine import Base
from digest.store.tables import _now, cache, embeddings


def _upsert_caches(conn: sa.Connection, values: dict[str, bytes]) -> None:
    """Each value under its key, replacing the key's (an upsert: no delete-then-insert window for another writer)."""
    table = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(cache)
    upsert = table.on_conflict_do_update(index_elements=[cache.c.key], set_={
        "value": table.excluded.value, "updated_at": table.excluded.updated_at})
    now = _now()
    rows = [{"key": key, "value": value, "updated_at": now} for key, value in sorted(values.items())]
    for start in range(0, len(rows), 500):  # (sorted: two writers take the rows' locks in one order)
        conn.execute(upsert, rows[start:start + 500])


class CacheStore(Base):
    """The `cache` and `embeddings` tables (mixed into Store)."""

    def get_cache(self, key: str) -> bytes | None:
        with self.engine.connect() as conn:
            value = conn.execute(sa.select(cache.c.value).where(cache.c.key == key)).scalar()
        return bytes(value) if value is not None else None

    def get_caches(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The cached values of these keys (a few queries for many keys); missing keys are left out.

        Read straight from the driver, the keys in order: a ranking reads a stored profile for every interest,
        and SQLAlchemy's rows cost more than SQLite finding the keys (180,000 profiles: 2.1 s of CPU through
        SQLAlchemy, 1.4 s from the driver, 1.0 s with the keys sorted, neighbouring keys sharing the index's
        pages)."""
        wanted = sorted(set(keys))
        out: dict[str, bytes] = {}
        if not wanted:
            return out
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            if self.engine.dialect.name == "postgresql":
                cursor.execute("SELECT key, value FROM cache WHERE key = ANY(%s)", (wanted,))
                out.update((key, bytes(value)) for key, value in cursor.fetchall())
            else:
                for start in range(0, len(wanted), 500):  # stay below SQLite's bound-parameter limit
                    part = wanted[start:start + 500]
                    cursor.execute(f"SELECT key, value FROM cache WHERE key IN ({', '.join('?' * len(part))})", part)
                    out.update((key, bytes(value)) for key, value in cursor.fetchall())
            cursor.close()
        finally:
            raw.close()  # (back to the pool, which ends the read's transaction)
        return out

    def put_cache(self, key: str, value: bytes) -> None:
        """Keep `value` under `key` (replacing the key's)."""
        with self.write() as conn:
            _upsert_caches(conn, {key: value})

    def put_caches(self, values: dict[str, bytes]) -> None:
        """Keep many values at once, each replacing its key's (an upsert: two workers writing one key both succeed,
        the last one's value stays)."""
        if values:
            with self.write(serial=False) as conn:
                _upsert_caches(conn, values)

    def purge_caches(self, prefix: str, before: datetime) -> int:
        """Forget the cached values under `prefix` last written before `before`; how many."""
        with self.write(serial=False) as conn:
            return int(conn.execute(cache.delete().where(cache.c.key.startswith(prefix, autoescape=True),
                                                         cache.c.updated_at < before)).rowcount or 0)

    def embeddings(self, keys: Sequence[str], model: str) -> dict[str, np.ndarray]:
        """Stored embeddings of the papers with these keys, for one model."""
        out: dict[str, np.ndarray] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):  # stay below SQLite's bound-parameter limit
                query = sa.select(embeddings).where(embeddings.c.model == model,
                                                    embeddings.c.paper_key.in_(keys[start:start + 500]))
                for row in conn.execute(query):
                    out[row.paper_key] = np.frombuffer(row.vector, dtype="<f4")
        return out

    def put_embeddings(self, vectors: dict[str, np.ndarray], model: str) -> None:
        with self.write() as conn:
            conn.execute(embeddings.delete().where(embeddings.c.model == model,
                                                   embeddings.c.paper_key.in_(list(vectors))))
            conn.execute(embeddings.insert(), [
                {"paper_key": key, "model": model, "vector": np.asarray(v, dtype="<f4").tobytes()}
                for key, v in vectors.items()])
