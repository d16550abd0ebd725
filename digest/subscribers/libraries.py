"""A reader's own library of papers, as Zotero, Mendeley and Paperpile export it, read into entries (title,
abstract, arXiv id, DOI) that can become an interest profile.

Formats, told apart by the content: BibTeX (bibtexparser), RIS (rispy), CSL-JSON (the standard json module, behind
a nesting check), and a plain list of arXiv ids and DOIs, one a line. The file is a reader's upload, so every limit
below is enforced before or while parsing: what passes one is cut or skipped with a `path:line: reason` problem, or
refuses the whole file with a LibraryError. Parsing is bounded so that a hostile file costs about a second at most.
A problem says where (file and line) and why, never what the line holds: a library path may name a file that is no
library at all, and its lines must not reach a terminal, a log or a web page.

`added` (when the reader put the paper in the library) is read only from fields that say so:
- BibTeX: `timestamp` (JabRef), `date-added` (BibDesk), `added-at` (BibSonomy). Not `urldate`, `date` or `year`.
- RIS: `Y2`, the access date (Zotero writes when the item was saved). Never `DA`: the publication date.
- CSL-JSON: `accessed` (Zotero's "Accessed", set when the item was saved from the web).
A value that is not a full year-month-day gives None.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from itertools import islice
from pathlib import Path

import bibtexparser
import rispy
from bibtexparser.model import Entry, ParsingFailedBlock

from digest.errors import DigestError
from digest.models import FIRST_DAY, LAST_DAY, REPLACEMENT, Interest, LibraryEntry, clean_arxiv_id
from digest.sources._json import too_deep

MAX_FILE_BYTES = 20_000_000  # a file's bytes (a text's characters for parse_library); a larger one is refused
MAX_ENTRIES = 2_000  # entries kept; from the next usable one on, the rest of the file is skipped (one problem)
MAX_SKIPPED = 1_000  # unusable records reported; at the next one reading stops (a file of junk is not walked)
MAX_TITLE_CHARS = 500  # the source parsers' limit; a longer title is cut at a word, with a problem
MAX_ABSTRACT_CHARS = 10_000  # arXiv allows 1,920; a longer abstract is cut at a word, with a problem
MAX_AUTHORS = 100  # names kept per entry (the first ones), with a problem when there are more
MAX_AUTHOR_CHARS = 200  # a longer name is cut, with a problem
MAX_LINES = 300_000  # lines read of a RIS file or an id list (a RIS export of 2,000 entries has ~80,000)
MAX_JSON_DEPTH = 12  # nesting of CSL-JSON (Zotero's needs 5); deeper is refused before json recurses into it
MAX_JSON_INT_DIGITS = 20  # a longer JSON number reads as null (int() refuses 4,300+ digits, slowly)
MAX_BIBTEX_BLOCKS = 6_000  # @-blocks handed to bibtexparser (entries, @string, @comment, broken ones)
# Braces, quotes, commas, '=', '@', backslashes and line breaks: bibtexparser walks each in Python (~1 us), and
# each backslash is a LaTeX command we decode. A Zotero export of 2,000 entries with abstracts: ~250,000 (est.).
MAX_BIBTEX_MARKS = 600_000
RAW_FACTOR = 4  # a field is read up to 4x its limit (LaTeX shrinks when decoded); past that it is not looked at

NOT_USABLE = "not usable: no title, arXiv id or DOI"
NOT_AN_ID = "not an arXiv id or DOI (each line of a list starts with one; '#' starts a comment): skipped"

# bibtexparser logs each broken block (and its own failures) with the block's text and without the file's name:
# none of it is shown, since what a file holds is never echoed; each is a problem with file:line here.
logging.getLogger("bibtexparser").setLevel(logging.CRITICAL + 1)


class LibraryError(DigestError):
    """The whole file cannot be read as a library; the message names the file (and line) and says why."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")
        self.path, self.reason, self.line = path, reason, line


@dataclass(frozen=True)
class Library:
    """What a library file yielded: its format, the usable entries, and a `path:line: reason` per problem."""

    path: str
    format: str  # "bibtex" | "ris" | "csl-json" | "ids"
    entries: tuple[LibraryEntry, ...]
    problems: tuple[str, ...]


