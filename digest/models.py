"""Domain objects passed between pipeline stages: small, frozen, no behaviour beyond formatting."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, time
from email.message import EmailMessage

# The digest dates a command or page accepts: wide enough for any real use, narrow enough that date
# arithmetic (windows of days before, pauses after) never leaves what `datetime.date` can hold.
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2999, 12, 31)
# The largest id a database row can have (a signed 64-bit integer, SQLite's and PostgreSQL's bigint).
MAX_ROW_ID = 2**63 - 1

_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5})(v\d+)?$|^([a-z-]+(\.[A-Z]{2})?/\d{7})(v\d+)?$")
_DOI = re.compile(r"10\.\d{4,9}/\S{1,200}")
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
ARXIV_DOI_PREFIX = "10.48550/arxiv."  # arXiv's DOI of each of its papers: 10.48550/arXiv.<id>


def normalise_title(title: str) -> str:
    """Lower-case, accent-free, punctuation-free title used to recognise one paper across sources."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def clean_arxiv_id(value: str | None) -> str | None:
    """The version-less arXiv id in `value`, or None when it is not one."""
    if not value:
        return None
    match = _ARXIV_ID.match(value.strip())
    if not match:
        return None
    return match.group(1) or match.group(3)


def arxiv_version(value: str | None) -> int | None:
    """The version number of an arXiv id written with one ('2406.01234v2' gives 2), else None."""
    if not value:
        return None
    match = _ARXIV_ID.match(value.strip())
    version = match and (match.group(2) or match.group(5))
    return int(version[1:]) if version else None


def clean_doi(value: str | None) -> str | None:
    """The DOI in `value` lower-cased, without a resolver prefix ('https://doi.org/', 'doi:'), or None when it is
    not one. arXiv's own DOIs (10.48550/arXiv.ID) are None: they name the arXiv id, which is kept as that."""
    if not value:
        return None
    doi = _DOI_PREFIX.sub("", value.strip()).lower()
    if not _DOI.fullmatch(doi) or doi.startswith(ARXIV_DOI_PREFIX):
        return None
    return doi


def family_name(authors: tuple[str, ...]) -> str:
    """The first author's family name as papers are matched by it: the last word of the name, normalised like a
    title ('A. K. Sinha' and 'Anil Sinha' give 'sinha'); "" without authors."""
    words = normalise_title(authors[0]).split() if authors else []
    return words[-1] if words else ""


def paper_key(arxiv_id: str | None, title: str, doi: str | None = None) -> str:
    """Identity of a paper: its arXiv id where known, else its DOI, else its normalised title."""
    if arxiv_id:
        return arxiv_id
    return "doi:" + doi if doi else "title:" + normalise_title(title)


@dataclass(frozen=True)
class Paper:
    """One paper as a source reports it (a snapshot: upvotes are as seen on `listed_on`)."""

    title: str
    abstract: str
    arxiv_id: str | None = None  # version-less (clean_arxiv_id)
    authors: tuple[str, ...] = ()
    n_authors: int | None = None
    organization: str | None = None
    published: date | None = None
    listed_on: date | None = None
    upvotes: int | None = None
    comments: int | None = None
    stars: int | None = None  # the GitHub stars of its code repository (`github_url`), where a source or GitHub said
    citations: int | None = None  # works citing it, where an open scholarly API said (`[signals] citations`)
    url: str | None = None
    categories: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    summary: str | None = None  # the source's own one-line summary (the Daily Papers API's AI one, the authors')
    summary_by: str | None = None  # who wrote `summary`: None for a model (the source's AI), "authors" for its authors
    github_url: str | None = None
    project_url: str | None = None
    doi: str | None = None  # lower-case, no https://doi.org/ (clean_doi)
    version: int | None = None  # the version this sighting is of (arXiv's v2, bioRxiv's version 2), where known
    store_id: int | None = None  # set by the store when a paper is read back from it

    @property
    def key(self) -> str:
        return paper_key(self.arxiv_id, self.title, self.doi)

    def __hash__(self) -> int:
        # Equal papers have equal ids and titles; hashing two cached strings beats hashing 17 fields
        # (papers key the formatting caches, looked up for every paper of every digest).
        return hash((self.arxiv_id, self.title))


# github.com/OWNER/REPO in text: an owner is 1 to 39 letters, digits or hyphens, a repository name up to 100 letters,
# digits, '.', '_' and '-' (a trailing '.git' or full stop is not part of it); GitHub's own pages are not owners.
_GITHUB_REPO = re.compile(r"github\.com/([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})", re.IGNORECASE)
_NOT_OWNERS = frozenset({"orgs", "sponsors", "features", "topics", "marketplace", "settings", "about", "apps"})


def code_repository(paper: Paper) -> str | None:
    """The GitHub repository of the paper's code as "owner/repo" (as written): the source's repository link, else
    the first github.com link of its abstract; None without one."""
    for text in (paper.github_url, paper.abstract):
        for match in _GITHUB_REPO.finditer(text or ""):
            owner, name = match.group(1), match.group(2).rstrip(".")
            name = name[:-4] if name.lower().endswith(".git") else name
            if owner.lower() not in _NOT_OWNERS and name and name not in (".", ".."):
                return f"{owner}/{name}"
    return None


def is_old(paper: Paper, day: date, max_age_days: float) -> bool:
    """Whether `paper` was published more than `max_age_days` before `day` (0: none is old; undated: not old)."""
    return bool(max_age_days and paper.published and (day - paper.published).days > max_age_days)


