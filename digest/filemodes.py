"""Files only their owner reads: the store, the sent journal, the outbox, previews and subscriber exports.

They hold subscribers' addresses, what each was sent and, without `DIGEST_SECRET`, the key that signs
every unsubscribe and erase link; a store other local users can read lets any of them forge those links.
So what the digest makes is made 0600 (folders 0700) whatever the umask, and such a file or folder found
open to other users (made by an earlier version, or by hand) is closed to them with a one-line warning,
or, when it belongs to another user and cannot be changed, named in a warning with the chmod to run.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("digest")

FILE_MODE = 0o600
FOLDER_MODE = 0o700
OPEN_TO_OTHERS = 0o077  # any permission for the group or for everyone else


def create_file(path: Path) -> bool:
    """Make `path` an empty 0600 file unless it exists; True when made here."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)  # the umask only ever takes bits away; this is exact even under umask 0o777
    finally:
        os.close(fd)
    return True


def open_private(path: Path, flags: int) -> int:
    """`os.open` of a file that, if made now, is made 0600 whatever the umask."""
    fd = os.open(path, flags | os.O_CREAT, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & OPEN_TO_OTHERS:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def make_folder(path: Path) -> None:
    """`mkdir -p` with every folder made here 0700; a folder that exists is left as it is."""
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            continue  # made meanwhile by another worker
        os.chmod(folder, FOLDER_MODE)


def close_to_others(path: Path, what: str) -> None:
    """If `path` exists and the group or others have any permission on it, take it away (with a warning);
    when it is not ours to change, warn with the command to run."""
    try:
        st = path.stat()
    except OSError:
        return
    mode = stat.S_IMODE(st.st_mode)
    if not mode & OPEN_TO_OTHERS:
        return
    tight = mode & ~OPEN_TO_OTHERS
    try:
        os.chmod(path, tight)
    except OSError as exc:
        log.warning("%s %s is open to other users (mode %04o) and cannot be changed here (%s): run "
                    "`chmod %s %s`", what, path, mode, exc.strerror or exc, "700" if path.is_dir() else "600", path)
        return
    log.warning("%s %s was open to other users (mode %04o): now %04o", what, path, mode, tight)