class _Refused(Exception):
    """The whole file is refused; parse_library names the file."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line


_Item = tuple[int, LibraryEntry | None, list[str]]  # (line, entry or None when skipped, problems)


def read_library(path: Path) -> Library:
    """The library in the file at `path`; LibraryError when the file as a whole cannot be read."""
    path = Path(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe or a device would block, or never end
            raise LibraryError(str(path), "not a regular file: give the path of an exported library file")
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)  # never more, whatever the file claims to be
    except OSError as error:
        raise LibraryError(str(path), f"cannot read it: {error.strerror or error}") from None
    return library_of_bytes(data, str(path))


def library_of_bytes(data: bytes, where: str) -> Library:
    """The library in a file's bytes (`where` names it in messages: a path, an uploaded file's name)."""
    if len(data) > MAX_FILE_BYTES:
        raise LibraryError(where, f"larger than {MAX_FILE_BYTES:,} bytes: not a library export we read")
    try:
        text = _decode(data)
    except _Refused as refused:
        raise LibraryError(where, refused.reason, refused.line) from None
    return parse_library(text, where)


def read_upload(where: str, data: bytes | str) -> Library:
    """The library a reader uploaded (a file's bytes) or pasted (text) on a web page; LibraryError as for a file."""
    return library_of_bytes(data, where) if isinstance(data, bytes) else parse_library(data, where)


def library_interest(name: str, library: Library) -> Interest:
    """An interest made of a library a reader uploaded (the store keeps the entries under `library_key`). It has no
    `library_source`: that names a file on this machine, which a profile file's sync reads again and an export
    writes out, and an upload is none."""
    return Interest(name, library=library.entries, library_key=digest_of(library.entries))


def parse_library(text: str, where: str) -> Library:
    """The library in `text` (`where` names it in messages); LibraryError when it cannot be read as a whole."""
    try:
        text = _checked(text)
        kind = _format_of(text)
        return _collect(where, kind, _READERS[kind](text))
    except _Refused as refused:
        raise LibraryError(where, refused.reason, refused.line) from None


def _decode(data: bytes) -> str:
    """UTF-8 text of the bytes (a BOM dropped); _Refused for UTF-16, binary content or other encodings."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise _Refused("UTF-16 text: export the library as UTF-8")
    if (nul := data.find(b"\0")) >= 0:
        raise _Refused("binary content (a NUL byte): not a library export", data.count(b"\n", 0, nul) + 1)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise _Refused(f"not UTF-8 (byte 0x{data[error.start]:02x}): export the library as UTF-8", line) from None


def _checked(text: str) -> str:
    """`text` with one kind of line break and no BOM; _Refused when too long, binary or empty."""
    if len(text) > MAX_FILE_BYTES:
        raise _Refused(f"longer than {MAX_FILE_BYTES:,} characters: not a library export we read")
    if (nul := text.find("\0")) >= 0:
        raise _Refused("binary content (a NUL character): not a library export", text.count("\n", 0, nul) + 1)
    text = text.removeprefix("\ufeff")
    if "\r" in text:  # Windows and old Mac line breaks, so that line numbers count what an editor shows
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise _Refused("empty: no entries")
    return text


_BIBTEX_START = re.compile(r"^[ \t]*@[A-Za-z]+[ \t]*[{(]", re.MULTILINE)
_RIS_START = re.compile(r"\s*TY  -")


def _format_of(text: str) -> str:
    """The format of `text`, from its content; _Refused when it is none we read."""
    if text.lstrip()[:1] in ("[", "{"):
        return "csl-json"
    if _RIS_START.match(text):
        return "ris"
    if _BIBTEX_START.search(text):
        return "bibtex"
    words = (word for word in map(_id_word, text.split("\n", MAX_LINES)) if word)
    if any(_bare_arxiv(word) or _doi(word) for word in islice(words, 100)):  # one of the first 100 names a paper
        return "ids"
    raise _Refused("not a library export: expected BibTeX, RIS, CSL-JSON or a list of arXiv ids and DOIs")


def _collect(where: str, kind: str, items: Iterable[_Item]) -> Library:
    """The Library of a reader's items, applying MAX_ENTRIES and MAX_SKIPPED."""
    entries: list[LibraryEntry] = []
    problems: list[str] = []
    skipped = 0
    for line, entry, notes in items:
        if entry is not None and len(entries) == MAX_ENTRIES:
            problems.append(f"{where}:{line}: over {MAX_ENTRIES:,} entries: this one and the rest are skipped")
            break
        if entry is None and notes:
            skipped += 1
            if skipped > MAX_SKIPPED:
                problems.append(f"{where}:{line}: over {MAX_SKIPPED:,} unusable records: the rest is skipped")
                break
        problems.extend(f"{where}:{line}: {note}" for note in notes)
        if entry is not None:
            entries.append(entry)
    return Library(where, kind, tuple(entries), tuple(problems))


# -- one entry, whatever the format ----------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")  # lone halves (JSON's "\ud800"): no encoder takes them
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _entry(line: int, decode: Callable[[str], str], *, title: object, abstract: object = "",
           authors: Iterable[object] = (), arxiv_id: str | None = None, doi: str | None = None,
           added: date | None = None) -> _Item:
    """One record's item: its fields decoded, cleaned and cut to their limits; skipped when it names no paper."""
    notes: list[str] = []
    text = _text(title, decode, MAX_TITLE_CHARS, "title", notes)
    if not (text or arxiv_id or doi):
        return line, None, [NOT_USABLE]
    about = _text(abstract, decode, MAX_ABSTRACT_CHARS, "abstract", notes)
    names = _names(authors, decode, notes)
    return line, LibraryEntry(text, about, arxiv_id, doi, names, added, line), list(dict.fromkeys(notes))


def _text(raw: object, decode: Callable[[str], str], limit: int, what: str, notes: list[str]) -> str:
    """Plain text of a raw field, cut at a word to `limit` characters (noted); "" for anything but a string."""
    if not isinstance(raw, str):
        return ""
    text = _clean(decode(raw[: limit * RAW_FACTOR]))
    if len(text) <= limit and len(raw) <= limit * RAW_FACTOR:
        return text
    notes.append(f"{what} longer than {limit:,} characters: cut")
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip()


def _clean(text: str) -> str:
    """`text` in NFC, lone surrogates replaced, control characters and runs of whitespace made one space."""
    if text.isascii() and text.isprintable():  # most fields: nothing to replace or compose
        return " ".join(text.split())
    text = _CONTROL.sub(" ", _SURROGATE.sub(REPLACEMENT, text))
    return " ".join(unicodedata.normalize("NFC", text).split())


def _names(raw: Iterable[object], decode: Callable[[str], str], notes: list[str]) -> tuple[str, ...]:
    """Up to MAX_AUTHORS names, each as 'First Last'; more than that, or a name too long, is noted."""
    names = list(islice(raw, MAX_AUTHORS + 1))
    if len(names) > MAX_AUTHORS:
        notes.append(f"over {MAX_AUTHORS} authors: the first {MAX_AUTHORS} kept")
    kept = (_text(_first_last(name), decode, MAX_AUTHOR_CHARS, "author name", notes) for name in names[:MAX_AUTHORS])
    return tuple(name for name in kept if name)


def _first_last(name: object) -> str:
    """'Last, First' (or 'Last, Jr, First') as 'First Last (Jr)'; other names as they are."""
    if not isinstance(name, str):
        return ""
    parts = [part.strip() for part in name[: MAX_AUTHOR_CHARS * RAW_FACTOR].split(",")]
    if len(parts) == 2 and all(parts):
        return f"{parts[1]} {parts[0]}"
    if len(parts) == 3 and parts[0] and parts[2]:
        return f"{parts[2]} {parts[0]} {parts[1]}"
    return name


def _plain(text: str) -> str:
    """RIS and id lists hold plain text: nothing to decode."""
    return text


# -- identifiers and dates -------------------------------------------------------------------------------------

_ID = r"(\d{4}\.\d{4,5}(?:v\d+)?|[a-z-]+(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?)(?!\d)"
# arXiv ids where exporters put them: an abs/pdf URL, arXiv's DOI, "arXiv:ID" (as in "arXiv preprint arXiv:ID").
_ARXIV_IN = re.compile(r"(?i:arxiv\.org/(?:abs|pdf|html)/|10\.48550/arxiv\.|\barxiv:\s{0,3})" + _ID)
_ARXIV_PREFIX = re.compile(r"^(?:arxiv:\s?|https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/"
                           r"|(?:https?://(?:dx\.)?doi\.org/)?10\.48550/arxiv\.)", re.IGNORECASE)
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s?)", re.IGNORECASE)
_DOI = re.compile(r"10\.\d{4,9}/\S{1,300}")
_ARXIV_DOI = re.compile(r"10\.48550/arxiv\.", re.IGNORECASE)
_DATE = re.compile(r"\s*(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)")


