"""Template filters: small pure functions that format papers, dates and text for the emails.

The ones that depend only on a paper or a string are memoised: across thousands of digests the
same two hundred papers are formatted again and again, and a cache hit costs less than the work.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

from digest.models import AGAIN_SECTION, Digest, Item, Paper, code_repository
from digest.sources.latex import plain

SUBJECT_LIMIT = 150
HEADLINE_LIMIT = 70  # what an inbox list shows of a subject on a desktop; phones show less
_CACHE = 16_384
# C0 and C1 controls and the Unicode line and paragraph separators: none may reach a header or a one-line text.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
ARXIV_ABS = "https://arxiv.org/abs/"
ARXIV_PDF = "https://arxiv.org/pdf/"
HF_PAPER = "https://huggingface.co/papers/"
_WEB_URL = re.compile(r"https?://[^\s<>\"'\x00-\x1f\x7f]+", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")
# A sentence saying what the paper does or found: the one an extractive TL;DR quotes.
_CONTRIBUTION = re.compile(r"\b(?:we|our|this (?:paper|work|study))\b[^.]*?\b(?:propos|present|introduc|show|find|"
                           r"found|achiev|outperform|demonstrat|reduc|improv|releas|develop)", re.I)
# A sentence stating a measured result: a verb of gain and a figure ("improves throughput by 2.6x").
_GAIN = re.compile(r"\b(?:outperform|achiev|improv|reduc|speed ?up|faster|accelerat|surpass|lower|higher|up to)", re.I)
_FIGURE = re.compile(r"\d(?:\.\d+)?\s*(?:%|x\b|×|times\b)", re.I)
TLDR_CHARS = 240
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_URL_SAFE = re.compile(r"[A-Za-z0-9./-]+")
# A URL that names an arXiv id: arXiv's abstract or PDF page, a Hugging Face paper page (new-style ids, any version).
_ID_IN_URL = re.compile(r"https?://(?:www\.|export\.)?(?:arxiv\.org/(?:abs|pdf)|huggingface\.co/papers)/"
                        r"(\d{4}\.\d{4,5})(?:v\d+)?(?:\.pdf)?/?", re.I)


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
def display_title(paper: Paper) -> str:
    """The title as a reader reads it, its LaTeX made plain text ("H$_2$O" → "H₂O", "4$\\times$" → "4×"). Only what
    is shown: the stored title stays as the source wrote it, since a paper without an arXiv id is known by its title
    (in the store and in readers' libraries), and a Hugging Face search for it looks for it as written."""
    return plain(paper.title) or paper.title


@lru_cache(maxsize=_CACHE)
def authors_line(paper: Paper, shown: int = 3) -> str:
    """Authors by name, the first `shown` and "et al." past them ("Ada Lovelace, Alan Turing, Grace Hopper et al."),
    else "N authors" (a source that counts them without naming them); the organisation after."""
    if paper.authors:
        line = ", ".join(paper.authors[:shown]) + (" et al." if len(paper.authors) > shown else "")
        parts = [line]
    else:
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


def web_url(value: str | None) -> str:
    """`value` when it is an http(s) URL with nothing a link must not hold, else "" (a source's text is untrusted)."""
    return value if value and _WEB_URL.fullmatch(value) else ""


def arxiv_id(paper: Paper) -> str:
    """The paper's arXiv id: its own, else the one its URL names (an arXiv abstract or PDF, a Hugging Face paper
    page); "" when neither."""
    if paper.arxiv_id:
        return paper.arxiv_id
    found = _ID_IN_URL.fullmatch(web_url(paper.url))
    return found.group(1) if found else ""


def _arxiv_path(paper: Paper) -> str:
    known = arxiv_id(paper)
    return known if _URL_SAFE.fullmatch(known) else quote(known)


@lru_cache(maxsize=_CACHE)
def paper_url(paper: Paper) -> str:
    """The paper's page: its arXiv abstract when the id is known, else the source's page, else (a page of Daily
    Papers names neither) a Hugging Face search for its title."""
    if arxiv_id(paper):
        return ARXIV_ABS + _arxiv_path(paper)
    return web_url(paper.url) or "https://huggingface.co/papers?q=" + quote_plus(" ".join(paper.title.split()))


@lru_cache(maxsize=_CACHE)
def paper_links(paper: Paper) -> tuple[tuple[str, str], ...]:
    """The small links under a title, as (label, URL): arXiv (the abstract page), PDF, code, project page, the
    Hugging Face page (its comment count is the card's text, not a link's name)."""
    links = []
    if arxiv_id(paper):
        links.append(("arXiv", ARXIV_ABS + _arxiv_path(paper)))
        links.append(("PDF", ARXIV_PDF + _arxiv_path(paper)))
    repo = code_repository(paper)  # the source's link, else one in the abstract
    code = web_url(paper.github_url) or (f"https://github.com/{repo}" if repo else "")
    if code:
        links.append(("Code", code))
    project = web_url(paper.project_url)
    if project and project != code:
        links.append(("Project page", project))
    if arxiv_id(paper) and (paper.upvotes is not None or paper.comments is not None or paper.summary):
        links.append(("Hugging Face", HF_PAPER + _arxiv_path(paper)))
    return tuple(links)


SUMMARY_CHARS = 1000  # the most of a model's summary shown (summaries.max_chars bounds it when it is made)


@lru_cache(maxsize=_CACHE)
def tldr(paper: Paper, made: str | None = None) -> tuple[str, str]:
    """(label, text): the source's one-line summary (an AI's, or the authors' own), else the summary a model made of
    it (`[summaries]`, passed in as `made`), else a sentence quoted from the abstract ("" when none)."""
    if paper.summary:
        return summary_label(paper), truncate_words(paper.summary, TLDR_CHARS)
    if made and one_line(made, SUMMARY_CHARS).strip():
        return "TL;DR (AI summary)", one_line(made, SUMMARY_CHARS).strip()
    sentences = [s for s in _SENTENCE_END.split(" ".join(paper.abstract.split())) if s]
    if not sentences:
        return "", ""
    chosen = max(sentences, key=lambda s: _weight(s) - sentences.index(s) * 0.01)  # ties: the earlier one
    return "From the abstract", truncate_words(chosen, TLDR_CHARS)


def summary_label(paper: Paper) -> str:
    """What a source's summary is called: "TL;DR (authors)" when the authors wrote it, else "TL;DR (AI summary)"."""
    return "TL;DR (authors)" if paper.summary_by == "authors" else "TL;DR (AI summary)"


def _weight(sentence: str) -> float:
    """How much a sentence says about what the paper found: results first, then what it proposes; not too short."""
    result = bool(_GAIN.search(sentence) and _FIGURE.search(sentence))
    return (2 * result + bool(_CONTRIBUTION.search(sentence))
            - (len(sentence) < 60) - (len(sentence) > TLDR_CHARS))


@lru_cache(maxsize=_CACHE)
def dates_line(paper: Paper, day: date) -> str:
    """Each date by what it is: "published 3 Jun" (the paper's own date; how long ago, past two months) and "listed
    12 Jun" (when the source listed it, when later), the year when not `day`'s; then upvotes."""
    parts = []
    if paper.published:
        ago = age(paper.published, day)
        parts.append(f"published {_day(paper.published, day)}" + (f" ({ago})" if ago else ""))
    if paper.listed_on and (paper.published is None or paper.listed_on > paper.published):
        parts.append(f"listed {_day(paper.listed_on, day)}")
    if paper.upvotes is not None:
        parts.append(f"▲ {paper.upvotes}")
    return " · ".join(parts)


@lru_cache(maxsize=_CACHE)
def signal_counts(paper: Paper) -> str:
    """The trend's counts besides upvotes and comments, where known: "★ 2,000 · 5 citations" (GitHub stars of its
    code, works citing it)."""
    parts = [f"★ {paper.stars:,}"] if paper.stars else []
    if paper.citations:
        parts.append(f"{paper.citations:,} citation{'s' if paper.citations != 1 else ''}")
    return " · ".join(parts)


def _day(value: date, day: date) -> str:
    """ "3 Jun" in `day`'s year, else "3 Jun 2025"."""
    return format_date(value, "day" if value.year == day.year else "short")


def age(published: date, day: date) -> str:
    """ "5 years ago", "3 months ago" for a paper older than two months on `day`, else ""."""
    days = (day - published).days
    if days < 60:
        return ""
    if days < 365:
        return f"{days // 30} months ago"
    return f"{days // 365} year{'s' if days >= 730 else ''} ago"


@lru_cache(maxsize=_CACHE)
def paper_meta(paper: Paper) -> str:
    """The muted line under a title: authors · published date · upvotes (parts that are known)."""
    upvotes = f"▲ {paper.upvotes}" if paper.upvotes is not None else ""
    parts = (authors_line(paper), format_date(paper.published), upvotes, signal_counts(paper))
    return " · ".join(part for part in parts if part)


def counted(count: int | None, noun: str) -> str:
    """ "1 new paper", "8 new papers": `count` with `noun` in singular or plural."""
    count = count or 0
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def topics(digest: Digest, limit: int = 3) -> str:
    """The first `limit` non-empty section names (not "Trending again"), then "and N more"."""
    names = [one_line(section.name, 60) for section in digest.sections if section.items
             and section.name != AGAIN_SECTION]
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def intro(digest: Digest) -> str:
    """The sentence under the header that says what this digest holds."""
    if not digest.count:
        return "Nothing new matched your interests today."
    if digest.quiet:
        return (f"Nothing new matched your interests today, so here are the "
                f"{counted(digest.count, 'top trending paper')}.")
    again = sum(len(section.items) for section in digest.sections if section.name == AGAIN_SECTION)
    if again == digest.count:
        return (f"Nothing new matched your interests today, but {counted(again, 'older paper')} on them "
                f"{'is' if again == 1 else 'are'} trending again.")
    after = f", and {counted(again, 'older paper')} trending again" if again else ""
    if digest.trending:
        return f"Today's {counted(digest.count - again, 'trending paper')}{after}."
    return f"{counted(digest.count - again, 'new paper')} on {topics(digest, 5)}{after}.{quiet_interests(digest)}"


def quiet_interests(digest: Digest, limit: int = 3) -> str:
    """" Nothing new for X and Y today." when some of a reader's several interests have no section; "" otherwise."""
    shown = {section.name for section in digest.sections}
    names = [one_line(i.name, 60) for i in digest.subscriber.interests if i.name not in shown]
    if len(digest.subscriber.interests) < 2 or not names:
        return ""
    if len(names) > limit:
        listed = f"{', '.join(names[:limit])} and {len(names) - limit} more"
    else:
        listed = " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]
    return f" Nothing new for {listed} today."


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


def shown_reasons(item: Item) -> tuple[str, ...]:
    """The reasons a card shows: not "trending: 6 upvotes" beside its own "▲ 6"."""
    if item.paper.upvotes is None:
        return item.reasons
    return tuple(reason for reason in item.reasons if not reason.startswith("trending: "))


def first_item(digest: Digest) -> Item | None:
    """The digest's top pick: the first paper of its first section (sections come in order of their best pick)."""
    return next((section.items[0] for section in digest.sections if section.items), None)


def headline(digest: Digest, limit: int = HEADLINE_LIMIT) -> str:
    """The subject: the top pick's title and how many more ("Tangram: KV cache compression + 9 more"), in `limit`."""
    top = first_item(digest)
    if top is None:
        return "Nothing new matched your interests today"
    more = f" + {digest.count - 1} more" if digest.count > 1 else ""
    lead = ""  # the subject must not present these as new papers on the reader's topics when they are not
    if digest.quiet:
        lead = "Trending on a quiet day: "
    elif all(section.name == AGAIN_SECTION for section in digest.sections):
        lead = "Trending again: "
    return lead + one_line(display_title(top.paper), limit - len(lead) - len(more)) + more


def also(digest: Digest, limit: int = 140) -> str:
    """The preheader: what the digest holds beyond the subject's paper (its topics, the next titles)."""
    if not digest.count:
        return "No paper passed your relevance floor today; your next digest comes with the next new papers."
    if digest.quiet:
        head = f"Nothing new matched your interests today: the {counted(digest.count, 'top trending paper')}"
    elif digest.trending:
        head = f"{counted(digest.count, 'trending paper')} today"
    else:
        head = f"{counted(digest.count, 'paper')} on {topics(digest, 3)}"
    top = first_item(digest)
    rest = [display_title(item.paper) for section in digest.sections for item in section.items if item is not top][:2]
    return one_line(head + (". Also: " + " · ".join(rest) if rest else "."), limit)


_ONCE: dict[tuple[Any, ...], Any] = {}


def once(value: Any, macro: Any, *args: Any) -> Any:
    """Template macro `macro` called with `value` (and `args`), its output kept: the same paper's card is made once a
    run, not once per subscriber. Only for macros whose output depends on nothing but their arguments."""
    key = (macro._func.__code__, value, *args)  # (the code object: the same across renders of one template source)
    found = _ONCE.get(key)
    if found is None:
        if len(_ONCE) >= _CACHE:
            _ONCE.clear()
        found = _ONCE[key] = macro(value, *args)
    return found


FILTERS: dict[str, Callable[..., Any]] = {
    "one_line": one_line,
    "web_url": web_url,
    "paper_links": paper_links,
    "display_title": display_title,
    "tldr": tldr,
    "dates_line": dates_line,
    "signal_counts": signal_counts,
    "headline": headline,
    "also": also,
    "once": once,
    "shown_reasons": shown_reasons,
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
    for function in (truncate_words, display_title, authors_line, paper_url, paper_meta, wrap, paper_links, tldr,
                     dates_line, signal_counts):
        function.cache_clear()
    _ONCE.clear()
