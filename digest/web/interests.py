"""`/interests/<token>`: the reader's own page of what they follow, behind the preferences link.

Every interest with its name, keywords and description (and, read-only, the library, seed papers and authors it
carries), the catalogue's topics ticked on or off, the send time and time zone, and the papers marked "more / less
like this", each removable, with a reset. A web subscriber edits it all; a profile file's or an import's sees their
interests read-only, with a line saying the operator manages them (one address, one source), and still controls
their marks, which are theirs whatever the source.

A save is checked by the profile files' own validator (`subscribers.validate`): the same limits and messages, each
naming the interest as the page shows it, with what the reader typed kept. It replaces the web subscriber's profile
in the store as confirming a signup does, so the next digest (and the delivery slot) follows it. The link is the
preferences link's token (same expiry, same erasure answer); every POST passes the same-site check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from flask import Blueprint, Response, abort, request

from digest.models import MAX_ROW_ID, Interest, Subscriber
from digest.numbers import whole
from digest.signup.signups import interest_name
from digest.subscribers.profiles import MAX_DESCRIPTION, MAX_INTERESTS, MAX_NAME, validate
from digest.subscribers.topics import chosen
from digest.web.common import CSP, MANAGERS, current, page, zone_groups
from digest.web.public import _same_site_or_403, _token

blueprint = Blueprint("interests", __name__)

MAX_MARKS_SHOWN = 100  # marks listed (newest first); the reset forgets them all, listed or not
# A library counts as given, as `library` does in a profile file: an interest made of a library alone is valid. The
# validator cannot read a stored library (only a file beside a profile), so it is shown this stand-in, taken out after.
_BY_LIBRARY = "(its library)"
_SEPARATORS = re.compile(r"[,;\n]")
_NUMBERED = re.compile(r"^interest (\d+): ")
SCRIPT = """// Preselects the browser's time zone when the reader has none of their own yet (UTC); it sends nothing.
(function () {
  var field = document.getElementById("timezone");
  if (!field || !field.dataset.guess) { return; }
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    for (var i = 0; i < field.options.length; i++) {
      if (field.options[i].value === zone) { field.selectedIndex = i; return; }
    }
  } catch (e) { /* an old browser: the stored zone stays selected */ }
})();
"""


@dataclass(frozen=True)
class Row:
    """One of the reader's own interests as the page shows it, in their words (kept as typed after a mistake);
    `of`: the stored interest it edits (whose library, seed papers and authors it keeps), None for a new one."""

    name: str = ""
    keywords: str = ""
    description: str = ""
    of: int | None = None
    share: str = "1"  # its share of the digest's places: a key of SHARES


# What the page offers for an interest's share of the places (its weight; a profile file may give any weight).
SHARES = {"0.5": "A smaller share", "1": "An equal share", "2": "A larger share"}


@blueprint.get("/interests.js")
def script() -> Response:
    return Response(SCRIPT, content_type="text/javascript; charset=utf-8")


@blueprint.route("/interests/<token>", methods=["GET", "POST"])
def interests(token: str) -> Response:
    """The page; its POSTs: `do=save` (the interests form), `unmark` (one paper's mark), `reset` (every mark)."""
    email = _token("preferences", token).email
    current().profiles.sync()  # a profile file changed since the last run is what the page shows and guards
    found = current().store.profile_of(email)
    if found is None:
        abort(404)
    source, stored = found
    if request.method == "GET":
        return _page(source, stored, _rows(stored))
    _same_site_or_403()
    action = request.form.get("do", "")
    if action == "save":
        return _save(source, stored)
    if action == "unmark":
        paper = whole(request.form.get("paper", ""), 0, MAX_ROW_ID)
        if paper is None:
            abort(400)
        gone = current().store.remove_feedback(email, paper)
        return _page(source, stored, _rows(stored), message="Forgotten." if gone else "That mark was already gone.")
    if action == "reset":
        gone = current().store.remove_feedback(email)
        return _page(source, stored, _rows(stored), message=f"Forgotten: {gone} mark{'s' if gone != 1 else ''}. "
                                                              "Your next digest starts again from your interests.")
    abort(400)


def _save(source: str, stored: Subscriber) -> Response:
    """Check the form as a profile file is checked; store it when it passes, else show it again with what is wrong."""
    form = request.form
    if source != "web":
        return _managed(source, stored)
    rows = _posted(form, _own(stored))
    ticked = form.getlist("topics")
    send_at, zone = form.get("send_at", "").strip(), form.get("timezone", "").strip()
    topics, unknown = chosen(current().config.topics, ticked)
    tables = [_table(t.interest) for t in topics] + [_row_table(r, _own(stored)) for r in rows]
    data = {"email": stored.email, "name": stored.name, "timezone": zone, "send_at": send_at,
            "frequency": stored.frequency, "max_papers": stored.max_papers, "exclude": list(stored.exclude),
            "interests": tables}
    checked, found = validate(data, stored.email, lambda _key, _n: 0)
    problems = ["Pick topics from the list only."] if unknown else []
    problems += [_label(p.message, len(topics), rows) for p in found]
    problems += _topic_names(rows, current().config.topics)
    if problems or checked is None:
        return _page(source, stored, rows, status=422, problems=problems,
                     given={"topics": ticked, "send_at": send_at, "timezone": zone})
    profile = replace(checked, path="", interests=tuple(
        _carry(interest, tables[n], _stored_of(n - len(topics), rows, stored)) for n, interest in
        enumerate(checked.interests)))
    if not current().store.replace_web_profile(profile):  # an operator took the address meanwhile
        return _managed(*(current().store.profile_of(stored.email) or ("import", stored)))
    return _page(source, profile, _rows(profile), message="Saved. Your next digest follows these interests.")


def _managed(source: str, stored: Subscriber) -> Response:
    """A save of a profile the operator keeps: refused, nothing changed."""
    return _page(source, stored, _rows(stored), status=409, problems=[
        "Your interests are managed by the newsletter's operator: reply to any digest to ask for a change."])


def _own(subscriber: Subscriber) -> list[Interest]:
    """The reader's interests that are not the catalogue's topics (those are ticked, not edited)."""
    names = {t.name for t in current().config.topics}
    return [i for i in subscriber.interests if i.name not in names]


def _rows(subscriber: Subscriber) -> list[Row]:
    return [Row(i.name, ", ".join(i.keywords), i.description, n, _share_of(i.weight))
            for n, i in enumerate(_own(subscriber))]


def _share_of(weight: float) -> str:
    """The page's share nearest an interest's weight (a profile file's 0.8 shows as an equal share)."""
    return min(SHARES, key=lambda key: (abs(float(key) - weight), key))


def _posted(form: Any, own: list[Interest]) -> list[Row]:
    """The interests the form sends (name-N, keywords-N, description-N, of-N, remove-N), less those ticked for
    removal and a new one left blank; each stored interest is edited by one row at most."""
    rows: list[Row] = []
    used: set[int] = set()
    for n in range(MAX_INTERESTS + 1):  # one more than a profile may have: the validator says so
        if f"name-{n}" not in form or form.get(f"remove-{n}"):
            continue
        index = whole(form.get(f"of-{n}", ""), 0, len(own) - 1)
        index = None if index in used else index
        share = form.get(f"share-{n}", "1")
        row = Row(form.get(f"name-{n}", ""), form.get(f"keywords-{n}", ""), form.get(f"description-{n}", ""), index,
                  share if share in SHARES else "1")
        if index is None and not (row.name.strip() or row.keywords.strip() or row.description.strip()):
            continue
        if index is not None:
            used.add(index)
        rows.append(row)
    return rows


def _table(interest: Interest) -> dict[str, Any]:
    """An interest as a profile file's [[interests]] table writes it (the library aside: see `_carry`)."""
    table: dict[str, Any] = {"name": interest.name, "weight": interest.weight}
    for key in ("keywords", "description", "seed_papers", "authors"):
        if getattr(interest, key):
            table[key] = list(getattr(interest, key)) if key != "description" else interest.description
    return table


def _row_table(row: Row, own: list[Interest]) -> dict[str, Any]:
    """A row as a table: the words typed, and what the stored interest it edits carries besides."""
    stored = own[row.of] if row.of is not None else Interest("")
    keywords = [" ".join(k.split()) for k in _SEPARATORS.split(row.keywords) if k.strip()]
    # a new interest left unnamed is named from its own words, never a placeholder
    name = row.name if row.name.strip() or row.of is not None else interest_name(keywords, row.description)
    table = {**_table(stored), "name": name, "description": row.description, "keywords": keywords}
    if row.of is None or _share_of(stored.weight) != row.share:  # (a weight the page cannot show is kept as it is)
        table["weight"] = float(row.share)
    if stored.library_key and not table["keywords"] and not row.description.strip():
        table["description"] = _BY_LIBRARY
    return table


def _stored_of(position: int, rows: list[Row], subscriber: Subscriber) -> Interest | None:
    """The stored interest the row at `position` edits (None for a topic, or a new interest)."""
    if position < 0 or rows[position].of is None:
        return None
    return _own(subscriber)[rows[position].of]  # type: ignore[index]


def _carry(interest: Interest, table: dict[str, Any], stored: Interest | None) -> Interest:
    """The checked interest with the stored one's library kept (entries stay in the store, under their digest)."""
    if stored is None or not stored.library_key:
        return interest
    description = "" if table.get("description") == _BY_LIBRARY else interest.description
    return replace(interest, description=description, library_key=stored.library_key,
                   library_source=stored.library_source)


def _label(message: str, topics: int, rows: list[Row]) -> str:
    """A validator message with its "interest N:" named as the page shows that interest."""
    match = _NUMBERED.match(message)
    if not match:
        return message[:1].upper() + message[1:]
    n = int(match.group(1)) - 1
    if n < topics:
        return f"A topic: {message[match.end():]}"
    position = n - topics
    name = rows[position].name.strip() if position < len(rows) else ""
    return f"Interest {position + 1}{f' ({name})' if name else ''}: {message[match.end():]}"


def _topic_names(rows: list[Row], topics: Any) -> list[str]:
    """An own interest may not take a topic's name: it would be shown, and saved, as that topic."""
    names = {t.name.lower(): t.name for t in topics}
    return [f"Interest {n}: “{r.name.strip()}” is the name of a topic; tick the topic instead, or choose another "
            "name." for n, r in enumerate(rows, start=1) if r.name.strip().lower() in names]


def _page(source: str, subscriber: Subscriber, rows: list[Row], *, status: int = 200, message: str = "",
          problems: list[str] | None = None, given: dict[str, Any] | None = None) -> Response:
    """The page: the form filled from `rows` and `given` (what was typed), else from the stored profile."""
    app = current()
    own = _own(subscriber)
    topic_names = {t.name for t in app.config.topics}
    ticked = given["topics"] if given else [i.name for i in subscriber.interests if i.name in topic_names]
    zone = given["timezone"] if given else subscriber.timezone
    marks, total = app.store.marks_of(subscriber.email, MAX_MARKS_SHOWN)
    base, token = request.path.rsplit("/interests/", 1)
    editable = source == "web"
    html = page("interests", email=subscriber.email, action=request.path, editable=editable,
                manager=MANAGERS.get(source, "the operator's list"), message=message, problems=problems or [],
                interests=[] if editable else [(i, _carried(i)) for i in subscriber.interests],
                rows=[(r, _carried(own[r.of]) if r.of is not None else None) for r in rows], new=len(rows),
                topics=app.config.topics, ticked=ticked, marks=marks, marks_total=total, shares=SHARES,
                send_at=given["send_at"] if given else f"{subscriber.send_at:%H:%M}", timezone=zone,
                stored_zone=subscriber.timezone, zones=zone_groups(zone), guess=zone == "UTC" and not given,
                max_name=MAX_NAME, max_description=MAX_DESCRIPTION,
                preferences_url=f"{base}/preferences/{token}", library_url=f"{base}/library/{token}",
                script_url=f"{base}/interests.js")
    response = Response(html, status, content_type="text/html; charset=utf-8")
    response.headers["Content-Security-Policy"] = CSP + "; script-src 'self'"
    return response


def _carried(interest: Interest) -> dict[str, int]:
    """What an interest carries besides its words, counted: library papers, seed papers, authors followed."""
    library = len(current().store.library_entries(interest.library_key)) if interest.library_key else 0
    return {"library": library, "seeds": len(interest.seed_papers), "authors": len(interest.authors)}