def _bare_arxiv(value: object) -> str | None:
    """The arXiv id a whole value is ('2401.01234v2', 'arXiv:hep-th/9901001', an abs or pdf URL, arXiv's DOI)."""
    if not isinstance(value, str) or len(value) > 200:
        return None
    return clean_arxiv_id(_ARXIV_PREFIX.sub("", value.strip()).removesuffix(".pdf"))


def _arxiv_in(*values: object) -> str | None:
    """The first arXiv id found inside the values (a URL, arXiv's DOI, 'arXiv:ID'), or None."""
    for value in values:
        if isinstance(value, str) and (found := _ARXIV_IN.search(value)) and (arxiv_id := clean_arxiv_id(found[1])):
            return arxiv_id
    return None


def _doi(*values: object) -> str | None:
    """The first DOI among the values (bare, 'doi:', or a doi.org URL), lower-case; arXiv's own DOI is not one."""
    for value in values:
        if isinstance(value, str) and len(value) < 400:
            text = _DOI_PREFIX.sub("", value.strip()).replace("\\_", "_")  # JabRef escapes '_' in BibTeX
            if _DOI.fullmatch(text) and not _ARXIV_DOI.match(text):
                return text.lower()
    return None


def _added(value: object) -> date | None:
    """The date of '2024-01-15', '2024/01/15/10:20:30', '2024.01.15 ...' or CSL {"date-parts": [[y, m, d]]}."""
    if isinstance(value, dict):
        parts = value.get("date-parts")
        first = parts[0] if isinstance(parts, list) and parts and isinstance(parts[0], list) else []
        ok = len(first) >= 3 and all(isinstance(p, int | str) and not isinstance(p, bool) for p in first[:3])
        value = "-".join(str(part)[:4] for part in first[:3]) if ok else value.get("raw")
    if not isinstance(value, str) or not (found := _DATE.match(value)):
        return None
    try:
        day = date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:
        return None
    return day if FIRST_DAY <= day <= LAST_DAY else None


