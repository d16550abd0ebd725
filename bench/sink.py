"""A discarding SMTP server for bench/deliver.py, run in its own process so its CPU is not the sender's.

    python bench/sink.py PORT [CERT KEY]

With CERT and KEY (PEM files) it offers and requires STARTTLS. Prints `ready` once listening;
stops on SIGTERM and then prints `received: N`, the number of messages it accepted.
"""

from __future__ import annotations

import asyncio
import signal
import ssl
import sys
from typing import Any

from aiosmtpd.smtp import SMTP


class Sink:
    """Accepts every message, keeps nothing but their count."""

    def __init__(self) -> None:
        self.received = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.received += 1
        return "250 OK"


def main() -> None:
    port = int(sys.argv[1])
    options: dict[str, Any] = {}
    if len(sys.argv) == 4:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
        options.update(tls_context=context, require_starttls=True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    sink = Sink()
    server = loop.run_until_complete(loop.create_server(
        lambda: SMTP(sink, hostname="sink.test", loop=loop, **options), "127.0.0.1", port))
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    print("ready", flush=True)
    loop.run_forever()
    server.close()
    print(f"received: {sink.received}", flush=True)


if __name__ == "__main__":
    main()
