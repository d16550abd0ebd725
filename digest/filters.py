"""Template filters: small pure functions that format papers, dates and text for the emails.

The ones that depend only on a paper or a string are memoised: across thousands of digests the
same two hundred papers are formatted again and again, and a cache hit costs less than the work.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from functools import lru_cache
from urllib.parse import quote, quote_plus

from .models import Digest, Paper

SUBJECT_LIMIT = 150
_CACHE = 16_384
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_URL_SAFE = re.compile(r"[A-Za-z0-9./-]+")


def one_line(text: str, limit: int = SUBJECT_LIMIT) -> str:
    """`text` on one line (control characters and runs of whitespace become one space), shortened to `limit`."""
    return truncate_words(_CONTROL.sub(" ", text), limit)


@lru_cache(maxsize=_CACHE)
def truncate_words(text: str, limit: int = 300) -> str:
    """Whitespace-collapsed `text`, cut at a word boundary to at most `limit` characters with "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.-—") + "…"


@lru_cache(maxsize=_CACHE)
def authors_line(paper: Paper, shown: int = 3) -> str:
    """First `shown` author names and "+N more", else "N authors", with the organisation when known."""
    if paper.authors:
        names = ", ".join(paper.authors[:shown])
        extra = len(paper.authors) - shown
        return f"{names} +{extra} more" if extra > 0 else names
    parts = [counted(paper.n_authors, "author")] if paper.n_authors else []
    return " · ".join(parts + ([paper.organization] if paper.organization else []))


def format_date(value: date | None, style: str = "short") -> str:
    """`value` as "22 Apr 2024" (short), "22 Apr" (day) or "Monday 22 April 2024" (long); "" for None."""
    if value is None:
        return ""
    # Own month names: strftime is slow and follows the process locale; the email should not.
    month = _MONTHS[value.month - 1]
    if style == "long":
        return f"{_WEEKDAYS[value.weekday()]} {value.day} {month} {value.year}"
    return f"{value.day} {month[:3]}" + ("" if style == "day" else f" {value.year}")


@lru_cache(maxsize=_CACHE)
def paper_url(paper: Paper) -> str:
    """The paper's Hugging Face page, or a Hugging Face search for its title when the arXiv id is unknown."""
    if paper.arxiv_id:
        arxiv_id = paper.arxiv_id
        return "https://huggingface.co/papers/" + (arxiv_id if _URL_SAFE.fullmatch(arxiv_id) else quote(arxiv_id))
    return "https://huggingface.co/papers?q=" + quote_plus(" ".join(paper.title.split()))


@lru_cache(maxsize=_CACHE)
def paper_meta(paper: Paper) -> str:
    """The muted line under a title: authors · published date · upvotes (parts that are known)."""
    upvotes = f"▲ {paper.upvotes}" if paper.upvotes is not None else ""
    parts = (authors_line(paper), format_date(paper.published), upvotes)
    return " · ".join(part for part in parts if part)


def counted(count: int | None, noun: str) -> str:
    """ "1 new paper", "8 new papers": `count` with `noun` in singular or plural."""
    count = count or 0
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def topics(digest: Digest, limit: int = 3) -> str:
    """The first `limit` non-empty section names, then "and N more"."""
    names = [one_line(section.name, 60) for section in digest.sections if section.items]
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def intro(digest: Digest) -> str:
    """The sentence under the header that says what this digest holds."""
    if not digest.count:
        return "Nothing new matched your interests today."
    if digest.quiet:
        return (f"Nothing new matched your interests today, so here are the "
                f"{counted(digest.count, 'top trending paper')}.")
    if digest.trending:
        return f"Today's {counted(digest.count, 'trending paper')}."
    return f"{counted(digest.count, 'new paper')} on {topics(digest, 5)}."


@lru_cache(maxsize=_CACHE)
def wrap(text: str, width: int = 72, indent: str = "", first: str | None = None) -> str:
    """`text` filled to `width` columns, each line indented (the first with `first` when given)."""
    first = indent if first is None else first
    # Cut line by line at the last space that fits: textwrap costs more than the whole HTML
    # render, and a word longer than a line (a URL) is better left whole than split.
    text, lines, room = " ".join(text.split()), [], width - len(first)
    while len(text) > room:
        cut = text.rfind(" ", 0, room + 1)
        cut = cut if cut > 0 else text.find(" ", room)
        if cut < 0:
            break
        lines.append(text[:cut])
        text, room = text[cut + 1 :], width - len(indent)
    return first + ("\n" + indent).join([*lines, text])


FILTERS: dict[str, Callable[..., str]] = {
    "one_line": one_line,
    "truncate_words": truncate_words,
    "authors_line": authors_line,
    "format_date": format_date,
    "paper_url": paper_url,
    "paper_meta": paper_meta,
    "counted": counted,
    "topics": topics,
    "intro": intro,
    "wrap": wrap,
}


def clear_caches() -> None:
    """Forget every memoised formatting result (for benchmarks that want a cold start)."""
    for function in (truncate_words, authors_line, paper_url, paper_meta, wrap):
        function.cache_clear()