# -- BibTeX ----------------------------------------------------------------------------------------------------

_BIBTEX_BLOCK = re.compile(r"@\w*[ \t]*(?=[{(])")  # what bibtexparser's splitter takes for the start of a block
_BIBTEX_MARKS = '{}",=@\\\n'
_WINDOW = 65_536


def _bibtex(text: str) -> Iterator[_Item]:
    """BibTeX entries, up to the MAX_BIBTEX_BLOCKS and MAX_BIBTEX_MARKS budgets."""
    end, why = _bibtex_extent(text)
    try:
        library = bibtexparser.parse_string(text[:end])
    except Exception as error:  # the parser's "please report this bug" states: the file is refused, not the run
        raise _Refused(f"the BibTeX parser failed on this file ({type(error).__name__})") from None
    for block in library.blocks:
        item = _bibtex_block(block)
        if item is not None:
            yield item
    if why:
        yield text.count("\n", 0, end) + 1, None, [why]


def _bibtex_extent(text: str) -> tuple[int, str]:
    """How much of `text` is parsed: all, or up to the block where a budget runs out (and why)."""
    starts = [found.start() for found in islice(_BIBTEX_BLOCK.finditer(text, 0, _marks_limit(text)),
                                                MAX_BIBTEX_BLOCKS + 1)]
    end, why = len(text), ""
    if len(starts) > MAX_BIBTEX_BLOCKS:
        end, why = starts.pop(), f"over {MAX_BIBTEX_BLOCKS:,} BibTeX blocks: the rest is skipped"
    spent = 0
    for start, stop in zip([0, *starts], [*starts, end], strict=True):
        spent += sum(text.count(mark, start, stop) for mark in _BIBTEX_MARKS)
        if spent > MAX_BIBTEX_MARKS:  # `start` is a block's start (or the file's): cut before it
            return start, (f"over {MAX_BIBTEX_MARKS:,} braces, quotes, commas, '=', '@', backslashes and line"
                           " breaks: the rest is skipped")
    return end, why


def _marks_limit(text: str) -> int:
    """Where MAX_BIBTEX_MARKS runs out, to the window: block starts are looked for only before it (each '@' costs)."""
    spent = 0
    for start in range(0, len(text), _WINDOW):
        spent += sum(text.count(mark, start, start + _WINDOW) for mark in _BIBTEX_MARKS)
        if spent > MAX_BIBTEX_MARKS:
            return start + _WINDOW
    return len(text)


