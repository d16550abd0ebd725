"""Following authors: a paper by someone a reader follows is always shown.

Names are compared after normalisation: accents, case and punctuation dropped, "Last, First" turned
into "first last", spaces collapsed ("Tri Dao", "tri  dao", "Dao, Tri" are one name). Sources that
abbreviate first names ("T. Dao") match a followed full name on the last name and the first initial,
and only then: two full first names must be equal, so following "Tri Dao" does not bring in papers
by "Thanh Dao".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

_NOT_LETTERS = re.compile(r"[^a-z\s]+")


@lru_cache(maxsize=200_000)
def normalised(name: str) -> str:
    """The name as compared: "Last, First" → "first last", accents, case and punctuation gone."""
    if "," in name:
        last, _, first = name.partition(",")
        name = f"{first} {last}"
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return " ".join(_NOT_LETTERS.sub(" ", text.replace("-", " ")).split())


def _keys(names: Iterable[str], initials: bool) -> set[str]:
    """Each name's full key, and "~initial last" for names of several words (`initials`: only when the first is
    already an initial, as a paper's abbreviated author)."""
    out: set[str] = set()
    for name in names:
        parts = normalised(name).split()
        if parts:
            out.add(" ".join(parts))
            if len(parts) > 1 and (len(parts[0]) == 1 or not initials):
                out.add(f"~{parts[0][0]} {parts[-1]}")
    return out


def author_keys(names: Iterable[str]) -> set[str]:
    """What a paper's author list matches on: each full name, and each abbreviated name as "initial last"."""
    return _keys(names, initials=True)


def followed_keys(names: Iterable[str]) -> frozenset[str]:
    """What a followed name matches: the full name, and the "initial last" of papers that abbreviate it."""
    return frozenset(_keys(names, initials=False))


def matched(followed: Iterable[str], authors: Iterable[str]) -> list[str]:
    """The followed names (as written) that wrote a paper with these authors."""
    names = list(followed)
    if not names:  # (most readers follow no one: the paper's names are not worked out for every pick)
        return []
    keys = author_keys(authors)
    return [name for name in names if followed_keys([name]) & keys]
