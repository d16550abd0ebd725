"""A reader's library as a web form brings it: an uploaded export file or a pasted list, read by `libraries`.

The library page (`library`) and the signup form (`signup`) take one; these are the only routes whose requests may
be larger than the app's 64 KiB (`MAX_BODY_BYTES`), and every limit of a library file still holds (entries,
lines, nesting, fields: see `digest.subscribers.libraries`). A library is stored before the page answers; the work
on it (its profile in the text model's space, its ids the store lacks looked up) is a job of the server's bounded
`backlog`, whose place the upload reserves before storing anything (none: 429, BUSY, and nothing changes).
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import replace

from flask import Request, current_app

from digest.models import Interest, LibraryEntry
from digest.sources import lookup
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.lookup import LOOKUP_KEY, Looked, bare, look_up
from digest.subscribers.libraries import MAX_ENTRIES, Library
from digest.web.backlog import Backlog, Job
from digest.web.common import Site, current

log = logging.getLogger("digest")

# A Zotero export of 2,000 papers with abstracts (libraries.MAX_ENTRIES; the rest of a file is skipped anyway) is
# 3.4 MB as BibTeX and 3.7 MB as CSL-JSON (measured on the arXiv sample, without author lists): twice that, and more.
MAX_BODY_BYTES = 10 * 1024 * 1024  # a library page's or signup form's request (the file and the fields); more: 413
WAITRESS_BODY_BYTES = 2 * MAX_BODY_BYTES  # the server's bound for every route: past it, waitress' plain-text 413
MAX_PASTE_BYTES = 500_000  # the paste box (a field, not a file: Werkzeug holds fields in memory); more: 413
MAX_NAME_CHARS = 100  # of an uploaded file's name, as messages quote it
PASTED = "pasted text"  # what messages call a pasted library
FILE_FIELD, PASTE_FIELD = "library_file", "library_text"


def allow_large_body(request: Request) -> None:
    """Let this request be as large as a library upload when it can carry a file (multipart; an url-encoded form
    keeps the app's 64 KiB). Call before its form is read."""
    if request.mimetype != "multipart/form-data":
        return
    request.max_content_length = MAX_BODY_BYTES
    request.max_form_memory_size = MAX_PASTE_BYTES


def upload_of(request: Request) -> tuple[str, bytes | str] | None:
    """The library a form carries as (where, data): its file's name and bytes, else PASTED and the paste box's
    text; None when it carries neither. (`libraries.read_upload` reads it.)"""
    file = request.files.get(FILE_FIELD)
    if file is not None and file.filename:
        data = file.read(MAX_BODY_BYTES + 1)
        if data:
            return file_name(file.filename), data
    text = request.form.get(PASTE_FIELD, "")
    return (PASTED, text) if text.strip() else None


def file_name(raw: str) -> str:
    """An uploaded file's name as messages may quote it: its last part, printable, at most MAX_NAME_CHARS."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in unicodedata.normalize("NFC", name) if c.isprintable()).strip()
    return name[:MAX_NAME_CHARS] or "library"


def describe(library: Library) -> str:
    """'5 papers from kv.bib (BibTeX)': what a reader is told was read."""
    kinds = {"bibtex": "BibTeX", "ris": "RIS", "csl-json": "CSL-JSON", "ids": "a list of ids"}
    count = len(library.entries)
    papers = f"{count:,} paper{'s' if count != 1 else ''}"
    cut = f" (the first {MAX_ENTRIES:,})" if count == MAX_ENTRIES else ""
    return f"{papers}{cut} from {library.path} ({kinds.get(library.format, library.format)})"


BUSY = ("Too many library uploads at once", "This server is busy reading other libraries: please try again in a "
        "minute. Nothing was changed.")  # (the page's heading, and what it says)
BUSY_RETRY = 60  # seconds the 429's Retry-After asks for


def backlog() -> Backlog:
    """This web application's queue of library work (`backlog`): a few workers, one job waiting a reader."""
    found = current_app.config.get("LIBRARY_WORK")
    if found is None:
        found = current_app.config.setdefault("LIBRARY_WORK", Backlog(_runner(current())))
    return found  # type: ignore[no-any-return]


def needs_work(entries: Sequence[LibraryEntry]) -> bool:
    """Whether a library just read leaves work for later (a profile to make, ids to look up), so that its upload
    needs a place in the backlog."""
    app = current()
    return app.dense is not None or (app.config.libraries.lookup and any(bare(e) for e in entries))


def _runner(app: Site) -> Callable[[Job], None]:
    """What a worker does with a reader's job: each library's profile in the text model's space (one at a time on
    this server: the first digest of a library of 2,000 papers with abstracts took about 2 minutes of CPU here, 65 ms
    a paper the store does not have), so that the next send and the welcome page's preview read it instead of making
    it; then the lookup of its ids the store lacks, what is found filling its entries (and its profile made again),
    and what happened kept for its page. A send still makes any profile it finds missing (a server stopped
    meanwhile)."""
    config, store = app.config, app.store
    one_at_a_time = threading.Lock()

    def profile(interest: Interest) -> None:
        if app.dense is None:
            return
        from digest.select.dense import DenseEmbedder

        with one_at_a_time:  # an embedder of its own: the request threads' one keeps memos not made to be shared
            DenseEmbedder(store).interests([interest])

    def look_up_ids(key: str, interest: Interest) -> None:
        entries = store.library_entries(key)
        if not any(bare(e) for e in entries):  # (another reader's job with the same library found them first)
            return
        fetcher = Fetcher(FetchPolicy.of(config.fetch))
        try:
            found, looked = look_up(entries, lambda refs: set(store.find_papers(refs)), fetcher,
                                    arxiv_api=config.libraries.arxiv_api or lookup.ARXIV_API,
                                    doi_api=config.libraries.doi_api or lookup.DOI_API)
        finally:
            fetcher.close()
        if looked.from_arxiv or looked.from_doi:
            store.update_library(key, found)
            profile(interest)
        store.put_cache(LOOKUP_KEY + key, looked.to_json().encode())

    def run(job: Job) -> None:
        for key, given in job.interests.items():
            interest = replace(given, library=())  # (its entries as stored, read again)
            try:
                profile(interest)
            except Exception:  # noqa: BLE001 - the next send makes the profile instead
                log.exception("could not make the profile of a library just given; the next send makes it")
            if key not in job.look_up or not config.libraries.lookup:
                continue
            try:
                look_up_ids(key, interest)
            except Exception:  # noqa: BLE001 - one library's failure must not stop the others'
                log.exception("looking up the ids of a library failed; its page asks them again")

    return run


def lookup_said(interest: Interest, entries: Sequence[LibraryEntry],
                then: str = "come back to this page to see what was found") -> tuple[str, bool]:
    """What happens to the ids of a library just given that the store lacks ("" when it names none: "8 ids: 3 in the
    store, 5 being looked up …"), and whether they are to be looked up (`Ticket.add`'s `look_up`)."""
    app = current()
    bare_ones = [e for e in entries if bare(e)]
    if not bare_ones or not interest.library_key:
        return "", False
    known = set(app.store.find_papers([e.ref for e in bare_ones]))
    asked = sum(1 for e in bare_ones if e.ref not in known)
    said = f"{len(bare_ones)} id{'s' if len(bare_ones) != 1 else ''}: {len(known)} in the store"
    if not asked:
        return said + ".", False
    if not app.config.libraries.lookup:
        return (f"{said}, {asked} not yet looked up (this newsletter does not look ids up: they count once a source "
                "brings their papers in)."), False
    return f"{said}, {asked} being looked up on arXiv and Crossref: {then}.", True


def ask_again(email: str, interests: Sequence[Interest]) -> None:
    """Queue the lookup of libraries whose ids were never looked up (a lookup lost with a server that stopped), when
    `email` has no job of theirs waiting or running and there is room; else leave them for a later visit."""
    app = current()
    if not app.config.libraries.lookup:
        return
    work = backlog()
    if work.busy(email):
        return
    never = [i for i in interests if i.library_key and app.store.get_cache(LOOKUP_KEY + i.library_key) is None]
    todo = []
    for interest in never:
        refs = [e.ref for e in app.store.library_entries(interest.library_key) if bare(e)]
        if refs and len(set(app.store.find_papers(refs))) < len(set(refs)):
            todo.append(interest)
    if todo:
        with work.reserve(email) as ticket:
            if ticket is not None:
                ticket.add(todo, look_up=True)


def lookup_of(interest: Interest) -> str:
    """What the last lookup of an interest's library ids found ("" when none was made)."""
    if not interest.library_key:
        return ""
    saved = current().store.get_cache(LOOKUP_KEY + interest.library_key)
    return Looked.from_json(saved.decode()).summary() if saved else ""
