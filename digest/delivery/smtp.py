"""SMTP transport: one connection reused across messages, paced, with replies sorted as RFC 5321 says.

A reply is turned into one of three outcomes the delivery loop acts on: `TemporaryFailure` (4xx or a
lost connection: try again), `PermanentFailure` (5xx: do not repeat), `TransportUnavailable` (the
server cannot be reached, secured or logged into: stop the run).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import smtplib
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any

from digest.delivery.message import one_line
from digest.delivery.returnpath import tagged_sender
from digest.errors import ConfigError, ConnectionTrouble, PermanentFailure, TemporaryFailure, TransportUnavailable

log = logging.getLogger("digest")

FINAL_REPLY_WAIT = 600.0  # seconds, RFC 5321 §4.5.3.2.6: the wait for the reply to the end of DATA
# An RFC 3463 enhanced status code at the start of a reply: class.subject.detail.
_ENHANCED = re.compile(rb"^\s*([245])\.(\d{1,3})\.(\d{1,3})\b")


@dataclass(frozen=True)
class SmtpSettings:
    """Where and how to connect; the password comes from the environment, never from a file."""

    host: str = "localhost"
    port: int = 587
    security: str = "starttls"  # starttls | ssl | none
    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: str = ""
    verify_certificate: bool = True
    timeout: float = 30.0
    deadline: float = 120.0  # seconds for one message, from connecting to the final reply
    max_per_second: float = 0
    max_per_hour: int = 0
    messages_per_connection: int = 100

    @classmethod
    def from_config(cls, config: Any, environ: Mapping[str, str]) -> SmtpSettings:
        """The `[smtp]` settings checked together, with the password read from `smtp.password_env`."""
        s, where = config.smtp, str(config.source or "settings")
        password = environ.get(s.password_env, "")
        if s.username and s.security == "none":
            raise ConfigError(f"{where}: smtp.username is set with smtp.security = \"none\", which would send "
                              "the password in plain text; use \"starttls\" or \"ssl\"")
        if s.username and not password:
            raise ConfigError(f"{where}: smtp.username is set but the environment variable {s.password_env} "
                              "(smtp.password_env) holding the password is empty")
        if s.ca_file and not Path(s.ca_file).is_file():
            raise ConfigError(f"{where}: smtp.ca_file {s.ca_file} is not a file")
        return cls(host=s.host, port=s.port, security=s.security, username=s.username, password=password,
                   ca_file=str(s.ca_file), verify_certificate=s.verify_certificate, timeout=float(s.timeout),
                   deadline=float(s.deadline),
                   max_per_second=s.max_per_second, max_per_hour=s.max_per_hour,
                   messages_per_connection=s.messages_per_connection)

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def tls_context(self) -> ssl.SSLContext:
        """Verifying context (system CAs, or `ca_file`); verification off only when asked for."""
        context = ssl.create_default_context(cafile=self.ca_file or None)
        if not self.verify_certificate:
            log.warning("smtp: not verifying the certificate of %s (smtp.verify_certificate = false)", self.where)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


class Pacer:
    """Spaces messages `1/max_per_second` apart and keeps at most `max_per_hour` in any hour."""

    def __init__(self, max_per_second: float, max_per_hour: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 1 / max_per_second if max_per_second else 0.0
        self.per_hour = max_per_hour
        self.clock, self.sleep = clock, sleep
        self.last: float | None = None
        self.hour: deque[float] = deque()

    def share(self, workers: int) -> None:
        """One of `workers` pacers under the same limits: space messages `workers` times further apart."""
        self.interval *= workers
        self.per_hour = -(-self.per_hour // workers) if self.per_hour else 0

    def wait(self) -> None:
        """Block until one more message may start."""
        now = self.clock()
        ready = now if self.last is None else self.last + self.interval
        while self.hour and self.hour[0] <= now - 3600:
            self.hour.popleft()
        if self.per_hour and len(self.hour) >= self.per_hour:
            ready = max(ready, self.hour[0] + 3600)
        if ready > now:
            self.sleep(ready - now)
            now = ready
        self.last = now
        if self.per_hour:
            self.hour.append(now)


def _nodelay(sock: socket.socket) -> socket.socket:
    # smtplib writes a message over TLS as several records; with Nagle on, the last one waits for the
    # ACK of the others, which the server delays (~40 ms): a reused connection stalls at ~20 messages/s.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Watchdog:
    """Ends a message that overruns its deadline by shutting its connection's socket.

    A socket timeout bounds each read, not the message: a server that drips its reply a byte at a
    time, or stalls and then answers just inside the timeout, holds a client for ever. Shutting the
    socket down ends whatever read or write is blocked on it. One thread per process, started on first
    use; arming and disarming cost a lock (the thread is woken only when it was idle).
    """

    def __init__(self) -> None:
        self._pid = -1
        self._cond = threading.Condition()
        self._until: float | None = None
        self._conn: smtplib.SMTP | None = None
        self._idle = True
        self.fired = False

    def arm(self, seconds: float) -> None:
        """Start the clock of one message."""
        if self._pid != os.getpid():  # first use, or a forked worker: the parent's thread did not come along
            self._pid, self._cond, self._idle = os.getpid(), threading.Condition(), True
            threading.Thread(target=self._run, name="smtp-deadline", daemon=True).start()
        with self._cond:
            self._until, self._conn, self.fired = time.monotonic() + seconds, None, False
            if self._idle:
                self._cond.notify()

    def watch(self, conn: smtplib.SMTP) -> None:
        """The connection the message is on (its socket is read when the deadline passes: STARTTLS replaces it)."""
        with self._cond:
            self._conn = conn

    def disarm(self) -> None:
        with self._cond:
            self._until = self._conn = None

    def _run(self) -> None:
        cond = self._cond
        with cond:
            while True:
                until = self._until
                self._idle = until is None
                left = None if until is None else until - time.monotonic()
                if left is None or left > 0:
                    cond.wait(left)
                    continue
                sock = getattr(self._conn, "sock", None)
                self._until, self.fired = None, True
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)


class _SMTP(smtplib.SMTP):
    """smtplib.SMTP with TCP_NODELAY set on the plain socket, before STARTTLS wraps it."""

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return _nodelay(super()._get_socket(host, port, timeout))


class _SMTPS(smtplib.SMTP_SSL):
    """smtplib.SMTP_SSL with TCP_NODELAY set before the TLS handshake."""

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        plain = _nodelay(smtplib.SMTP._get_socket(self, host, port, timeout))
        return self.context.wrap_socket(plain, server_hostname=self._host)  # type: ignore[attr-defined]


class _Stale(ConnectionTrouble):
    """The connection was closed before MAIL FROM was answered: nothing of this message was taken."""


def is_bounce(stage: str, code: int, reply: bytes) -> bool:
    """Whether a 5xx reply says the address itself is bad (5.1.x, 5.2.x, or 550/551/553 to RCPT).

    Policy rejections such as `554 5.7.1 Relay access denied` are not, so a misconfigured relay
    cannot suppress the whole list.
    """
    match = _ENHANCED.match(reply)
    if match:
        return match[1] == b"5" and match[2] in (b"1", b"2")
    return stage == "RCPT TO" and code in (550, 551, 553)


class SmtpTransport:
    """Hands messages to one SMTP server over a connection kept open between messages."""

    name = "smtp"

    def __init__(self, settings: SmtpSettings, sender: str, *, pacer: Pacer | None = None,
                 return_path: str = "") -> None:
        self.settings, self.sender = settings, sender
        self.return_path = return_path  # when set, each message's envelope sender is tagged with its digest
        self.pacer = pacer or Pacer(settings.max_per_second, settings.max_per_hour)
        self.connections = 0  # opened so far
        self.troubled = 0  # tries in a row that ended with the connection broken or stalled
        self._conn: smtplib.SMTP | None = None
        self._carried = 0  # messages accepted on the current connection
        self._watchdog = Watchdog()
        self._paced = False  # `pace` has waited for the next message's turn

    @cached_property
    def _context(self) -> ssl.SSLContext:
        return self.settings.tls_context()

    @cached_property
    def _helo_name(self) -> str:
        return socket.getfqdn()  # once, rather than smtplib's lookup per connection

    def share(self, workers: int) -> None:
        self.pacer.share(workers)

    def pace(self) -> None:
        self.pacer.wait()
        self._paced = True

    def send(self, data: bytes, recipient: str, day: date) -> None:
        """One SMTP transaction for one recipient, within `smtp.deadline` from connecting to the final reply;
        raises a DeliveryError subclass when not accepted."""
        if not self._paced:
            self.pacer.wait()
        self._paced = False
        self._watchdog.arm(self.settings.deadline)
        try:
            conn = self._connection()
            reused = self._carried > 0
            try:
                self._transaction(conn, recipient, data, day)
            except _Stale:
                if not reused or self._watchdog.fired:
                    raise
                log.debug("smtp: %s closed the idle connection; reconnecting", self.settings.where)
                self._transaction(self._connection(), recipient, data, day)
        except ConnectionTrouble as exc:
            self.troubled += 1
            if self._watchdog.fired:
                raise ConnectionTrouble(f"{self.settings.where} did not finish the message within "
                                        f"{self.settings.deadline:g} s (smtp.deadline): {exc}") from exc
            raise
        except TransportUnavailable as exc:
            if self._watchdog.fired:
                self.troubled += 1
                raise TransportUnavailable(f"{self.settings.where} did not greet within {self.settings.deadline:g} s "
                                           "(smtp.deadline)") from exc
            raise
        finally:
            self._watchdog.disarm()
        self.troubled = 0
        self._carried += 1

    def close(self) -> None:
        """QUIT politely; a server that is already gone is fine."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.quit()
            except (smtplib.SMTPException, OSError):
                conn.close()

    def _connection(self) -> smtplib.SMTP:
        limit = self.settings.messages_per_connection
        if self._conn is not None and limit and self._carried >= limit:
            self.close()
        if self._conn is None:
            self._conn = self._open()
            self._carried = 0
            self.connections += 1
        return self._conn

    def _open(self) -> smtplib.SMTP:
        s = self.settings
        conn: smtplib.SMTP | None = None
        try:
            if s.security == "ssl":
                conn = _SMTPS(local_hostname=self._helo_name, timeout=s.timeout, context=self._context)
            else:
                conn = _SMTP(local_hostname=self._helo_name, timeout=s.timeout)
            conn._host = s.host  # type: ignore[attr-defined]  # the name STARTTLS and SSL check (set by __init__)
            self._watchdog.watch(conn)
            code, reply = conn.connect(s.host, s.port)
            if code != 220:
                raise smtplib.SMTPConnectError(code, reply)
            self._greet(conn)
            return conn
        except TransportUnavailable:
            _close(conn)
            raise
        except OSError as exc:  # smtplib's and ssl's errors are OSErrors too
            _close(conn)
            raise _unavailable(exc, s.where) from exc

    def _greet(self, conn: smtplib.SMTP) -> None:
        s = self.settings
        conn.ehlo()
        if s.security == "starttls":
            if not conn.has_extn("starttls"):
                raise TransportUnavailable(f"{s.where} does not offer STARTTLS; not sending in plain text "
                                           "(smtp.security)", retry=False)
            conn.starttls(context=self._context)
            conn.ehlo()
        if s.username:
            conn.login(s.username, s.password)

    def envelope_sender(self, data: bytes) -> str:
        """MAIL FROM: the return path tagged with this digest (read from its Message-ID), else the From address."""
        return tagged_sender(self.return_path, data) if self.return_path else self.sender

    def _transaction(self, conn: smtplib.SMTP, recipient: str, data: bytes, day: date) -> None:
        self._watchdog.watch(conn)
        sender = self.envelope_sender(data)
        if conn.has_extn("pipelining"):
            return self._pipelined(conn, sender, recipient, data)
        stage = "MAIL FROM"
        try:
            self._check(conn, stage, *conn.mail(sender))
            stage = "RCPT TO"
            self._check(conn, stage, *conn.rcpt(recipient))
            stage = "DATA"
            conn.putcmd("data")
            code, reply = conn.getreply()
            if code != 354:  # refused (or answered oddly): judged as smtplib's `data` would have it judged
                return self._check(conn, stage, code, reply)
            conn.send(dot_stuffed(data))
            self._check(conn, stage, *self._final_reply(conn))
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._lost(stage, exc)

    def _pipelined(self, conn: smtplib.SMTP, sender: str, recipient: str, data: bytes) -> None:
        """RFC 2920: MAIL, RCPT and DATA in one write, their three replies read after; then the message.

        Two round trips a message instead of four. Each reply is still judged in order, so a refused
        sender or recipient is reported at its own stage, exactly as without pipelining.
        """
        stage = "MAIL FROM"
        try:
            conn.send(f"MAIL FROM:<{sender}>\r\nRCPT TO:<{recipient}>\r\nDATA\r\n")
            replies = [conn.getreply()]
            stage = "RCPT TO"
            replies.append(conn.getreply())
            stage = "DATA"
            replies.append(conn.getreply())
            if replies[2][0] == 354 and not all(200 <= code < 300 for code, _ in replies[:2]):
                conn.send(b".\r\n")  # a server that said go ahead anyway gets an empty message, to be refused
                conn.getreply()
            for stage, (code, reply) in zip(("MAIL FROM", "RCPT TO"), replies, strict=False):
                self._check(conn, stage, code, reply)
            stage = "DATA"
            if replies[2][0] != 354:
                self._check(conn, stage, *replies[2])
            conn.send(dot_stuffed(data))
            self._check(conn, stage, *self._final_reply(conn))
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            self._lost(stage, exc)

    def _final_reply(self, conn: smtplib.SMTP) -> tuple[int, bytes]:
        """The reply to the end of the message, awaited up to RFC 5321's 10 minutes (§4.5.3.2.6) rather than
        `smtp.timeout`: a server may scan the message before it answers, and a client that gives up sooner
        leaves a message the server may well have taken, which the next try sends again. `smtp.deadline`
        (the watchdog) still bounds the whole message."""
        sock = conn.sock
        if sock is not None:
            sock.settimeout(max(self.settings.timeout, FINAL_REPLY_WAIT))
        try:
            return conn.getreply()
        finally:
            if sock is not None and conn.sock is sock:
                with contextlib.suppress(OSError):
                    sock.settimeout(self.settings.timeout)

    def _lost(self, stage: str, exc: Exception) -> None:
        self._drop()
        if stage == "MAIL FROM":
            raise _Stale(f"connection closed before {stage}: {exc}") from exc
        raise ConnectionTrouble(f"connection lost during {stage}: {exc or exc.__class__.__name__}") from exc

    def _check(self, conn: smtplib.SMTP, stage: str, code: int, reply: bytes) -> None:
        if 200 <= code < 300:
            return
        text = f"{stage}: {code} {one_line(reply.decode('utf-8', 'replace'))}"
        if code == 421:  # the server is closing the connection
            self._drop()
            raise (_Stale if stage == "MAIL FROM" else TemporaryFailure)(text)
        self._reset(conn)
        if 400 <= code < 500:
            raise TemporaryFailure(text)
        if 500 <= code < 600:
            raise PermanentFailure(text, bounce=is_bounce(stage, code, reply))
        self._drop()
        raise TemporaryFailure(f"{text} (not an SMTP reply)")

    def _reset(self, conn: smtplib.SMTP) -> None:
        try:
            conn.rset()
        except (smtplib.SMTPException, OSError):
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        _close(conn)