def _bibtex_block(block: object) -> _Item | None:
    """The item of one parsed block: an entry, a broken block's problem, or None (comments, @string)."""
    entry = block.ignore_error_block if isinstance(block, ParsingFailedBlock) else block
    line = (getattr(block, "start_line", None) or 0) + 1
    if isinstance(entry, Entry):
        return _bibtex_entry(line, entry)
    if isinstance(block, ParsingFailedBlock):
        return line, None, [f"BibTeX syntax error, entry skipped: {_bibtex_error(block.error)}"]
    return None


# bibtexparser's reasons for a broken block, as our words: its own quote the block's text (keys, values, marks).
_BIBTEX_ERRORS = (("Unexpectedly reached end of file", "the file ends before this entry is closed"),
                  ("Unexpected block start", "a new '@' entry starts before this one is closed"),
                  ("Expected a `=` after entry key", "a field name without '=' after it"),
                  ("Expected either a `,` or", "a field value not followed by ',' or the closing bracket"),
                  ("Expected comma after entry key", "no ',' after the entry's key"),
                  ("Expected equals sign after field key", "a field name without '=' after it"))


def _bibtex_error(error: Exception) -> str:
    """What is wrong with a broken BibTeX block, in words that quote nothing of the file."""
    reason = str(getattr(error, "abort_reason", "") or "")
    return next((ours for theirs, ours in _BIBTEX_ERRORS if reason.startswith(theirs)), "not a complete entry")


def _bibtex_entry(line: int, entry: Entry) -> _Item:
    """The item of one BibTeX entry (arXiv id from eprint, DOI, URL, journal or note)."""
    fields: dict[str, str] = {}
    for field in entry.fields:  # the first of a repeated field wins; keys are case-insensitive
        value = field.value if isinstance(field.value, str) else str(field.value)
        fields.setdefault(field.key.strip().lower(), _unquote(value))
    get = fields.get
    archive = (get("archiveprefix") or get("eprinttype") or "arxiv").strip().lower()
    eprint = get("eprint") if archive == "arxiv" else None
    arxiv_id = _bare_arxiv(eprint) or _arxiv_in(eprint, get("doi"), get("url"), get("journal"),
                                                get("journaltitle"), get("howpublished"), get("note"))
    return _entry(line, _latex_to_text, title=get("title", ""), abstract=get("abstract", ""),
                  authors=_bibtex_names(get("author", "")), arxiv_id=arxiv_id, doi=_doi(get("doi"), get("url")),
                  added=_added(get("timestamp") or get("date-added") or get("added-at")))


def _unquote(value: str) -> str:
    """A value without the quotes around it (bibtexparser leaves them on a block with a repeated field)."""
    value = value.strip()
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value


_BRACED = re.compile(r"\{[^{}]*\}")
_AND = re.compile(r"\s+and\s+")


def _bibtex_names(value: str) -> list[str]:
    """The names of an author field ('A and B and others'); an 'and' inside braces ({Barnes and Noble}) does not
    split, and BibTeX's 'others' is no name."""
    raw = value[: (MAX_AUTHORS + 1) * MAX_AUTHOR_CHARS]
    protected = _BRACED.sub(lambda group: re.sub(r"\s", "\0", group[0]), raw)  # braces count in the mark budget
    names = (name.replace("\0", " ") for name in _AND.split(protected, maxsplit=MAX_AUTHORS + 1))
    return [name for name in names if name.strip().lower() != "others"]


# Combining marks of the LaTeX accents ("\'e", "\"{o}", "\c{c}", "\v s").
_ACCENTS = {"`": "\u0300", "'": "\u0301", "^": "\u0302", "~": "\u0303", "=": "\u0304", "u": "\u0306",
            ".": "\u0307", '"': "\u0308", "r": "\u030a", "H": "\u030b", "v": "\u030c", "d": "\u0323",
            "c": "\u0327", "k": "\u0328", "b": "\u0331"}
_SYMBOLS = {"ss": "ß", "o": "ø", "O": "Ø", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "aa": "å", "AA": "Å",
            "l": "ł", "L": "Ł", "i": "i", "j": "j", "dots": "…", "ldots": "…", "textendash": "–", "textemdash": "—",
            "LaTeX": "LaTeX", "TeX": "TeX", "textquoteright": "’", "textquoteleft": "‘"}
_GREEK = frozenset(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
                    "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega"])
