"""`digest serve` under idle and slow clients: hundreds of connections that send nothing, or a header byte a
second (slow loris), leave it answering everyone else at once; a silent connection is closed after the channel
timeout; a request over the size limits is refused before it is read whole."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from digest.app import App
from digest.web import MAX_BODY_BYTES, MAX_HEADER_BYTES, create_app, make_server

from ..web_server import OPERATOR_PASSWORD

IDLE = 300  # connections that connect and send nothing
SLOW = 30  # slow-loris clients: a request's headers, a byte a second, never finished


@contextlib.contextmanager
def serving(app: App, **options: float) -> Iterator[str]:
    """`digest serve`'s server (waitress, as `make_server` sets it up) on a free port; its base URL."""
    server = make_server(create_app(app, operator_password=OPERATOR_PASSWORD), "127.0.0.1", 0, threads=2,
                         **options)
    threading.Thread(target=_run, args=(server,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.close()


def _run(server: object) -> None:
    with contextlib.suppress(OSError):  # waitress has no stop(): closing its sockets ends the loop so
        server.run()  # type: ignore[attr-defined]


def _drip(port: int, stop: threading.Event, opened: list[socket.socket]) -> None:
    with contextlib.suppress(OSError):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        opened.append(sock)
        sock.sendall(b"GET /subscribe HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        while not stop.wait(1):
            sock.sendall(b"X")  # the value of a header that never ends


@pytest.mark.slow
def test_answers_at_once_with_hundreds_of_idle_and_slow_connections_open(make_config):
    """300 idle sockets and 30 slow-loris clients open (three times waitress' default limit of 100, which let
    100 idle sockets shut everyone out): a normal GET is still answered, each within two seconds."""
    stop = threading.Event()
    opened: list[socket.socket] = []
    with serving(App(make_config())) as base:
        port = int(base.rsplit(":", 1)[1])
        try:
            opened += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(IDLE)]
            drips = [threading.Thread(target=_drip, args=(port, stop, opened), daemon=True) for _ in range(SLOW)]
            for drip in drips:
                drip.start()
            time.sleep(1.5)  # every slow client has sent its first line and dripped a byte
            times = []
            for _ in range(5):
                start = time.monotonic()
                response = httpx.get(f"{base}/subscribe", timeout=10)
                times.append(time.monotonic() - start)
                assert response.status_code == 200
            assert max(times) < 2, times
        finally:
            stop.set()
            for sock in opened:
                sock.close()


@pytest.mark.slow
def test_a_silent_connection_is_closed_after_the_channel_timeout_a_working_one_is_not(make_config):
    """With channel_timeout 1 s (CHANNEL_TIMEOUT in production): a socket that sends nothing is closed by the
    server within a few seconds; a keep-alive client that keeps asking keeps its connection."""
    with serving(App(make_config()), channel_timeout=1, cleanup_interval=0.5) as base:
        port = int(base.rsplit(":", 1)[1])
        idle = socket.create_connection(("127.0.0.1", port), timeout=10)
        start = time.monotonic()
        assert idle.recv(1) == b""  # closed by the server
        assert time.monotonic() - start < 5
        idle.close()
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        sockets = []
        for _ in range(4):  # each request 0.6 s after the last: one connection throughout
            client.request("GET", "/subscribe")
            response = client.getresponse()
            response.read()
            assert response.status == 200
            sockets.append(client.sock)
            time.sleep(0.6)
        client.close()
        assert len(set(map(id, sockets))) == 1 and sockets[0] is not None


@pytest.mark.parametrize(("kind", "status"), [("body", 413), ("header", 431)])
def test_a_request_over_the_size_limits_is_refused(make_config, kind, status):
    """A body over MAX_BODY_BYTES (64 KiB; the forms are a few hundred bytes) gets 413, headers over
    MAX_HEADER_BYTES (64 KiB) 431, and the server still answers the next request."""
    with serving(App(make_config())) as base:
        if kind == "body":
            response = httpx.post(f"{base}/subscribe", content=b"email=" + b"a" * MAX_BODY_BYTES, timeout=10,
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})
        else:
            response = httpx.get(f"{base}/subscribe", headers={"X-Big": "a" * MAX_HEADER_BYTES}, timeout=10)
        assert response.status_code == status
        assert httpx.get(f"{base}/subscribe", timeout=10).status_code == 200
