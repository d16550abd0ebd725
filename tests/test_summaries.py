"""TL;DRs made by a model (`[summaries]`) against a real OpenAI-compatible chat-completions server on 127.0.0.1:
answering well, slowly, with errors, malformed or hostile; the daily budget; the key; nothing without the setting."""

from __future__ import annotations

import email
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email import policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from digest import daily, summaries
from digest.app import App

from .conftest import DAY, SEEDS


@dataclass
class Answer:
    """One reply of the chat server: a status, a body (the protocol's JSON of `content` unless `raw`), a delay."""

    content: str | None = "A summary."
    status: int = 200
    raw: bytes | None = None
    delay: float = 0.0


@dataclass
class Asked:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ChatServer:
    """POST /v1/chat/completions as OpenAI-compatible servers answer it ({model, messages} → {choices: [{message:
    {content}}]}), each answer made by `answer(request body)`."""

    def __init__(self, answer: Callable[[dict[str, Any]], Answer]) -> None:
        self.answer, self.asked = answer, []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with server._lock:
                    server.asked.append(Asked(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path != "/v1/chat/completions" or not body.get("model") or not body.get("messages"):
                    reply = Answer(status=404, raw=b'{"error": "not found"}')
                else:
                    reply = server.answer(body)
                time.sleep(reply.delay)
                data = reply.raw if reply.raw is not None else json.dumps(
                    {"id": "x", "object": "chat.completion", "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                                  "finish_reason": "stop"}]}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up waiting
                    pass

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def title_of(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    return user.split("\n", 1)[0].removeprefix("Title: ")


def numbered(body: dict[str, Any]) -> Answer:
    return Answer(f"Model TL;DR of {title_of(body)[:40]} & more.")


@pytest.fixture
def make_app(make_config):
    apps = []

    def make(store: dict[str, str] | None = None, **settings: Any) -> App:
        sections: dict[str, dict[str, Any]] = {"store": store} if store else {}
        app = App(make_config(summaries=settings, **sections) if settings else make_config(**sections))
        app.ingest([SEEDS], seen_on=DAY)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


def wanted(app: App) -> list:
    """The day's pool's papers without a summary of their source's."""
    return [p for p in app.store.candidates(DAY, app.config.select.window_days) if not p.summary]


def parts(app: App) -> list[tuple[email.message.EmailMessage, str, str]]:
    out = []
    for path in sorted(Path(app.config.delivery.outbox).rglob("*.eml")):
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        html = message.get_body(("html",)).get_content()
        text = message.get_body(("plain",)).get_content()
        out.append((message, html, text))
    return out


@pytest.mark.slow  # a digest composed for every paper's reader
def test_summaries_are_made_once_kept_and_shown_in_both_parts_escaped(make_app):
    """A run asks the endpoint once per pool paper without a summary (its source's `ai_summary` is used instead),
    keeps each answer in the store, and every digest shows the kept ones as the TL;DR in place of the sentence
    quoted from the abstract, `&` escaped in the HTML; the next run asks nothing more."""
    with ChatServer(numbered) as server:
        app = make_app(endpoint=server.endpoint, model="tiny-llm", daily_budget=1000)
        report = daily.run(app, datetime.now(), DAY)
        first = len(server.asked)
        daily.run(app, datetime.now(), DAY)  # everything sent already, nothing left to summarise
        again = len(server.asked) - first
    papers = wanted(app)
    assert 0 < first == len(papers) and again == 0
    assert {title_of(a.body) for a in server.asked} == {" ".join(p.title.split()) for p in papers}
    assert all(a.body["model"] == "tiny-llm" and a.path == "/v1/chat/completions" for a in server.asked)
    assert report.summaries is not None and report.summaries.line() == f"summaries: {first} made"
    assert f"summaries: {first} made" in report.lines() and not report.failed
    kept = summaries.kept(app.store, papers)
    assert set(kept) == {p.store_id for p in papers}
    shown = 0
    mails = parts(app)
    assert mails
    for message, html, text in mails:
        for paper in papers:
            made = kept[paper.store_id]
            if made.replace("&", "&amp;") in html:
                shown += 1
                assert made not in html  # the bare `&` never reaches the HTML
                assert "TL;DR (AI summary): " + made in " ".join(text.split())
        assert made not in str(message["Subject"])
    assert shown > 0


def test_a_slow_endpoint_times_out_the_step_and_the_digests_go_with_the_quoted_sentences(make_app):
    """An endpoint slower than `timeout` ends the step after one request, one line in the report; the run is not
    failed, every due digest is sent at once with the sentences quoted from the abstracts."""
    with ChatServer(lambda body: Answer("Too late.", delay=3)) as server:
        app = make_app(endpoint=server.endpoint, model="m", timeout=0.3)
        started = time.monotonic()
        report = daily.run(app, datetime.now(), DAY)
        asked = len(server.asked)
    assert asked == 1
    assert report.summaries is not None and "failed:" in report.summaries.line()
    assert "timed out" in report.summaries.failure and report.summaries.made == 0
    assert report.summaries.line() in report.lines() and not report.failed
    [sent] = report.sends
    assert sent.count("sent") == 4
    assert summaries.kept(app.store, wanted(app)) == {}
    assert all("Too late." not in html and "From the abstract" in text for _, html, text in parts(app))
    assert time.monotonic() - started < 60


def test_the_step_stops_at_its_deadline(make_app):
    """Answers that come one at a time, each in time, stop being asked for once `deadline` has passed."""
    with ChatServer(lambda body: Answer("Fine.", delay=0.4)) as server:
        app = make_app(endpoint=server.endpoint, model="m", deadline=1, daily_budget=1000)
        started = time.monotonic()
        report = daily.enrich(app, DAY)[1]
        took = time.monotonic() - started
    assert report is not None and "deadline (1 s) passed" in report.failure
    assert 1 <= len(server.asked) <= 4 and report.made == len(server.asked) - ("mid-answer" in report.failure)
    assert took < 3


@pytest.mark.parametrize("answer, why", [
    (Answer(status=500, raw=b'{"error": "boom"}'), "HTTP 500 Internal Server Error"),
    (Answer(status=503, raw=b"overloaded"), "HTTP 503 Service Unavailable"),
    (Answer(status=429, raw=b'{"error": "rate limited"}'), "HTTP 429 Too Many Requests"),
    (Answer(status=401, raw=b'{"error": "bad key"}'), "HTTP 401 Unauthorized"),
    (Answer(raw=b"{not json"), "not a chat-completions answer (JSONDecodeError)"),
    (Answer(raw=b'{"choices": []}'), "not a chat-completions answer (IndexError)"),
    (Answer(raw=b'{"object": "error"}'), "not a chat-completions answer (KeyError)"),
    (Answer(content=None), "not a chat-completions answer (content is not text)"),
    (Answer(raw=b'{"choices": [{"message": {"content": "' + b"x" * 300_000 + b'"}}]}'),
     "the answer is larger than 100,000 bytes"),
])
def test_an_endpoint_failing_ends_the_step_in_one_line_and_nothing_is_kept(make_app, answer, why):
    """A 5xx, 429, 401, a body that is not the protocol's JSON, or one too large: one request, the step ends with
    one line saying why, nothing kept, and the run sends its digests."""
    with ChatServer(lambda body: answer) as server:
        app = make_app(endpoint=server.endpoint, model="m")
        report = daily.run(app, datetime.now(), DAY)
        asked = len(server.asked)
    assert asked == 1
    assert report.summaries is not None
    assert report.summaries.line() == (f"summaries: 0 made, {len(wanted(app))} papers keep the sentence from the "
                                       f"abstract; failed: {server.endpoint}/chat/completions: {why}")
    assert not report.failed and report.sends[0].count("sent") == 4
    assert summaries.kept(app.store, wanted(app)) == {}


@pytest.mark.slow
@pytest.mark.parametrize("content, why", [
    ("<script>alert(1)</script>", "markup"),
    ("Great paper <img src=x onerror=alert(1)>", "markup"),
    ("Uses &lt;b&gt; tags", "markup"),
    ("", "empty"),
    (" \n\t\x00\x1b ", "empty"),
])
def test_hostile_or_empty_answers_are_refused_one_by_one(make_app, content, why):
    """An answer holding markup, or nothing, is refused for its paper alone: every paper is asked about, none is
    kept, the report counts them, the digests keep the quoted sentences."""
    with ChatServer(lambda body: Answer(content)) as server:
        app = make_app(endpoint=server.endpoint, model="m", daily_budget=1000)
        report = daily.enrich(app, DAY)[1]
    papers = wanted(app)
    assert len(server.asked) == len(papers)
    assert report is not None and report.refused == len(papers) and report.made == 0 and not report.failure
    assert report.line() == (f"summaries: 0 made, {len(papers)} answers refused ({why}), {len(papers)} papers keep "
                             f"the sentence from the abstract")
    assert summaries.kept(app.store, papers) == {}


@pytest.mark.slow  # a digest composed for every paper's reader
def test_control_characters_and_header_injection_are_flattened_and_long_answers_cut(make_app):
    """Control characters (CR LF, NUL, ESC, U+2028) become spaces, so a "Bcc:" written by the model is words in the
    body, never a header; an answer past `max_chars` is cut at a word boundary."""
    hostile = "Fast KV caches.\r\nBcc: victim@example.org\r\nSubject: pwned\x00\x1b[31m\u2028done"

    def answer(body: dict[str, Any]) -> Answer:
        return Answer(hostile if "KV" in body["messages"][-1]["content"] else "word " * 2000)

    with ChatServer(answer) as server:
        app = make_app(endpoint=server.endpoint, model="m", daily_budget=1000, max_chars=120)
        report = daily.run(app, datetime.now(), DAY)
    kept = summaries.kept(app.store, wanted(app))
    assert report.summaries is not None and report.summaries.made == len(kept) == len(wanted(app))
    assert "Fast KV caches. Bcc: victim@example.org Subject: pwned [31m done" in kept.values()
    long = [text for text in kept.values() if text.startswith("word")]
    assert long and all(len(text) <= 120 and text.endswith("…") for text in long)
    for message, html, text in parts(app):
        assert message["Bcc"] is None and "pwned" not in str(message["Subject"])
        assert "\x1b" not in html + text and "\x00" not in html + text
        assert "\nBcc:" not in text.replace("\r\n", "\n")


@pytest.mark.slow  # a digest composed for every paper's reader
def test_the_daily_budget_bounds_the_requests_and_runs_of_a_day_share_it(make_app):
    """With N + 1 papers to summarise and a budget of N, N requests are made; a second run the same day asks
    nothing (the budget is spent), and the report says how many papers keep their quoted sentence."""
    with ChatServer(numbered) as server:
        probe = make_app()
        n = len(wanted(probe)) - 1
        app = make_app(endpoint=server.endpoint, model="m", daily_budget=n)
        report = daily.enrich(app, DAY)[1]
        first = len(server.asked)
        second = daily.enrich(app, DAY)[1]
        total = len(server.asked)
    assert first == n == total
    assert report is not None and report.made == n and report.left == 1
    assert report.line() == f"summaries: {n} made, 1 papers keep the sentence from the abstract"
    assert second is not None and second.made == 0 and second.left == 1
    newest = max(wanted(app), key=lambda p: (p.listed_on or p.published or DAY, p.upvotes or 0, p.store_id))
    assert newest.store_id in summaries.kept(app.store, wanted(app))


def test_the_key_goes_as_a_bearer_token_from_the_variable_named(make_app, monkeypatch):
    """The key is read from the variable `key_env` names and sent as `Authorization: Bearer`; it appears in no
    line of the report. Without the variable, no Authorization header."""
    monkeypatch.setenv("TEST_SUMMARY_KEY", "sk-local-123")
    with ChatServer(numbered) as server:
        app = make_app(endpoint=server.endpoint, model="m", key_env="TEST_SUMMARY_KEY", daily_budget=2)
        report = daily.run(app, datetime.now(), DAY)
        keyed = [a.headers.get("authorization") for a in server.asked]
        monkeypatch.delenv("TEST_SUMMARY_KEY")
        other = make_app(endpoint=server.endpoint, model="m", key_env="TEST_SUMMARY_KEY", daily_budget=1,
                         store={"url": "sqlite:///other.db"})
        daily.enrich(other, DAY)[1]
        bare = server.asked[len(keyed):]
    assert keyed == ["Bearer sk-local-123"] * 2
    assert "sk-local-123" not in "\n".join(report.lines())
    assert len(bare) == 1 and "authorization" not in bare[0].headers


def test_a_key_is_never_sent_over_plain_http_to_another_machine(make_app, monkeypatch):
    """A key with an http endpoint that is not this machine: no request, one line saying why."""
    monkeypatch.setenv("DIGEST_SUMMARIES_KEY", "sk-secret")
    app = make_app(endpoint="http://summaries.invalid/v1", model="m")
    report = daily.enrich(app, DAY)[1]
    assert report is not None and report.failure == ("the API key in $DIGEST_SUMMARIES_KEY is sent over https "
                                                     "only (or over http to this machine)")
    assert "sk-secret" not in report.line()


def test_without_the_setting_nothing_is_asked_and_kept_summaries_go(make_app):
    """No `[summaries]`: no request, no line in the report, the quoted sentences; a summary kept from when it was
    set is deleted by the run and no longer shown."""
    with ChatServer(numbered) as server:
        app = make_app()
        paper = wanted(app)[0]
        app.store.put_cache(f"{summaries.PREFIX}{paper.store_id}", b"Kept from before.")
        report = daily.run(app, datetime.now(), DAY)
    assert server.asked == [] and report.summaries is None
    assert not any(line.startswith("summaries") for line in report.lines())
    assert summaries.kept(app.store, [paper]) == {}
    assert all("Kept from before." not in html for _, html, _ in parts(app))


def test_the_feed_shows_a_kept_summary_escaped_and_the_sources_own_first():
    """A reader's feed entry carries the model's summary as its TL;DR where the source gave none, escaped by the XML
    serialiser; the source's own summary comes first."""
    import uuid
    from xml.etree import ElementTree as ET

    from digest.models import Paper
    from digest.web.feeds import ATOM, atom

    plain = Paper(title="Plain", abstract="An abstract.", store_id=1)
    own = Paper(title="Own", abstract="An abstract.", summary="The source's.", store_id=2)
    body = atom([(DAY, plain), (DAY, own)], feed_id=uuid.uuid4(), updated=DAY, title="t", author="a",
                self_url="https://digest.example.org/feed/x", made={1: "Faster <kernels> & more.", 2: "Not shown."})
    assert b"Faster &lt;kernels&gt; &amp; more." in body and b"Not shown." not in body
    texts = [e.text for e in ET.fromstring(body).iter(f"{{{ATOM}}}summary")]
    assert texts[0].startswith("TL;DR (AI summary): Faster <kernels> & more.\n\nAn abstract.")
    assert texts[1].startswith("TL;DR (AI summary): The source's.")
