"""SMTP servers that misbehave on purpose, on 127.0.0.1: one that stalls at a stage, one that drips its greeting.

Plain sockets in a thread (aiosmtpd answers too well for this). Each connection is served in its
own thread; closing the server closes every connection it holds.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator


class BadServer:
    """`mode`: "drip" (the greeting a byte every `drip` seconds, for ever), "stall-<stage>" with stage
    rcpt or data (everything answered until that stage, which is never answered), or "slow-data" (the end
    of each message answered 250 after `delay` seconds, as a server scanning it does)."""

    def __init__(self, mode: str, *, drip: float = 0.3, delay: float = 0, pipelining: bool = False) -> None:
        self.mode, self.drip, self.delay = mode, drip, delay
        self.extensions = b"250-PIPELINING\r\n250 8BITMIME\r\n" if pipelining else b"250 8BITMIME\r\n"
        self.connections = 0
        self.accepted = 0  # messages answered 250 after DATA (only in slow-data mode)
        self.recipients: list[str] = []  # RCPT TO of each message accepted
        self._closing = threading.Event()
        self._socks: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]

    def serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self._closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self._socks.append(conn)
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if self.mode == "drip":
                for byte in b"220 slow.example ESMTP\r\n" * 1000:
                    if self._closing.wait(self.drip):
                        return
                    conn.sendall(bytes([byte]))
                return
            conn.sendall(b"220 bad.example ESMTP\r\n")
            reader = conn.makefile("rb")
            in_data, rcpt = False, ""
            for line in reader:
                if in_data:
                    if line == b".\r\n":
                        in_data = False
                        if self.mode == "stall-data":
                            self._closing.wait()
                            return
                        if self._closing.wait(self.delay):
                            return
                        self.accepted += 1  # taken, whether or not the client is still there to hear it
                        self.recipients.append(rcpt)
                        conn.sendall(b"250 queued\r\n")
                    continue
                verb = line[:4].upper()
                if verb == b"EHLO":
                    conn.sendall(b"250-bad.example\r\n" + self.extensions)
                elif verb == b"RCPT" and self.mode == "stall-rcpt":
                    self._closing.wait()
                    return
                elif verb == b"RCPT":
                    rcpt = line[8:].strip().strip(b"<>").decode()
                    conn.sendall(b"250 ok\r\n")
                elif verb == b"DATA":
                    in_data = True
                    conn.sendall(b"354 go ahead\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 ok\r\n")

    def close(self) -> None:
        self._closing.set()
        self.listener.close()
        for conn in self._socks:
            with contextlib.suppress(OSError):
                conn.close()


@contextlib.contextmanager
def bad_smtp(mode: str, **options: float | bool) -> Iterator[BadServer]:
    server = BadServer(mode, **options)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(timeout=5)


def elapsed(since: float) -> float:
    return time.monotonic() - since
