"""Honest dates: a paper published long before the digest date is not presented as new.

The day's candidates are split by age (`select.max_age_days`): the recent ones make the digest as
before; the old ones (a 2021 paper back on today's trending list) can only appear in a small
section of their own, "Trending again", holding at most `select.trending_again` of them, ranked for
the subscriber like the rest (0: never shown). A paper without a known publication date counts as
recent: nothing says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date

from .models import AGAIN_SECTION, Digest, Item, Paper, Section

__all__ = ["AGAIN_SECTION", "is_old", "split", "with_again"]


def is_old(paper: Paper, day: date, max_age_days: int) -> bool:
    """Whether `paper` was published more than `max_age_days` before `day` (0: no paper is old)."""
    return bool(max_age_days and paper.published and (day - paper.published).days > max_age_days)


def split(papers: Sequence[Paper], day: date, max_age_days: int) -> tuple[list[Paper], list[Paper]]:
    """(recent, old) papers of `papers` on `day`, each in the given order."""
    recent: list[Paper] = []
    old: list[Paper] = []
    for paper in papers:
        (old if is_old(paper, day, max_age_days) else recent).append(paper)
    return recent, old


def with_again(digest: Digest, again: Digest | None) -> Digest:
    """`digest` with the picks of `again` (the old papers' digest) as one last "Trending again" section.

    Nothing is added to a digest with no recent paper: that day is a quiet day (`delivery.quiet_days`).
    """
    if again is None or not digest.count or not again.count:
        return digest
    items: tuple[Item, ...] = again.items
    return replace(digest, sections=(*digest.sections, Section(AGAIN_SECTION, items)))
