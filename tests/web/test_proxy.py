"""`digest serve` behind a real nginx (Debian's nginx-light), configured the way operators copy it from the docs.

Skipped where nginx is not installed, unless DIGEST_REQUIRE_NGINX=1 (.ci/run installs it and sets that).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from digest.app import App

from ..conftest import DAY, SEEDS
from ..pg import free_port
from ..web_server import OPERATOR, Server

ADA = "ada@example.org"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

CONFIG = """daemon off;
master_process off;
pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{ }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    server {{  # the bare default: proxy_pass and nothing else (no forwarding headers, Host = the upstream's)
        listen 127.0.0.1:{plain};
        location / {{ proxy_pass http://127.0.0.1:{upstream}; }}
    }}
    server {{  # the usual one: the client's Host and address passed on
        listen 127.0.0.1:{passing};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
}}
"""


@pytest.fixture
def proxied(make_config, subscribers_dir, monkeypatch, tmp_path) -> Iterator[tuple[App, str, str]]:
    """The app under waitress, and two nginx front ends for it: (app, bare proxy URL, Host-passing proxy URL)."""
    if not os.path.exists(NGINX):
        if os.environ.get("DIGEST_REQUIRE_NGINX"):
            pytest.fail("nginx not found (install Debian's nginx-light)")
        pytest.skip("nginx not installed")
    monkeypatch.setenv("DIGEST_SECRET", "proxy-test-secret")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    app.ingest([SEEDS], seen_on=DAY)
    server = Server(app)
    folder = tmp_path / "nginx"
    folder.mkdir()
    plain, passing = free_port(), free_port()
    (folder / "nginx.conf").write_text(CONFIG.format(folder=folder, plain=plain, passing=passing,
                                                     upstream=server.server.effective_port))
    nginx = subprocess.Popen([NGINX, "-c", str(folder / "nginx.conf"), "-p", str(folder)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(f"http://127.0.0.1:{passing}/", nginx, folder)
        yield app, f"http://127.0.0.1:{plain}", f"http://127.0.0.1:{passing}"
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        server.close()
        app.close()


def _wait_for(url: str, nginx: subprocess.Popen[bytes], folder: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if nginx.poll() is not None:
            raise RuntimeError(f"nginx exited: {(folder / 'error.log').read_text(errors='replace')}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


@pytest.mark.slow
def test_operator_pages_need_the_password_through_a_bare_proxy(proxied):
    """Behind `proxy_pass` alone every request arrives from loopback with no forwarding header: still 401."""
    app, plain, _ = proxied
    assert httpx.get(f"{plain}/admin/").status_code == 401
    assert httpx.get(f"{plain}/admin/preview.html", params={"subscriber": ADA, "date": DAY.isoformat()}).status_code \
        == 401
    assert httpx.get(f"{plain}/admin/", auth=OPERATOR).status_code == 200


def test_one_click_unsubscribe_through_the_proxy(proxied):
    """A mail provider's one-click POST passes through nginx and unsubscribes."""
    app, _, passing = proxied
    url = app.links(ADA).unsubscribe.replace(app.newsletter.base_url, passing)
    response = httpx.post(url, data={"List-Unsubscribe": "One-Click"}, headers={"Host": "digest.example.org"})
    assert response.status_code == 200 and app.store.suppressed() == {ADA: "unsubscribed"}


@pytest.mark.slow
def test_a_forged_host_passed_on_by_the_proxy_is_refused(proxied):
    """With `proxy_set_header Host $host`, a request naming another host gets 400 and no redirect to it."""
    _, _, passing = proxied
    for path in ("/admin", "/admin/"):
        response = httpx.get(f"{passing}{path}", headers={"Host": "evil.example"}, auth=OPERATOR)
        assert response.status_code == 400 and "Location" not in response.headers
    redirect = httpx.get(f"{passing}/admin", headers={"Host": "digest.example.org"}, auth=OPERATOR)
    assert redirect.status_code == 308 and redirect.headers["Location"] == "/admin/"