_LATEX_SPECIAL = re.compile(r"[\\{}$~-]")
_MATH_SHIFT = re.compile(r"(?<!\\)\$")
_TIE = re.compile(r"(?<!\\)~")
_ESCAPES = {"\\": " ", " ": " ", ",": " ", ";": " ", ":": " ", "!": " ", "-": "", "/": "", "{": "", "}": ""}
_LATEX = re.compile(r"""\\(?:
      (?P<acc>[`'^"~=.])\s*(?:\{\s*(?P<a1>\\?[A-Za-z])\s*\}|(?P<a2>\\?[A-Za-z]))
    | (?P<lacc>[uvHckrbd])(?:\s*\{\s*(?P<l1>\\?[A-Za-z])\s*\}|\s+(?P<l2>[A-Za-z]))
    | (?P<name>[A-Za-z]+)\*?(?P<space>\s*)
    | (?P<char>[\s\S])
    )""", re.VERBOSE)


def _latex_to_text(value: str) -> str:
    """Plain text of a BibTeX value: accents composed, known symbols kept, other commands and braces dropped.

    One pass of a regular expression (a callback per backslash, counted in MAX_BIBTEX_MARKS) and plain string
    replacements: no recursion, so nesting depth costs nothing.
    """
    if not _LATEX_SPECIAL.search(value):
        return value
    value = _TIE.sub(" ", _MATH_SHIFT.sub("", value))
    value = _LATEX.sub(_latex_command, value.replace("---", "—").replace("--", "–"))
    return value.replace("{", "").replace("}", "")


def _latex_command(found: re.Match[str]) -> str:
    """The text of one LaTeX command (see _latex_to_text)."""
    if found["acc"] or found["lacc"]:
        base = (found["a1"] or found["a2"] or found["l1"] or found["l2"]).lstrip("\\")
        return unicodedata.normalize("NFC", base + _ACCENTS[found["acc"] or found["lacc"]])
    if name := found["name"]:
        if name in _SYMBOLS:
            return _SYMBOLS[name]
        if name.lower() in _GREEK:
            kind = "SMALL" if name.islower() else "CAPITAL"
            letter = name.upper().replace("LAMBDA", "LAMDA")  # Unicode's spelling
            return unicodedata.lookup(f"GREEK {kind} LETTER {letter}") + found["space"]
        return found["space"]
    char = found["char"]
    return _ESCAPES.get(char, char)


# -- RIS -------------------------------------------------------------------------------------------------------

_RIS_TAG = re.compile(r"([A-Z][A-Z0-9])  -(?: |$)")
_RisRecord = list[tuple[str, list[str]]]  # (tag, the value's lines), in file order


def _ris(text: str) -> Iterator[_Item]:
    """RIS records (TY to ER), up to MAX_LINES lines; rispy reads each one's tags."""
    lines = text.split("\n", MAX_LINES)
    cut = len(lines) > MAX_LINES and bool(lines.pop().strip())
    parser = rispy.RisParser(skip_unknown_tags=True)
    stop = MAX_LINES + 1
    for line, record, ended in _ris_records(lines):
        if cut and not ended:  # the last record, cut off by the line limit
            stop = line
            break
        yield _ris_entry(line, _ris_fields(parser, record))
    if cut:
        yield stop, None, [f"over {MAX_LINES:,} lines: this record and the rest are skipped"]


def _ris_records(lines: list[str]) -> Iterator[tuple[int, _RisRecord, bool]]:
    """Each record with its first line and whether it ended (an ER, or the next TY) before the text did.

    Continuation lines are kept as parts and joined once: rispy joins them one at a time (quadratic)."""
    record: _RisRecord | None = None
    start = 0
    for number, line in enumerate(lines, start=1):
        tag = _RIS_TAG.match(line)
        if tag and tag[1] == "TY":
            if record is not None:  # no ER: the next TY ends it all the same
                yield start, record, True
            record, start = [("TY", [line[6:].strip()])], number
        elif record is None:
            continue
        elif tag and tag[1] == "ER":
            yield start, record, True
            record = None
        elif tag:
            record.append((tag[1], [line[6:].strip()]))
        elif line.strip():
            record[-1][1].append(line.strip())
    if record is not None:
        yield start, record, False


def _ris_fields(parser: rispy.RisParser, record: _RisRecord) -> dict[str, object]:
    """rispy's fields of one record ({} when it cannot read it)."""
    lines = [f"{tag}  - {' '.join(parts)}" for tag, parts in record]
    try:
        return parser.parse_lines(iter([*lines, "ER  - "]))[0]
    except Exception:  # rispy's own failures on odd input: this record is skipped as unusable, not the file
        return {}


