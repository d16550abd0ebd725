"""The outgoing side of a command: the transport (made on first use), the DKIM signer, and the bytes that go out.

Made on first use so that previews and ingests never need the SMTP password or the signing key; a send asks
for both before it starts (`check`), so a settings error stops it before any digest is claimed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import date, timedelta
from email.message import EmailMessage
from functools import cached_property
from pathlib import Path

from digest.config import Config
from digest.delivery.dkim import DkimSigner
from digest.delivery.handover import OutboxTransport, Outcome, RetryPolicy, Transport, send_test
from digest.delivery.sender import SendPolicy
from digest.delivery.smtp import SmtpSettings, SmtpTransport

log = logging.getLogger("digest")
UNSIGNED = ("sending over SMTP without a DKIM signature: Gmail and Yahoo require bulk senders to sign, and may "
            "reject or junk these digests; set dkim.selector (see docs/delivery.md, section \"DKIM\"), or "
            "dkim.relay_signs = true when the relay signs them")


def make_transport(config: Config, environ: Mapping[str, str], *, test: bool = False) -> Transport:
    """The transport `delivery.transport` names; test sends to the outbox go to its `test/` folder."""
    if config.delivery.transport == "smtp":
        return SmtpTransport(SmtpSettings.from_config(config, environ), config.newsletter.from_address,
                             return_path=config.delivery.return_path)
    folder = Path(config.delivery.outbox)
    return OutboxTransport(folder / "test" if test else folder)


class Mailer:
    """The transport, the DKIM signer and the delivery policies of one command, read from the settings."""

    def __init__(self, config: Config, transport: Transport | None = None) -> None:
        self.config = config
        d = config.delivery
        self.retry = RetryPolicy(d.attempts, float(d.retry_delay), breaker=d.max_connection_failures)
        self._transport = transport
        self.warned: set[str] = set()  # warnings given once per command, not once per date sent

    @property
    def transport(self) -> Transport:
        """Made on first use, so that previews and ingests never need the SMTP password."""
        if self._transport is None:
            self._transport = make_transport(self.config, os.environ)
        return self._transport

    def send_test(self, message: EmailMessage, to: str, day: date) -> Outcome:
        """Hand a test message to `to` with the usual retries, recording nothing in the send log: through the
        command's transport when it has one, else one made for tests (the outbox's `test/` folder)."""
        transport = self._transport or make_transport(self.config, os.environ, test=True)
        try:
            return send_test(transport, self.wire(message), to, day, self.retry)
        finally:
            if transport is not self._transport:
                transport.close()

    @cached_property
    def dkim(self) -> DkimSigner | None:
        """The signer `[dkim]` asks for (None: no signing), read when first needed."""
        return DkimSigner.from_config(self.config, os.environ)

    def wire(self, message: EmailMessage) -> bytes:
        """The bytes that go out: the message as serialised, DKIM-signed when configured."""
        data = message.as_bytes()
        return self.dkim(data) if self.dkim else data

    def check(self) -> None:
        """Make the transport and read the signing key now: a settings error (no password, a bad key) stops a send
        before it starts. Then warn once per command when it would send over SMTP unsigned."""
        _ = self.transport, self.dkim
        self.warn_unsigned()

    def warn_unsigned(self) -> None:
        """One warning per command (a daemon: its first send) when it sends over SMTP unsigned and nobody said the
        relay signs, however many dates or looks it sends (a `digest run` near midnight sends two dates)."""
        unsigned = self.transport.name == "smtp" and self.dkim is None and not self.config.dkim.relay_signs
        if unsigned and UNSIGNED not in self.warned:
            self.warned.add(UNSIGNED)
            log.warning(UNSIGNED)

    def policy(self) -> SendPolicy:
        """How a sender claims and delivers: batch size, lease, retries, bounces, the run's time limit."""
        d = self.config.delivery
        return SendPolicy(batch=d.batch_size, lease=timedelta(seconds=d.lease_seconds), retry=self.retry,
                          suppress_after=d.suppress_after,
                          max_run=timedelta(minutes=d.max_run_minutes) if d.max_run_minutes else None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
