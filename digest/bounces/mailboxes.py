"""The messages of a bounce mailbox: a Maildir folder, an mbox file, or an IMAP mailbox (read-only).

Each message comes with a name an operator can find it by (the file and message); a message that
cannot be read is handed on with the reason instead of its bytes, so one bad message never stops
the others. At most `max_bytes + 1` bytes of a message are read (IMAP: fetched), whatever its size,
so that a huge one costs no more memory than the limit and is still seen to be too large. Nothing
is moved, flagged or deleted: `digest bounces` remembers what it has read.
"""

from __future__ import annotations

import contextlib
import imaplib
import ipaddress
import mailbox
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from digest.errors import DigestError, UsageError


@dataclass(frozen=True)
class Item:
    """One message of a mailbox: where it is, and its bytes (or why they could not be read)."""

    where: str
    data: bytes | None  # its bytes, or the first max_bytes + 1 of them when it is larger
    error: str = ""


def maildir(path: Path, max_bytes: int) -> Iterator[Item]:
    """Every message of a Maildir (new/ and cur/), in name order."""
    if not (path / "cur").is_dir() or not (path / "new").is_dir():
        raise UsageError(f"{path} is not a Maildir (it needs cur/ and new/ folders)")
    return _maildir_items(mailbox.Maildir(path, factory=None, create=False), path, max_bytes)


def _maildir_items(box: mailbox.Maildir, path: Path, max_bytes: int) -> Iterator[Item]:
    for key in sorted(box.keys()):
        where = f"{path}: message {key}"
        try:
            with box.get_file(key) as file:
                data = file.read(max_bytes + 1)
            yield Item(where, data)
        except (OSError, KeyError) as exc:  # removed or unreadable since the listing
            yield Item(where, None, f"cannot read: {getattr(exc, 'strerror', None) or exc}")


def mbox(path: Path, max_bytes: int) -> Iterator[Item]:
    """Every message of an mbox file, in order (numbered from 1)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such mbox file")
    box = mailbox.mbox(path, factory=None, create=False)
    try:
        keys = list(box.keys())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return _mbox_items(box, keys, path, max_bytes)


def _mbox_items(box: mailbox.mbox, keys: list[str], path: Path, max_bytes: int) -> Iterator[Item]:
    for number, key in enumerate(keys, start=1):
        where = f"{path}: message {number}"
        try:
            with box.get_file(key) as file:  # the message after its From_ line, as get_bytes gives it
                data = file.read(max_bytes + 1)
            yield Item(where, data)
        except OSError as exc:
            yield Item(where, None, f"cannot read: {exc.strerror or exc}")
    box.close()


def imap(url: str, environ: Mapping[str, str], password_env: str, max_bytes: int) -> Iterator[Item]:
    """Every message of an IMAP mailbox, `imaps://user@host[:port]/MAILBOX` (or `imap://` with STARTTLS), read-only.

    The password comes from the environment variable `password_env`, never from the URL.
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or past 65535
        port = -1
    if parts.scheme not in ("imap", "imaps") or not parts.hostname or not parts.username or port == -1:
        raise UsageError(f"--imap {url!r}: give imaps://USER@HOST[:PORT]/MAILBOX (or imap:// for STARTTLS)")
    if parts.password:
        raise UsageError(f"--imap: leave the password out of the URL; put it in ${password_env} "
                         "(bounces.imap_password_env)")
    password = environ.get(password_env, "")
    if not password:
        raise UsageError(f"--imap: the environment variable {password_env} (bounces.imap_password_env) holding the "
                         "IMAP password is empty")
    folder = unquote(parts.path.lstrip("/")) or "INBOX"
    shown = f"{parts.scheme}://{parts.username}@{parts.hostname}{f':{port}' if port else ''}/{folder}"
    conn = _imap_connect(parts.scheme, parts.hostname, port, shown)
    try:
        conn.login(unquote(parts.username), password)
        selected, _ = conn.select(_quoted(folder), readonly=True)
        kind, found = conn.uid("SEARCH", None, "ALL") if selected == "OK" else ("NO", [])
    except (imaplib.IMAP4.error, OSError) as exc:
        refused = conn.state == "NONAUTH" and not isinstance(exc, imaplib.IMAP4.abort | OSError)  # LOGIN said NO
        with contextlib.suppress(imaplib.IMAP4.error, OSError):
            conn.logout()
        if refused:
            raise UsageError(f"{shown}: the server refused the login: {_reason(exc)} (the password is read from "
                             f"${password_env}, bounces.imap_password_env)") from exc
        raise DigestError(f"{shown}: {_reason(exc)}") from exc
    if selected != "OK":
        with contextlib.suppress(imaplib.IMAP4.error, OSError):
            conn.logout()
        raise DigestError(f"{shown}: no such mailbox")
    uids = found[0].split() if kind == "OK" and found and found[0] else []
    return _imap_items(conn, uids, shown, max_bytes)


def _imap_items(conn: imaplib.IMAP4, uids: list[bytes], shown: str, max_bytes: int) -> Iterator[Item]:
    try:
        for uid in uids:
            where = f"{shown}: message UID {uid.decode()}"
            kind, fetched = conn.uid("FETCH", uid, f"(BODY.PEEK[]<0.{max_bytes + 1}>)")  # a partial fetch
            data = next((item[1] for item in fetched or () if isinstance(item, tuple)), None)
            yield Item(where, data) if kind == "OK" and data is not None else Item(where, None, "cannot fetch it")
    except (imaplib.IMAP4.error, OSError) as exc:  # a refused login, a dropped connection: nothing more to read
        raise DigestError(f"{shown}: {_reason(exc)}") from exc
    finally:
        with contextlib.suppress(imaplib.IMAP4.error, OSError):
            conn.logout()


def _reason(exc: BaseException) -> str:
    """The error as text: imaplib hands on the server's reply as bytes (which would print as b'...')."""
    if len(exc.args) == 1 and isinstance(exc.args[0], bytes):
        return exc.args[0].decode(errors="replace")
    return str(exc)


def _quoted(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _imap_connect(scheme: str, host: str, port: int | None, shown: str) -> imaplib.IMAP4:
    context = ssl.create_default_context()
    try:
        if scheme == "imaps":
            return imaplib.IMAP4_SSL(host, port or 993, ssl_context=context, timeout=60)
        conn = imaplib.IMAP4(host, port or 143, timeout=60)
        if "STARTTLS" in conn.capabilities:
            conn.starttls(ssl_context=context)
        elif not _loopback(host):
            conn.shutdown()
            raise UsageError(f"{shown} does not offer STARTTLS; not sending the password in plain text "
                             "(use imaps://)")
        return conn
    except (OSError, imaplib.IMAP4.error) as exc:
        raise DigestError(f"{shown}: cannot connect: {getattr(exc, 'strerror', None) or exc}") from exc


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