def _ris_entry(line: int, fields: dict[str, object]) -> _Item:
    """The item of one RIS record (arXiv id from UR, DO, N1 or the journal fields, as Mendeley writes it)."""
    get = fields.get
    urls, notes = _strings(get("urls")), _strings(get("notes"))
    journals = [get(key) for key in ("secondary_title", "journal_name", "alternate_title3", "alternate_title1")]
    return _entry(line, _plain, title=_first(get("title")) or _first(get("primary_title")),
                  abstract=_first(get("abstract")) or _first(get("notes_abstract")),
                  authors=_strings(get("authors")) + _strings(get("first_authors")),
                  arxiv_id=_arxiv_in(*urls, get("doi"), *notes, *journals), doi=_doi(get("doi"), *urls),
                  added=_added(get("access_date")))


def _strings(value: object) -> list[str]:
    """The strings of a field that may be one string or a list of them."""
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, str)]


def _first(value: object) -> str:
    """The first string of a field (a RIS tag may repeat), or ""."""
    return next(iter(_strings(value)), "")


# -- CSL-JSON --------------------------------------------------------------------------------------------------

_NOT_QUOTES_OR_BRACKETS = bytes(byte for byte in range(256) if byte not in b'"[]{}')  # UTF-8 hides none of them
_JSON_STRING = re.compile(rb'"[^"]*(?:"|\Z)')  # once escapes are gone; an unclosed one runs to the end
_CURLY_AS_SQUARE = bytes.maketrans(b"{}", b"[]")  # json recurses into either alike
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_ITEMS_KEY = re.compile(r'"items"\s*:\s*\[')
_CSL_MARKUP = re.compile(r"</?(?:i|b|sup|sub|sc|span)(?:\s[^<>]{0,200})?>")  # CSL's rich text in titles


def _csl_json(text: str) -> Iterator[_Item]:
    """CSL items of a JSON array, a single item, or {"items": [...]}."""
    _check_json_depth(text)
    decoder = json.JSONDecoder(parse_int=_json_int)
    start = _skip_space(text, 0)
    if text.startswith("[", start):
        items: Iterable[tuple[int, object]] = _json_array(decoder, text, start)
    else:
        value, end = _json_value(decoder, text, start)
        _json_end(text, end)
        wrapped = isinstance(value, dict) and isinstance(value.get("items"), list)
        items = _wrapped_items(decoder, text, value["items"]) if wrapped else [(_line(text, start), value)]
    for line, item in items:
        yield _csl_entry(line, item)


def _check_json_depth(text: str) -> None:
    """_Refused when JSON nests deeper than MAX_JSON_DEPTH (found without recursing, in linear time: the ingest's
    check, `sources._json.too_deep`; unclosed brackets count as nesting, since json would recurse into them)."""
    if too_deep(text, MAX_JSON_DEPTH) is not None:
        raise _Refused(f"JSON nested deeper than {MAX_JSON_DEPTH} levels: not a CSL-JSON export")


def _json_int(digits: str) -> int | None:
    """A JSON integer, or None past MAX_JSON_INT_DIGITS (no field we read holds one)."""
    return int(digits) if len(digits) <= MAX_JSON_INT_DIGITS else None


def _json_value(decoder: json.JSONDecoder, text: str, at: int) -> tuple[object, int]:
    """The JSON value starting at `at` and where it ends; _Refused with its line when it is not valid JSON."""
    try:
        return decoder.raw_decode(text, at)
    except json.JSONDecodeError as error:
        raise _Refused(f"invalid JSON: {error.msg} (column {error.colno})", error.lineno) from None
    except (ValueError, RecursionError) as error:  # the depth check makes these unreachable; kept as a guard
        raise _Refused(f"invalid JSON: {type(error).__name__}", _line(text, at)) from None


def _json_array(decoder: json.JSONDecoder, text: str, at: int) -> Iterator[tuple[int, object]]:
    """Each value of the array whose '[' is at `at`, with the line it starts on, decoded one at a time."""
    pos = _skip_space(text, at + 1)
    line, counted = _line(text, pos), pos
    if text.startswith("]", pos):
        return _json_end(text, pos + 1)
    while True:
        line, counted = line + text.count("\n", counted, pos), pos
        value, end = _json_value(decoder, text, pos)
        yield line, value
        pos = _skip_space(text, end)
        if text.startswith("]", pos):
            return _json_end(text, pos + 1)
        if not text.startswith(",", pos):
            raise _Refused("invalid JSON: expected ',' or ']' between items", _line(text, pos))
        pos = _skip_space(text, pos + 1)


