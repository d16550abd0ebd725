"""A subscriber's data on request: `digest subscribers export-data` and `digest subscribers forget`.

Export gives everything the store holds about one address as JSON, each interest with the authors it
follows and its library's entries. Forget erases it (profile, preferences, feedback, learned model,
received papers, the libraries no other profile names; the send log's and bounce reports' rows kept
under a hash) and keeps the address only as that hash on the suppression list, which every send,
sync, import and link checks, so the address is never mailed again. A profile file is the
operator's, not the store's: forget cannot delete it, so it says so, and every run refuses that file
until it is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from digest.errors import UsageError
from digest.subscribers.roster import ERASED

if TYPE_CHECKING:
    from digest.store import Store
    from digest.subscribers.roster import Profiles


class Parts(Protocol):
    """What export and erasure need of a command: the store and the profiles (`app.App` has them)."""

    store: Store
    profiles: Profiles


@dataclass(frozen=True)
class Forgotten:
    """What `forget` erased, and the profile file that still names the address (the operator deletes it)."""

    email: str
    counts: dict[str, int] = field(default_factory=dict)
    profile_file: str | None = None
    already: bool = False

    def summary(self) -> str:
        if self.already:
            return f"{self.email} was forgotten already: only its hash is kept, on the suppression list"
        erased = ", ".join(f"{table} {n}" for table, n in sorted(self.counts.items()) if n) or "nothing was stored"
        return (f"forgot {self.email} (rows erased or anonymised: {erased}); its hash is on the suppression list, "
                "so it is never mailed again")


def _check(email: str) -> str:
    if "@" not in email or any(c.isspace() for c in email.strip()):
        raise UsageError(f"{email!r} is not an email address")
    return email.strip()


def export_data(app: Parts, email: str) -> dict[str, Any]:
    """Everything stored about `email`; UsageError when nothing is."""
    email = _check(email)
    app.profiles.sync()
    data = app.store.subscriber_data(email)
    if not any(v for k, v in data.items() if k != "email"):
        raise UsageError(f"nothing is stored about {email}")
    return data


def forget(app: Parts, email: str) -> Forgotten:
    """Erase `email` from the store, keep its hash on the suppression list, and re-read the profile files."""
    email = _check(email)
    app.profiles.sync()
    if app.store.is_forgotten(email) and not _held(app.store.subscriber_data(email)):
        return Forgotten(email, already=True, profile_file=_file_naming(app, email))
    owner = app.store.owners([email.lower()]).get(email.lower())
    counts = app.store.forget(email)
    app.store.compact_search_index()  # (the console's search index kept the address's letter triples till merged)
    app.profiles.sync()  # the file, if any, is read again and refused
    return Forgotten(email, counts, profile_file=owner[1] if owner and owner[0] == "file" else _file_naming(app, email))


def _held(data: dict[str, Any]) -> bool:
    """Whether the store holds anything about the address but its hash."""
    return any(v for k, v in data.items() if k not in ("email", "forgotten"))


def _file_naming(app: Parts, email: str) -> str | None:
    """A profile file refused because it names this forgotten address, if any."""
    from digest.subscribers.profiles import parse_profile

    for path, _line, message in app.store.profile_problems():
        if message == ERASED:
            subscriber, _ = parse_profile(Path(path))
            if subscriber is not None and subscriber.email.lower() == email.lower():
                return path
    return None
