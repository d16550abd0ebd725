"""Real SMTP servers on 127.0.0.1 for the delivery tests: aiosmtpd in a thread, recording what it accepts.

A `Recorder` keeps every accepted message with the connection it came on; its `rcpt`, `mail` and
`data` hooks may answer with a reply of their own (a 451, a 550 …) instead of accepting.
"""

from __future__ import annotations

import asyncio
import email
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

Hook = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Received:
    """One message the server accepted."""

    peer: tuple[str, int]  # the client's address: one per connection
    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes
    tls: bool
    login: str | None

    @property
    def message(self) -> EmailMessage:
        return email.message_from_bytes(self.data, policy=policy.default)  # type: ignore[return-value]


class Recorder:
    """aiosmtpd handler: accepts and records, unless a hook answers for the address first."""

    def __init__(self, *, mail: Hook | None = None, rcpt: Hook | None = None, data: Hook | None = None,
                 hang_up_after_each: bool = False, drop_in_data: int = 0, pipelining: bool = True,
                 on_message: Callable[[Received], None] | None = None) -> None:
        self.hooks = {"MAIL": mail, "RCPT": rcpt, "DATA": data}
        self.hang_up_after_each = hang_up_after_each
        self.drop_in_data = drop_in_data  # hang up in the middle of the next N messages
        self.on_message = on_message
        self.pipelining = pipelining  # advertise RFC 2920 PIPELINING, as Postfix and most servers do
        self.messages: list[Received] = []
        self.rcpt_attempts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def _reply(self, stage: str, address: str) -> str | None:
        hook = self.hooks[stage]
        return hook(address) if hook else None

    async def handle_EHLO(self, server: SMTP, session: Any, envelope: Any, hostname: str,
                          responses: list[str]) -> list[str]:
        session.host_name = hostname
        if self.pipelining:
            responses.insert(len(responses) - 1, "250-PIPELINING")
        return responses

    async def handle_MAIL(self, server: SMTP, session: Any, envelope: Any, address: str, options: list) -> str:
        reply = self._reply("MAIL", address)
        if reply:
            return reply
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(self, server: SMTP, session: Any, envelope: Any, address: str, options: list) -> str:
        with self.lock:
            self.rcpt_attempts[address] += 1
        reply = self._reply("RCPT", address)
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Any, envelope: Any) -> str:
        reply = self._reply("DATA", envelope.rcpt_tos[0])
        if reply:
            return reply
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else None
        received = Received(session.peer, envelope.mail_from, tuple(envelope.rcpt_tos),
                            bytes(envelope.original_content), session.ssl is not None, login)
        with self.lock:
            self.messages.append(received)
        if self.on_message:
            self.on_message(received)
        if self.hang_up_after_each:  # as a server closing idle or used-up connections does
            server.loop.call_soon(server.transport.close)  # after the 250 is written, before the next MAIL
        return "250 OK"

    def per_recipient(self) -> Counter[str]:
        with self.lock:
            return Counter(r for m in self.messages for r in m.rcpt_tos)

    def connections(self) -> int:
        with self.lock:
            return len({m.peer for m in self.messages})


class _SMTP(SMTP):
    """aiosmtpd's server, able to hang up after the first line of a message (`Recorder.drop_in_data`)."""

    async def smtp_DATA(self, arg: str) -> None:
        handler = self.event_handler
        if handler.drop_in_data > 0 and self.envelope is not None and self.envelope.rcpt_tos:
            handler.drop_in_data -= 1
            await self.push("354 End data with <CR><LF>.<CR><LF>")
            await self._reader.readuntil(b"\r\n")
            self.transport.close()
            await asyncio.Event().wait()  # hung up: read nothing more until the connection is gone
        await super().smtp_DATA(arg)


class _Controller(Controller):
    def factory(self) -> SMTP:
        return _SMTP(self.handler, **self.SMTP_kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _authenticate(users: dict[str, str]) -> Callable[..., AuthResult]:
    def check(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and users.get(auth_data.login.decode()) == auth_data.password.decode()
        return AuthResult(success=ok, handled=False, auth_data=auth_data)
    return check


@dataclass
class Tls:
    """A CA made for the test, a certificate for 127.0.0.1 signed by it, and its PEM file."""

    ca: trustme.CA
    ca_file: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        return context


def make_tls(folder: Path) -> Tls:
    ca = trustme.CA()
    ca_file = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return Tls(ca, ca_file)


@contextmanager
def smtp_server(handler: Recorder, *, tls: Tls | None = None, implicit_tls: bool = False,
                users: dict[str, str] | None = None) -> Iterator[int]:
    """Run an SMTP server on a free 127.0.0.1 port for the duration; yields the port.

    With `tls`, STARTTLS is offered and required (or TLS from the start with `implicit_tls`);
    with `users`, AUTH is required.
    """
    kwargs: dict[str, Any] = {"hostname": "127.0.0.1", "port": free_port(), "server_hostname": "mx.test",
                              "ready_timeout": 10}
    if tls and implicit_tls:
        kwargs["ssl_context"] = tls.server_context()
    elif tls:
        kwargs.update(tls_context=tls.server_context(), require_starttls=True)
    if users:
        kwargs.update(authenticator=_authenticate(users), auth_required=True)
    controller = _Controller(handler, **kwargs)
    controller.start()
    try:
        yield controller.port
    finally:
        controller.stop()