def _json_end(text: str, at: int) -> None:
    """_Refused when anything but whitespace follows the document."""
    if text[at:].strip():
        raise _Refused("invalid JSON: more text after the end of the document", _line(text, at))


def _wrapped_items(decoder: json.JSONDecoder, text: str, items: list[object]) -> Iterator[tuple[int, object]]:
    """The items of {"items": [...]} with their lines where the first '"items": [' is that list (best effort)."""
    key = _ITEMS_KEY.search(text)
    fallback = _line(text, key.start()) if key else 1
    walked = _json_array(decoder, text, key.end() - 1) if key else iter(())
    for item in items:
        try:
            line, value = next(walked, (fallback, None))
        except _Refused:
            line, value, walked = fallback, None, iter(())
        yield (line if value == item else fallback), item


def _line(text: str, at: int) -> int:
    """The 1-based line of position `at`."""
    return text.count("\n", 0, at) + 1


def _skip_space(text: str, at: int) -> int:
    """The position of the first non-whitespace character (in JSON's sense) from `at`."""
    found = _JSON_SPACE.match(text, at)
    return found.end() if found else at


def _csl_entry(line: int, item: object) -> _Item:
    """The item of one CSL item (arXiv id from URL, DOI, number, archive_location, note or container-title)."""
    if not isinstance(item, dict):
        return line, None, ["not a CSL item (a JSON object): skipped"]
    get = item.get
    arxiv_id = (_bare_arxiv(get("number")) or _bare_arxiv(get("archive_location"))
                or _arxiv_in(get("URL"), get("DOI"), get("number"), get("archive_location"), get("note"),
                             get("container-title")))
    return _entry(line, _csl_text, title=get("title", ""), abstract=get("abstract", ""),
                  authors=_csl_names(get("author")), arxiv_id=arxiv_id, doi=_doi(get("DOI"), get("URL")),
                  added=_added(get("accessed")))


def _csl_text(value: str) -> str:
    """CSL text without its rich-text markup (Zotero writes <i>, <sup>, <span class="nocase"> into titles)."""
    return _CSL_MARKUP.sub("", value)


def _csl_names(value: object) -> Iterator[str]:
    """'given family' (or 'literal') of each CSL name object."""
    for name in islice(value, MAX_AUTHORS + 1) if isinstance(value, list) else ():
        if isinstance(name, dict):
            parts = [name.get(key) for key in ("given", "non-dropping-particle", "family")]
            literal = name.get("literal")
            yield " ".join(p for p in parts if isinstance(p, str)) or (literal if isinstance(literal, str) else "")


# -- a list of ids ---------------------------------------------------------------------------------------------

_SPACED_PREFIX = re.compile(r"^(arxiv|doi):\s+", re.IGNORECASE)


def _ids(text: str) -> Iterator[_Item]:
    """One arXiv id or DOI a line (the first word; blank lines and '#' comments skipped), up to MAX_LINES."""
    lines = text.split("\n", MAX_LINES)
    cut = len(lines) > MAX_LINES and bool(lines.pop().strip())
    for number, line in enumerate(lines, start=1):
        word = _id_word(line)
        if not word:
            continue
        arxiv_id, doi = _bare_arxiv(word), _doi(word)
        if arxiv_id or doi:
            yield _entry(number, _plain, title="", arxiv_id=arxiv_id, doi=doi)
        else:
            yield number, None, [NOT_AN_ID]
    if cut:
        yield MAX_LINES + 1, None, [f"over {MAX_LINES:,} lines: the rest is skipped"]


def _id_word(line: str) -> str:
    """The first word of a line ('arXiv: ID' counts as one), or "" for a blank or comment line."""
    words = _SPACED_PREFIX.sub(r"\1:", line.strip()[:1000]).split(maxsplit=1)
    return words[0] if words and not words[0].startswith("#") else ""


_READERS: dict[str, Callable[[str], Iterator[_Item]]] = {
    "bibtex": _bibtex, "ris": _ris, "csl-json": _csl_json, "ids": _ids}


def digest_of(entries: Sequence[LibraryEntry]) -> str:
    """A library's digest (what the store keeps it under): the same entries, the same digest."""
    text = json.dumps([[e.title, e.abstract, e.arxiv_id, e.doi, list(e.authors), e.added.isoformat() if e.added
                        else None] for e in entries], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