REPLACEMENT = "\ufffd"  # what a decoder puts where bytes were not text
# Not text either: NUL and the other C0 and C1 control characters but tab, newline and carriage return; DEL; and
# surrogates, which only JSON's "\ud800" escapes make and which no encoder or database takes.
NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def mangled(paper: Paper) -> bool:
    """Whether any text of the paper holds U+FFFD (bytes that could not be decoded)."""
    texts = (paper.title, paper.abstract, paper.organization, paper.summary, paper.url, *paper.authors,
             *paper.keywords)
    return any(REPLACEMENT in text for text in texts if text)


@dataclass(frozen=True)
class RecordError:
    """A record a source could not read: where it is and what is wrong with it."""

    source: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class ParseResult:
    """What one source yielded: the papers it could read and an error per record it could not."""

    papers: tuple[Paper, ...]
    errors: tuple[RecordError, ...] = ()


@dataclass(frozen=True)
class LibraryEntry:
    """One paper of a reader's library: what it is (title, ids) and what it is about (abstract)."""

    title: str  # "" when the entry has none
    abstract: str = ""
    arxiv_id: str | None = None  # version-less (clean_arxiv_id)
    doi: str | None = None  # lower-case, no https://doi.org/; arXiv's own DOI (10.48550/arXiv.ID) is the arxiv_id
    authors: tuple[str, ...] = ()
    added: date | None = None  # when it went into the library, where the export says
    line: int = 0  # 1-based line where the entry starts in its file (0: not from a file)

    @property
    def ref(self) -> str:
        """How the store is asked for it: arXiv id, else DOI, else title."""
        return self.arxiv_id or (f"doi:{self.doi}" if self.doi else self.title)


@dataclass(frozen=True)
class Interest:
    """One topic of a subscriber: keywords and phrases, a description in words, a library of papers it is like,
    authors to follow."""

    name: str
    keywords: tuple[str, ...] = ()
    weight: float = 1.0
    description: str = ""
    seed_papers: tuple[str, ...] = ()  # arXiv ids or titles (a small library written in the profile)
    authors: tuple[str, ...] = ()  # a paper by one of them is always shown
    library: tuple[LibraryEntry, ...] = ()  # a reader's own papers (read from `library_source`)
    library_source: str = ""  # the file the library came from ("" without one)
    library_key: str = ""  # the library's digest: what the store keeps its entries and profile under

    @property
    def has_text(self) -> bool:
        return bool(self.keywords or self.description)

    @property
    def has_library(self) -> bool:
        return bool(self.seed_papers or self.library_key)


@dataclass(frozen=True)
class Subscriber:
    """A validated subscriber profile (runtime state such as unsubscribes lives in the store)."""

    email: str
    name: str = ""
    timezone: str = "UTC"
    send_at: time = time(7, 0)
    frequency: str = "daily"
    max_papers: int = 10
    interests: tuple[Interest, ...] = ()
    exclude: tuple[str, ...] = ()
    path: str = ""


@dataclass(frozen=True)
class Item:
    """A paper picked for a digest, with its score and the reasons it was picked."""

    paper: Paper
    score: float
    reasons: tuple[str, ...] = ()
    strength: str = ""  # the calibrated relevance in words ("strong match"; `select.explain`), "" for trending


AGAIN_SECTION = "Trending again"  # papers published long before the digest date (see `select.ages`)


@dataclass(frozen=True)
class Section:
    """A group of picked papers under one of the subscriber's interests (or 'Trending'), and what the digest says
    of its share of the places when the reader's interests shared them ("" otherwise)."""

    name: str
    items: tuple[Item, ...]
    note: str = ""


@dataclass(frozen=True)
class Digest:
    """Everything one subscriber gets on one date, before rendering."""

    subscriber: Subscriber
    date: date
    sections: tuple[Section, ...]
    trending: bool = False
    quiet: bool = False  # nothing passed the floor; these are trending papers instead (quiet_days = "trending")

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(item for section in self.sections for item in section.items)

    @property
    def count(self) -> int:
        return sum(len(section.items) for section in self.sections)


@dataclass(frozen=True)
class Links:
    """The per-digest URLs the footer and headers carry."""

    unsubscribe: str
    preferences: str
    unsubscribe_mailto: str | None = None
    feedback: str = ""  # + "/<paper id>/more" or "/less"
    view: str = ""  # the digest's web copy ("View in browser")


@dataclass(frozen=True)
class Rendered:
    """A digest turned into what goes into the message."""

    subject: str
    preheader: str
    html: str
    text: str
    links: Links = field(default_factory=lambda: Links("", ""))


@dataclass(frozen=True)
class Composed:
    """One subscriber's digest for one date, at every stage: selected, rendered, built into a message."""

    digest: Digest
    rendered: Rendered
    message: EmailMessage

    @property
    def paper_ids(self) -> list[int]:
        return [i.paper.store_id for i in self.digest.items if i.paper.store_id is not None]


@dataclass(frozen=True)
class Newsletter:
    """Who sends the digest: identity, links and the footer's postal address."""

    name: str = "Paper Digest"
    from_address: str = "digest@example.org"
    reply_to: str = ""
    base_url: str = "https://digest.example.org"
    postal_address: str = "Paper Digest, 1 Example Street, Example City"
    unsubscribe_mailto: str = ""


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # as `frequency = "weekly:mon"` names them


def is_delivery_day(frequency: str, day: date) -> bool:
    """Whether a subscriber with this frequency (daily, weekdays, weekly:mon ...) gets a digest on `day`."""
    if frequency == "daily":
        return True
    if frequency == "weekdays":
        return day.weekday() < 5
    return WEEKDAYS[day.weekday()] == frequency.removeprefix("weekly:")
