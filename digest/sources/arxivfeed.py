"""Parser for arXiv feeds: the API's Atom (`export.arxiv.org/api/query`) and the listing RSS/Atom
(`rss.arxiv.org/rss/cs.LG`), both read with feedparser.

The API puts the abstract in `<summary>` and the id in `<id>http://arxiv.org/abs/2406.01234v2</id>`;
the listing feeds put "arXiv:2406.01234v1 Announce Type: new Abstract: …" in the description and
the id in the link. Both carry categories as `<category term="cs.LG">`, and a published paper's DOI
as `<arxiv:doi>`. A paper's `arxiv_id` is version-less and its `version` the one the entry names
(2406.01234v2: 2406.01234, version 2).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from digest.models import Paper, ParseResult, arxiv_version, clean_doi
from digest.sources._fields import MAX_MARKUP, BadRecord, Reading, checked, collapse, require_title, shown
from digest.sources.jsonl import _ID_PREFIX, ABS_URL, CATEGORY, _arxiv_id

_ANNOUNCE = re.compile(r"^\s*arXiv:(\S+)\s+Announce Type:\s*\S+\s+Abstract:\s*", re.IGNORECASE)


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of an arXiv Atom or RSS feed; one RecordError per entry that cannot be read."""
    import feedparser  # loaded when a feed is parsed, not by every command

    reading = Reading(source)
    # Markup inside the entries ("&lt;b&gt;", "&#60;") costs as much as the feed's own tags.
    marks = text.count("<") + text.count("&")
    if marks > MAX_MARKUP:
        reading.refuse(None, f"{marks:,} '<' and '&' (over {MAX_MARKUP:,}): not an arXiv feed")
        return reading.result()
    try:
        feed = feedparser.parse(text)
    except (ValueError, OverflowError) as error:  # its lenient parser on a character reference like &#xD800;
        reading.refuse(None, f"not a readable feed: {type(error).__name__}: {error}")
        return reading.result()
    if not feed.entries and feed.get("bozo"):
        reading.refuse(None, f"not a readable feed: {feed.get('bozo_exception')}")
        return reading.result()
    for index, entry in enumerate(feed.entries, start=1):
        try:
            reading.papers.append(_paper(entry, seen_on=seen_on))
        except BadRecord as bad:
            reading.refuse(None, f"entry {index}: {bad}")
            if reading.swamped(None):
                break
    return reading.result()


def _paper(entry: Any, *, seen_on: date) -> Paper:
    """The Paper of one feed entry; BadRecord when it has no title, abstract or arXiv id."""
    title = require_title(entry.get("title"))
    arxiv_id = _arxiv_id(entry.get("id")) or _arxiv_id(entry.get("link"))
    if arxiv_id is None:
        raise BadRecord(f"no arXiv id in id {shown(entry.get('id'))} or link {shown(entry.get('link'))}")
    summary = entry.get("summary") or ""
    announced = _ANNOUNCE.match(summary)
    abstract = collapse(_ANNOUNCE.sub("", summary))
    if not abstract:
        raise BadRecord("no abstract")
    authors = _authors(entry)
    published = _date(entry.get("published_parsed")) or _date(entry.get("updated_parsed"))
    return checked(Paper(
        title=title,
        abstract=abstract,
        arxiv_id=arxiv_id,
        authors=authors,
        n_authors=len(authors) or None,
        published=published,
        listed_on=seen_on,
        url=ABS_URL.format(arxiv_id),
        categories=_categories(entry),
        doi=clean_doi(entry.get("arxiv_doi")) if isinstance(entry.get("arxiv_doi"), str) else None,
        version=_version(entry.get("id"), entry.get("link"), announced.group(1) if announced else None),
    ))


def _version(*ids: object) -> int | None:
    """The version the first of `ids` that names one names ('http://arxiv.org/abs/2406.01234v2' gives 2)."""
    for value in ids:
        version = arxiv_version(_ID_PREFIX.sub("", value.strip())) if isinstance(value, str) else None
        if version:
            return version
    return None


def _authors(entry: Any) -> tuple[str, ...]:
    """Names from the Atom authors, else the RSS `dc:creator` line ("A, B, C")."""
    names = [collapse(author.get("name", "")) for author in entry.get("authors", [])]
    if len(names) == 1 and "," in names[0]:  # RSS: one creator line holding every name
        names = [collapse(name) for name in names[0].split(",")]
    return tuple(name for name in names if name)


def _categories(entry: Any) -> tuple[str, ...]:
    """arXiv tags, the primary one first when the feed says which it is."""
    primary = entry.get("arxiv_primary_category", {}).get("term")
    tags = [primary] if primary else []
    tags += [tag.get("term") for tag in entry.get("tags", [])]
    return tuple(dict.fromkeys(t for t in tags if isinstance(t, str) and CATEGORY.fullmatch(t)))


def _date(parsed: Any) -> date | None:
    """A date from feedparser's struct_time, else None."""
    return date(parsed.tm_year, parsed.tm_mon, parsed.tm_mday) if parsed else None

