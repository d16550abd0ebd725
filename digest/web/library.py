"""`/library/<token>`: a reader brings the papers they keep (a Zotero, Mendeley or Paperpile export, or arXiv ids and
DOIs pasted one a line) to one of their interests, or to a new one named for it, and can remove a library again.

The file is read by `subscribers.libraries` with all its limits; the page says how many papers it read and lists what it
could not, each with its line. A file that cannot be read as a whole (malformed, too large, no usable paper) gets a
one-line message and changes nothing. A library replaces the one the chosen interest had; the stored profile is
replaced as the interests page replaces it (`Store.replace_web_profile`), so the next digest follows. Only a web
subscriber's profile is theirs to change: a profile file's or an import's sees their libraries with a line saying
who manages them. The link is the preferences link's token (same expiry, same answer once erased); every POST passes
the same-site check, and this route alone (with the signup form) takes a body as large as a library (`uploads`).
The page's POSTs are counted per reader and per network (PER_READER_HOUR, PER_NETWORK_HOUR: 429 past them, before the
form is parsed), and an upload that leaves work for later needs a place in the server's bounded backlog (429 when it
is full, nothing stored); opening the page asks again the ids of libraries never looked up.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace

from flask import Blueprint, Response, abort, request
from werkzeug.exceptions import RequestEntityTooLarge

from digest.models import Interest, Subscriber
from digest.numbers import whole
from digest.signup.signups import HOUR, LIBRARY_INTEREST, network
from digest.subscribers.libraries import MAX_ENTRIES, Library, LibraryError, library_interest, read_upload
from digest.subscribers.profiles import MAX_INTERESTS, MAX_LIBRARIES, MAX_NAME
from digest.web.backlog import Ticket
from digest.web.common import MANAGERS, current, page
from digest.web.public import _same_site_or_403, _token
from digest.web.signup import client_ip, room
from digest.web.uploads import (
    BUSY,
    BUSY_RETRY,
    MAX_BODY_BYTES,
    PASTED,
    allow_large_body,
    ask_again,
    backlog,
    describe,
    lookup_of,
    lookup_said,
    needs_work,
    upload_of,
)

blueprint = Blueprint("library", __name__)

NEW = "new"  # the interest choice that makes a new interest
# The page's forms (uploads and removals) one reader, and one network (an IPv4 address, an IPv6 /64), may send in an
# hour, counted in the store as the signup's limits are (every `digest serve` on it together); more get 429.
PER_READER_HOUR = 20
PER_NETWORK_HOUR = 60


@dataclass(frozen=True)
class Shelf:
    """One interest as the page lists it: its name and how many papers its library holds (0: none)."""

    index: int
    name: str
    papers: int
    lookup: str = ""  # what the lookup of its ids found ("8 ids: 3 in the store, 4 fetched from arXiv, …")


@dataclass(frozen=True)
class Outcome:
    """What a POST did: the sentence that says so, the problems listed under it, and the HTTP status."""

    message: str
    problems: tuple[str, ...] = ()
    status: int = 200
    retry_after: int | None = None  # (a 429's Retry-After, in seconds)


@blueprint.route("/library/<token>", methods=["GET", "POST"])
def library(token: str) -> Response:
    """The reader's libraries and the form that adds one; a POST adds (`do=upload`) or removes (`do=remove`)."""
    subject = _token("preferences", token)
    found = current().store.profile_of(subject.email)
    if found is None:
        abort(404)
    source, subscriber = found
    outcome = Outcome("")
    if request.method == "POST":
        _same_site_or_403()
        allow_large_body(request)
        outcome = _limited(subscriber.email) or _change(source, subscriber)
        found = current().store.profile_of(subject.email)
        if found is None:
            abort(404)
        source, subscriber = found
    elif source == "web":  # ids whose lookup was lost (a server stopped) are asked again
        ask_again(subscriber.email, subscriber.interests)
    return _page(subscriber, source, outcome)


def _limited(email: str) -> Outcome | None:
    """Count this POST against the reader's and their network's hourly limits; the 429 past either (before the form
    is read)."""
    signups = room()
    for kind, who, most, whose in (("library-reader", email.lower(), PER_READER_HOUR, "for your address"),
                                   ("library-ip", network(client_ip()), PER_NETWORK_HOUR, "from your network")):
        if current().store.hit(f"{kind}:{signups.keyed(kind, who)}", HOUR) > most:
            return Outcome(f"Too many library uploads {whose}: at most {most} an hour. Please try again in an hour. "
                           "Nothing was changed.", status=429, retry_after=HOUR)
    return None


def _change(source: str, subscriber: Subscriber) -> Outcome:
    """Carry out one POST of the page; nothing changes unless the whole library could be read and stored."""
    if source != "web":
        return Outcome(f"Your interests are kept in {MANAGERS.get(source, 'the operator’s list')} by the newsletter's "
                       "operator: reply to any digest to change them.", status=403)
    try:
        action = request.form.get("do", "")
        if action == "remove":
            return _remove(subscriber, request.form.get("interest", ""))
        if action == "upload":
            return _add(subscriber, upload_of(request), request.form.get("interest", ""),
                        request.form.get("name", ""))
    except RequestEntityTooLarge:
        return Outcome(f"That file is larger than {MAX_BODY_BYTES // 2**20} MB, more than we take: export one "
                       "collection, or leave out attachments and notes. Nothing was changed.", status=413)
    abort(400)


