"""A throwaway Dovecot IMAP server for the tests: Debian's binary, a config, certificate and Maildir in /tmp.

It listens on free ports: IMAP with STARTTLS and IMAPS on 127.0.0.1 (a certificate from a trustme CA),
and IMAP without STARTTLS on 127.0.0.2 and, where the machine has one, on its own non-loopback address
(from which no login is accepted: a client must refuse to send the password there). One user, `bounces`,
with a random password; each test fills an IMAP folder of its own. Dovecot runs unprivileged, as the
current user (as `dovecot` when the tests run as root), started once per test session and stopped at the end.
"""

from __future__ import annotations

import grp
import imaplib
import ipaddress
import mailbox
import os
import pwd
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trustme

from .pg import free_port

USER = "bounces"
PLAIN_LOOPBACK = "127.0.0.2"  # loopback, but not the address the TLS listeners use

CONFIG = """\
protocols = imap
listen = 127.0.0.1
base_dir = {folder}/run
state_dir = {folder}/state
log_path = {folder}/dovecot.log
info_log_path = {folder}/dovecot.log
# Everything as one unprivileged user: no root, no chroot, mail owned by that user.
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
first_valid_uid = {uid}
first_valid_gid = {gid}
service anvil {{
  chroot =
  # No growing delay after the wrong-password test: every test logs in at once.
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    port = {imap}
  }}
  inet_listener imaps {{
    port = {imaps}
    ssl = yes
  }}
  inet_listener plain {{
    address = {plain_addresses}
    port = {plain}
  }}
}}
ssl = yes
ssl_cert = <{folder}/cert.pem
ssl_key = <{folder}/key.pem
{plain_locals}
disable_plaintext_auth = yes
auth_mechanisms = plain
auth_failure_delay = 0
passdb {{
  driver = passwd-file
  args = {folder}/users
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={folder}/home
}}
mail_location = maildir:{folder}/Maildir
"""


def binary() -> Path | None:
    """Dovecot's master program (Debian keeps it in /usr/sbin, often out of PATH)."""
    found = shutil.which("dovecot") or "/usr/sbin/dovecot"
    return Path(found) if os.access(found, os.X_OK) else None


def outward_address() -> str | None:
    """This machine's own non-loopback IPv4 address, if it has one (the one it would reach the world from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))  # a UDP "connection" sends nothing; the kernel just picks the route
        except OSError:
            return None
        address = str(sock.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


@dataclass
class ImapServer:
    folder: Path
    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    password: str
    ca_file: Path
    outward: str | None
    owner: pwd.struct_passwd

    def url(self, folder: str, *, scheme: str = "imaps", host: str = "127.0.0.1") -> str:
        """`scheme://bounces@host:port/folder`: imaps, imap (STARTTLS), or plain (imap:// without STARTTLS)."""
        if scheme == "plain":
            return f"imap://{USER}@{host}:{self.ports['plain']}/{folder}"
        return f"{scheme}://{USER}@{host}:{self.ports[scheme]}/{folder}"

    def fill(self, folder: str, messages: list[bytes]) -> str:
        """A new IMAP folder holding these messages, written into the Maildir as a delivery agent would."""
        box = mailbox.Maildir(self.folder / "Maildir", create=False).add_folder(folder)
        for data in messages:
            box.add(data)
        self._own(self.folder / "Maildir" / f".{folder}")
        return folder

    def flags(self, folder: str) -> list[str]:
        """Each message's flags in the folder, as the server reports them to another client."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        with imaplib.IMAP4_SSL("127.0.0.1", self.ports["imaps"], ssl_context=context, timeout=10) as conn:
            conn.login(USER, self.password)
            conn.select(f'"{folder}"', readonly=True)
            kind, data = conn.fetch("1:*", "(FLAGS)")
        assert kind == "OK", data
        return [line.decode() for line in data if isinstance(line, bytes)]

    def log(self) -> str:
        return (self.folder / "dovecot.log").read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _own(self, path: Path) -> None:
        _chown_tree(path, self.owner)


def _chown_tree(path: Path, owner: pwd.struct_passwd) -> None:
    if os.geteuid() != 0:
        return
    for place in [path, *path.rglob("*")]:
        os.chown(place, owner.pw_uid, owner.pw_gid)


def start() -> ImapServer:
    """Configure and start Dovecot; raises if it is not installed or will not start."""
    program = binary()
    if program is None:
        raise FileNotFoundError("Dovecot is not installed (Debian package: dovecot-imapd)")
    owner = pwd.getpwnam("dovecot") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())  # never run it as root
    folder = Path(tempfile.mkdtemp(prefix="digest-imap-"))
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    cert.private_key_pem.write_to_path(str(folder / "key.pem"))
    (folder / "cert.pem").write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    password = secrets.token_urlsafe(12)
    # Logins only from loopback: the listener on the outward address must never accept one.
    (folder / "users").write_text(f"{USER}:{{PLAIN}}{password}::::::allow_nets=127.0.0.0/8\n")
    mailbox.Maildir(folder / "Maildir", create=True)
    outward = outward_address()
    plain = [PLAIN_LOOPBACK, *([outward] if outward else [])]
    ports = {"imap": free_port(), "imaps": free_port(), "plain": free_port()}
    (folder / "dovecot.conf").write_text(CONFIG.format(
        folder=folder, user=owner.pw_name, group=grp.getgrgid(owner.pw_gid).gr_name, uid=owner.pw_uid,
        gid=owner.pw_gid, plain_addresses=" ".join(plain), **ports,
        plain_locals="\n".join(_plain_only(address) for address in plain)))
    _chown_tree(folder, owner)
    with open(folder / "stderr.log", "wb") as stderr:
        process = subprocess.Popen([str(program), "-F", "-c", str(folder / "dovecot.conf")], stdout=stderr,
                                   stderr=stderr, **_as(owner))
    server = ImapServer(folder, process, ports, password, folder / "ca.pem", outward, owner)
    try:
        _wait(server)
    except BaseException:
        server.stop()
        raise
    return server


def _plain_only(address: str) -> str:
    """No TLS on this address; on loopback, a password in plain text is accepted (as a local relay's would be)."""
    allow = "\n  disable_plaintext_auth = no" if ipaddress.ip_address(address).is_loopback else ""
    return f"local {address} {{\n  ssl = no{allow}\n}}"


def _as(owner: pwd.struct_passwd) -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


def _wait(server: ImapServer) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            logs = [server.folder / "stderr.log", server.folder / "dovecot.log"]
            raise RuntimeError("dovecot exited: " + "".join(f.read_text(errors="replace") for f in logs if f.exists()))
        try:
            with socket.create_connection(("127.0.0.1", server.ports["imaps"]), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("dovecot did not start listening")
