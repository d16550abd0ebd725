"""`digest serve`'s access log over real HTTP: one line a request in the common log format, written to a 0600 file
(or stderr), with no link token in it, wherever the request put one."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

import httpx
import pytest

from digest.app import App
from digest.tokens import FOREVER, Signer
from digest.web.access import REDACTED, redact_path, redact_query

from ..conftest import DAY, SEEDS, cli_env, sample_site
from ..web_server import OPERATOR, Server

ADA = "ada@example.org"
# host ident user [time] "request line" status bytes
CLF = re.compile(r'^(?P<host>\S+) - - \[(?P<time>\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] '
                 r'"(?P<method>[A-Z]+) (?P<target>\S+) (?P<protocol>HTTP/1\.[01])" (?P<status>\d{3}) (?P<bytes>\d+|-)$')


@pytest.fixture
def app(make_config, subscribers_dir, monkeypatch) -> Iterator[App]:
    monkeypatch.setenv("DIGEST_SECRET", "access-log-secret")
    application = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    application.ingest([SEEDS], seen_on=DAY)
    yield application
    application.close()


def tokens_of(app: App) -> dict[str, str]:
    """Every kind of token Ada's emails and pages carry (and one of the old, itsdangerous kind)."""
    today = date.today()
    links, make = app.links(ADA, today), app.signer.make
    tokens = {name: getattr(links, name).rsplit("/", 1)[1] for name in ("unsubscribe", "preferences", "feedback",
                                                                       "view")}
    return {**tokens, "feed": make("feed", ADA, FOREVER), "archive": make("archive", ADA, today),
            "legacy": app.signer.make_legacy("unsubscribe", ADA)}


def lines_of(path: Path, count: int) -> list[re.Match[str]]:
    """The log's `count` lines (waiting a little for the last: a line is written once its response went out), each
    parsed as common log format (a line that does not parse fails the test)."""
    deadline = time.monotonic() + 10
    while (not path.exists() or path.read_text().count("\n") < count) and time.monotonic() < deadline:
        time.sleep(0.02)
    text = path.read_text()
    assert text.count("\n") == count, text
    assert text.endswith("\n")
    parsed = [CLF.match(line) for line in text.splitlines()]
    assert all(parsed), [line for line, m in zip(text.splitlines(), parsed, strict=True) if not m]
    return parsed  # type: ignore[return-value]