def dot_stuffed(data: bytes) -> bytes:
    """The message as DATA sends it: a line starting with "." gets another, and "CRLF.CRLF" ends it."""
    body = data.replace(b"\n.", b"\n..")
    if body.startswith(b"."):
        body = b"." + body
    return body + (b".\r\n" if body.endswith(b"\r\n") else b"\r\n.\r\n")


def _close(conn: smtplib.SMTP | None) -> None:
    if conn is not None:
        conn.close()


def _unavailable(exc: OSError, where: str) -> TransportUnavailable:
    """A failure to connect, secure or log in, as one line saying whether trying again can help."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TransportUnavailable(f"{where}: certificate not trusted ({exc.verify_message}); "
                                    "set smtp.ca_file to the relay's CA", retry=False)
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        reply = one_line(exc.smtp_error.decode("utf-8", "replace"))
        return TransportUnavailable(f"{where}: login refused: {exc.smtp_code} {reply}", retry=False)
    if isinstance(exc, smtplib.SMTPNotSupportedError | ssl.SSLError):
        return TransportUnavailable(f"{where}: {exc}", retry=False)
    if isinstance(exc, smtplib.SMTPResponseException):
        reply = one_line(exc.smtp_error.decode("utf-8", "replace"))
        return TransportUnavailable(f"{where}: {exc.smtp_code} {reply}", retry=exc.smtp_code < 500)
    return TransportUnavailable(f"cannot connect to {where}: {exc or exc.__class__.__name__}")