def _add(subscriber: Subscriber, upload: tuple[str, bytes | str] | None, choice: str, name: str) -> Outcome:
    """Read the upload into the chosen interest (or a new one named `name`), replacing the library it had."""
    if upload is None:
        return Outcome("Choose a library file, or paste arXiv ids or DOIs. Nothing was changed.", status=422)
    try:
        read = read_upload(*upload)
    except LibraryError as exc:
        return Outcome(f"Your library could not be read: {exc}. Nothing was changed.", status=422)
    if not read.entries:
        return Outcome(f"No paper could be read from {read.path}: each needs a title, an arXiv id or a DOI. "
                       "Nothing was changed.", read.problems, 422)
    interests, problem = _placed(subscriber, read, choice, name)
    if problem:
        return Outcome(f"{problem} Nothing was changed.", status=422)
    with (backlog().reserve(subscriber.email) if needs_work(read.entries) else nullcontext(Ticket(""))) as ticket:
        if ticket is None:  # (the work on it could not be queued: nothing is stored)
            return Outcome(f"{BUSY[0]}. {BUSY[1]}", status=429, retry_after=BUSY_RETRY)
        if not current().store.replace_web_profile(replace(subscriber, interests=interests)):
            return Outcome("Your interests are now managed by the newsletter's operator. Nothing was changed.",
                           status=409)
        named = interests[-1].name if choice == NEW else interests[int(choice)].name
        given = [i for i in interests if i.name == named]
        looked, ask = lookup_said(given[0], read.entries) if given else ("", False)
        ticket.add(given, look_up=ask)
    readable = any(e.title or e.abstract for e in read.entries)
    after = "Your next digest uses it." if readable or not looked else "Your next digest uses them once found."
    return Outcome(f"Read {describe(read)} into “{named}”. {looked + ' ' if looked else ''}{after}", read.problems)


def _placed(subscriber: Subscriber, read: Library, choice: str, name: str) -> tuple[tuple[Interest, ...], str]:
    """The interests with the library in the chosen one (or a new one); or the sentence saying why it cannot go."""
    interests = subscriber.interests
    libraries = sum(1 for i in interests if i.library_key)
    if choice == NEW:
        named_for = read.path.rsplit(".", 1)[0] if read.path != PASTED else ""
        name = " ".join(name.split()) or named_for or LIBRARY_INTEREST
        if len(name) > MAX_NAME or not name.isprintable():
            return interests, f"Name the new interest in one line of at most {MAX_NAME} characters."
        if any(i.name.casefold() == name.casefold() for i in interests):
            return interests, f"You already have an interest named “{name}”: choose it, or another name."
        if len(interests) >= MAX_INTERESTS:
            return interests, f"You have {len(interests)} interests, the most there can be: choose one of them."
        if libraries >= MAX_LIBRARIES:
            return interests, f"You have {libraries} libraries, the most there can be: replace or remove one."
        return (*interests, library_interest(name, read)), ""
    at = _index(choice, interests)
    if at is None:
        return interests, "Choose one of your interests, or a new one."
    if not interests[at].library_key and libraries >= MAX_LIBRARIES:
        return interests, f"You have {libraries} libraries, the most there can be: replace or remove one."
    made = library_interest(interests[at].name, read)
    placed = replace(interests[at], library=made.library, library_source="", library_key=made.library_key)
    return (*interests[:at], placed, *interests[at + 1:]), ""


def _remove(subscriber: Subscriber, choice: str) -> Outcome:
    """Take the chosen interest's library away; an interest that was its library alone goes with it."""
    interests = subscriber.interests
    at = _index(choice, interests)
    if at is None or not interests[at].library_key:
        return Outcome("That interest has no library to remove. Nothing was changed.", status=422)
    gone = interests[at]
    kept = replace(gone, library=(), library_source="", library_key="")
    alone = not (kept.has_text or kept.seed_papers or kept.authors)
    rest = (*interests[:at], *(() if alone else (kept,)), *interests[at + 1:])
    if not current().store.replace_web_profile(replace(subscriber, interests=rest)):
        return Outcome("Your interests are now managed by the newsletter's operator. Nothing was changed.", status=409)
    what = f"the interest “{gone.name}” with it" if alone else f"“{gone.name}” keeps its words"
    return Outcome(f"Removed the library of “{gone.name}”; {what}. Your next digest goes without it.")


def _index(choice: str, interests: tuple[Interest, ...]) -> int | None:
    """The interest a form's choice names (its position), or None."""
    return whole(choice, 0, len(interests) - 1)


def _page(subscriber: Subscriber, source: str, outcome: Outcome) -> Response:
    store = current().store
    shelves = [Shelf(n, i.name, len(store.library_entries(i.library_key)) if i.library_key else 0, lookup_of(i))
               for n, i in enumerate(subscriber.interests)]
    full = sum(1 for s in shelves if s.papers) >= MAX_LIBRARIES
    html = page("library", email=subscriber.email, shelves=shelves, editable=source == "web",
                manager=MANAGERS.get(source, "the operator’s list"), message=outcome.message,
                failed=outcome.status >= 400, library_problems=outcome.problems, action=request.path,
                preferences_url="/preferences/".join(request.path.rsplit("/library/", 1)), new=NEW,
                max_entries=MAX_ENTRIES, max_mb=MAX_BODY_BYTES // 2**20, max_libraries=MAX_LIBRARIES,
                full=full, chosen=_default(shelves, full))
    response = Response(html, outcome.status, content_type="text/html; charset=utf-8")
    if outcome.retry_after:
        response.headers["Retry-After"] = str(outcome.retry_after)
    return response


def _default(shelves: list[Shelf], full: bool) -> str:
    """The interest the form starts on: the first one (one with a library when no more can be added), else a new one."""
    usable = [s for s in shelves if s.papers or not full]
    return str(usable[0].index) if usable else NEW