def test_every_request_is_one_common_log_format_line_without_a_token(app, tmp_path):
    """Requests on every route that carries a token (in its path, under a prefix, in a query, as the old kind of
    token, with a newline and quotes in it), the operator pages and a 404: one line each, in order, parsing as
    common log format with the response's status and size, in a file only its owner may read; no token in it."""
    log = tmp_path / "logs" / "access.log"
    log.parent.mkdir()
    tokens = tokens_of(app)
    t = tokens
    server = Server(app, access_log=str(log))
    paper = 1  # (the first of the seed pages' papers)
    requests = [
        ("GET", f"/unsubscribe/{t['unsubscribe']}"), ("GET", f"/unsubscribe/{t['legacy']}"),
        ("GET", f"/preferences/{t['preferences']}"), ("GET", f"/preferences/{t['preferences']}/forget"),
        ("GET", f"/interests/{t['preferences']}"), ("GET", f"/library/{t['preferences']}"),
        ("GET", f"/feedback/{t['feedback']}/{paper}/more"), ("GET", f"/welcome/{t['feedback']}"),
        ("GET", f"/view/{t['view']}"), ("GET", f"/feed/{t['feed']}"), ("GET", f"/archive/{t['archive']}"),
        ("GET", f"/archive/{t['archive']}/{DAY}"), ("GET", f"/confirm/{t['preferences']}"),
        ("GET", f"/PREFERENCES/{t['preferences']}"),  # a 404, its token all the same
        ("GET", f"/digest/preferences/{t['preferences']}"),  # a prefix the server does not have
        ("GET", f"/?token={t['view']}&next=%2Fhome&k={t['feed']}"),
        ("GET", f"/nothing/{t['unsubscribe']}%0A%22x"),  # a token anywhere; a newline and a quote in the path
        ("POST", f"/preferences/{t['preferences']}"),
        ("GET", "/admin/?q=ada&state=all"),
    ]
    answers = []
    for method, target in requests:
        auth = OPERATOR if target.startswith("/admin/") else None
        data = {"do": "resume"} if method == "POST" else None
        answers.append(server.client.request(method, target, auth=auth, data=data))
    answers.append(server.client.get("/admin/"))  # no password: 401
    server.close()
    assert [a.status_code for a in answers][:3] == [200, 200, 200]
    assert answers[-1].status_code == 401 and answers[13].status_code == 404
    lines = lines_of(log, len(answers))
    text = log.read_text()
    for name, token in tokens.items():
        assert token not in text, name
        assert token[:20] not in text and token[-20:] not in text, name
    for line, answer, (method, target) in zip(lines, answers, [*requests, ("GET", "/admin/")], strict=True):
        assert line["host"] == "127.0.0.1" and line["method"] == method
        assert int(line["status"]) == answer.status_code
        assert line["bytes"] == (str(len(answer.content)) if answer.content else "-")
        logged = datetime.strptime(line["time"], "%d/%b/%Y:%H:%M:%S %z")
        assert abs(time.time() - logged.timestamp()) < 120
        assert line["target"].split("?")[0].count("/") == target.split("?")[0].count("/")
    targets = [line["target"] for line in lines]
    assert targets[0] == f"/unsubscribe/{REDACTED}" and targets[1] == f"/unsubscribe/{REDACTED}"
    assert targets[6] == f"/feedback/{REDACTED}/{paper}/more" and targets[11] == f"/archive/{REDACTED}/{DAY}"
    assert targets[14] == f"/digest/preferences/{REDACTED}"
    assert targets[15] == f"/?token={REDACTED}&next=%2Fhome&k={REDACTED}"
    assert targets[16] == f"/nothing/{REDACTED}"
    assert targets[18] == "/admin/?q=ada&state=all"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_the_setting_names_a_file_beside_the_settings_and_a_rotated_file_is_made_again(make_config, tmp_path,
                                                                                        monkeypatch):
    """`web.access_log` relative to the settings' folder; logrotate's rename: the next line goes to a new file under
    the name (0600 again), the old one keeps what it had."""
    monkeypatch.setenv("DIGEST_SECRET", "access-log-secret")
    old_umask = os.umask(0o002)  # (a loose umask: the file is 0600 all the same)
    try:
        app = App(make_config(web={"access_log": "access.log"}))
        server = Server(app)
        try:
            preferences = server.path(app.links(ADA).preferences)
            assert server.client.get(preferences).status_code in (200, 404)
            log = tmp_path / "access.log"
            lines_of(log, 1)
            log.rename(tmp_path / "access.log.1")
            server.client.get("/")
            server.client.get(preferences)
        finally:
            server.close()
            app.close()
    finally:
        os.umask(old_umask)
    assert [m["target"] for m in lines_of(log, 2)] == ["/", f"/preferences/{REDACTED}"]
    lines_of(tmp_path / "access.log.1", 1)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_redaction_of_paths_and_queries():
    """The segment after a token route (any case, any prefix), any segment or value that looks like a token, and a
    value whose name says it is a secret; nothing else."""
    token = "A" * 40
    assert redact_path(f"/news/feedback/{token}/12/more") == f"/news/feedback/{REDACTED}/12/more"
    assert redact_path("/Library/short") == f"/Library/{REDACTED}"
    assert redact_path("/admin/subscriber") == "/admin/subscriber"
    assert redact_path(f"/x/{token}.{token}") == f"/x/{REDACTED}" and redact_path(f"/x/a\n{token}") == f"/x/{REDACTED}"
    assert redact_path("/digest-newsletter-of-the-lab/subscribe") == "/digest-newsletter-of-the-lab/subscribe"
    assert redact_path("/welcome.js") == "/welcome.js" and redact_path("/library/") == "/library/"
    assert redact_query(f"a=1&token=abc&b={token}&email=ada%40example.org") == \
        f"a=1&token={REDACTED}&b={REDACTED}&email=ada%40example.org"
    assert redact_query('q="a b"') == "q=%22a%20b%22"


def test_digest_serve_access_log_option_writes_to_stderr(tmp_path):
    """`digest serve --access-log -`: the lines go to stderr, as common log format, without the token."""
    folder = sample_site(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "digest", "serve", "--port", str(port), "--access-log", "-"],
                               cwd=folder, env=cli_env(DIGEST_OPERATOR_PASSWORD="pw"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(process.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    token = Signer("test-secret").make("preferences", ADA, date.today())  # (cli_env's secret)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        httpx.get(f"http://127.0.0.1:{port}/preferences/{token}", timeout=10)
        deadline = time.monotonic() + 10
        while sum(1 for line in list(err) if CLF.match(line.rstrip("\n"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)
    logged = [CLF.match(line.rstrip("\n")) for line in err]
    assert [m["target"] for m in logged if m] == ["/", f"/preferences/{REDACTED}"]
    assert token not in "".join(err)
