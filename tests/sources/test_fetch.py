"""Fetching live sources from a real local HTTP server that serves saved responses and misbehaves.

The arXiv feeds in tests/fixtures are built on arXiv's documented Atom (API) and RSS (listing)
structures around real papers of the arXiv sample (CC0 metadata; the author names are placeholders).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import httpx
import pytest

from digest.errors import FetchError
from digest.sources.collect import collect
from digest.sources.fetch import Fetched, Fetcher, FetchPolicy, Validators
from digest.sources.live import SourceSpec

from ..http_server import Reply, ScriptedServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
API = (FIXTURES / "hf_daily_papers_2026-06-12.json").read_bytes()
PAGE = (FIXTURES / "hf_page.html").read_bytes()
ATOM = (FIXTURES / "arxiv_api.atom").read_bytes()
RSS = (FIXTURES / "arxiv_listing.rss").read_bytes()
DAY = date(2026, 6, 12)
JSON = ("application/json",)


class Waits(list):
    """An injected sleep that records how long it was asked to wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def fetcher(waits: Waits | None = None, **policy) -> Fetcher:
    return Fetcher(FetchPolicy(**{"timeout": 2.0, "retries": 2, "backoff": 0.5, **policy}),
                   sleep=waits if waits is not None else Waits())


def test_good_response_is_returned_with_a_descriptive_user_agent():
    """A 200 with the expected content type gives its body; the request names the tool and its version."""
    with ScriptedServer({"/api": [Reply(body=API)]}) as server:
        got = fetcher().get(server.url("/api"), accept=JSON)
    assert got.body == API and got.attempts == 1 and not got.not_modified
    assert server.requests[0].headers["user-agent"].startswith("paper-digest/")


def test_429_honours_retry_after_then_succeeds():
    """A 429 with Retry-After: 3 waits three seconds and retries; the second answer is used."""
    waits = Waits()
    script = [Reply(status=429, body=b"slow down", content_type="text/plain", headers={"Retry-After": "3"}),
              Reply(body=API)]
    with ScriptedServer({"/api": script}) as server:
        got = fetcher(waits).get(server.url("/api"), accept=JSON)
    assert got.body == API and got.attempts == 2 and waits == [3.0]


def test_5xx_backs_off_exponentially_and_gives_up():
    """Persistent 500s are tried retries+1 times with doubling waits, then fail naming the status."""
    waits = Waits()
    script = {"/api": [Reply(status=500, body=b"oops", content_type="text/plain")]}
    with ScriptedServer(script) as server, pytest.raises(FetchError) as err:
        fetcher(waits).get(server.url("/api"), accept=JSON)
    assert server.hits("/api") == 3 and waits == [0.5, 1.0]
    assert "HTTP 500" in str(err.value) and "3 attempts" in str(err.value) and err.value.attempts == 3


@pytest.mark.parametrize(("value", "asked"), [("3600", "3600"), ("999999999999999999", "1000000000000000000"),
                                             ("Fri, 31 Dec 9999 23:59:59 GMT", r"\d{12}")])
def test_retry_after_beyond_max_wait_fails_without_waiting(value, asked):
    """A server asking for an hour's pause, or one until the year 9999, fails this run at once instead of blocking
    it (max_wait caps every wait)."""
    waits = Waits()
    reply = Reply(status=503, body=b"", content_type="text/plain", headers={"Retry-After": value})
    with ScriptedServer({"/api": [reply]}) as server, pytest.raises(FetchError, match=f"retry after {asked} s$"):
        fetcher(waits, max_wait=60).get(server.url("/api"), accept=JSON)
    assert waits == [] and server.hits("/api") == 1


# What a Retry-After may hold that is neither ASCII seconds nor an HTTP date: str.isdigit() is true of the first two
# and of the 5,000 digits (float() makes those infinite); the dates' year or hour does not fit a datetime.
NOT_A_WAIT = ["²", "٣", "+5", "-1", "1e3", "9" * 5000, "", "Fri, 31 Dec 99999999999999999999 23:59:59 GMT",
              "Fri, 31 Dec 2030 99999999999999999999:59:59 GMT", "Fri, 31 Dec 99999 23:59:59 GMT"]


def utf8(value: str) -> str:
    """A header value that the test server (which writes headers as Latin-1) sends as `value`'s UTF-8 bytes, as a
    server written in another language would; httpx reads them back as `value`."""
    return value.encode().decode("latin-1")


@pytest.mark.parametrize("value", NOT_A_WAIT, ids=range(len(NOT_A_WAIT)))
def test_a_retry_after_that_is_no_number_nor_date_is_ignored_and_the_backoff_used(value):
    """Such a Retry-After is no wait at all: the fetch backs off as after a 429 without one and retries."""
    waits = Waits()
    slow_down = Reply(status=429, body=b"slow down", content_type="text/plain", headers={"Retry-After": utf8(value)})
    with ScriptedServer({"/api": [slow_down, Reply(body=API)], "/said": [slow_down]}) as server:
        assert httpx.get(server.url("/said")).headers["Retry-After"] == value  # what the fetch is told
        got = fetcher(waits).get(server.url("/api"), accept=JSON)
    assert got.body == API and got.attempts == 2 and waits == [0.5] and server.hits("/api") == 2


def test_a_redirect_loop_or_a_body_that_does_not_decode_fails_at_once_in_one_line():
    """Redirects without end, and a body sent as gzip that is not, are FetchErrors naming the URL (they escaped as
    httpx's own errors and stopped the run), not retried."""
    script = {"/loop": [Reply(status=302, content_type="text/plain", headers={"Location": "/loop"})],
              "/gzip": [Reply(body=b"[] but not gzip", headers={"Content-Encoding": "gzip"})]}
    with ScriptedServer(script) as server:
        with pytest.raises(FetchError) as loop:
            fetcher().get(server.url("/loop"), accept=JSON)
        with pytest.raises(FetchError) as gzip:
            fetcher().get(server.url("/gzip"), accept=JSON)
    assert str(loop.value) == f"{server.url('/loop')}: TooManyRedirects: Exceeded maximum allowed redirects."
    assert str(gzip.value) == (f"{server.url('/gzip')}: the body cannot be decoded as its Content-Encoding says: "
                               "Error -3 while decompressing data: incorrect header check")
    assert server.hits("/gzip") == 1 and server.hits("/loop") == 21  # the first request and httpx's 20 redirects


def test_slow_server_times_out_and_is_retried():
    """An answer slower than the timeout counts as a failed attempt; a prompt one after it succeeds."""
    with ScriptedServer({"/api": [Reply(body=API, delay=1.0), Reply(body=API)]}) as server:
        got = fetcher(timeout=0.3).get(server.url("/api"), accept=JSON)
    assert got.attempts == 2 and got.body == API


def test_truncated_body_is_retried_not_parsed():
    """A body cut short of its Content-Length is a failed attempt, never half a page handed on."""
    with ScriptedServer({"/api": [Reply(body=API, truncate=True), Reply(body=API)]}) as server:
        got = fetcher().get(server.url("/api"), accept=JSON)
    assert got.attempts == 2 and got.body == API


def test_wrong_content_type_fails_at_once():
    """An HTML error page where JSON was expected fails on the first attempt, saying what came back."""
    script = {"/api": [Reply(body=b"<html>login</html>", content_type="text/html")]}
    with ScriptedServer(script) as server, pytest.raises(FetchError, match="expected application/json, got text/html"):
        fetcher().get(server.url("/api"), accept=JSON)
    assert server.hits("/api") == 1


def test_404_is_not_retried():
    """A 4xx other than 408/425/429 is permanent: one request, a clear error."""
    with ScriptedServer({}) as server, pytest.raises(FetchError, match="HTTP 404"):
        fetcher().get(server.url("/missing"), accept=JSON)
    assert server.hits("/missing") == 1


def test_conditional_request_gets_not_modified():
    """With the ETag of the last fetch the request is conditional and a 304 returns no body."""
    with ScriptedServer({"/api": [Reply(body=API, etag='"v1"')]}) as server:
        f = fetcher()
        first = f.get(server.url("/api"), accept=JSON)
        second = f.get(server.url("/api"), accept=JSON, have=first.validators)
    assert first.validators == Validators('"v1"', None)
    assert second.not_modified and second.body == b""
    assert server.requests[1].headers["if-none-match"] == '"v1"'


def test_a_failing_source_does_not_stop_the_others(store):
    """Of four sources one answers 500 forever: the other three are stored and the failure is recorded."""
    scripts = {"/api": [Reply(body=API)], "/page": [Reply(body=PAGE, content_type="text/html; charset=utf-8")],
               "/atom": [Reply(body=ATOM, content_type="application/atom+xml")],
               "/down": [Reply(status=500, body=b"", content_type="text/plain")]}
    with ScriptedServer(scripts) as server:
        specs = [SourceSpec("hf_daily", name="api", url=server.url("/api?date={date}")),
                 SourceSpec("hf_page", name="page", url=server.url("/page")),
                 SourceSpec("arxiv", name="down", url=server.url("/down")),
                 SourceSpec("arxiv", name="atom", url=server.url("/atom"))]
        report = collect(store, specs, fetcher(), DAY)
    results = {o.label: o.result for o in report.outcomes}
    assert results == {"api": "ok", "page": "ok", "down": "failed", "atom": "ok"}
    assert server.requests[0].path == "/api?date=2026-06-12"
    assert store.count_papers() == sum(o.new for o in report.outcomes) > 30
    down = store.last_fetch("down")
    assert down.result == "failed" and "HTTP 500" in down.detail and down.attempts == 3
    assert "1 failed" in report.summary()


class Buggy(Fetcher):
    """A fetcher with a bug on one URL: an error nobody wrote an `except` for."""

    def get(self, url: str, **kwargs) -> Fetched:
        if url.endswith("/bug"):
            raise KeyError("a bug\non two lines")
        return super().get(url, **kwargs)


def test_whatever_fails_in_a_source_fails_that_source_alone_in_one_line(store):
    """Each of these stopped the whole fetch (and the run, and every send) with a traceback: a Retry-After date whose
    year does not fit a datetime, redirects without end, a body its Content-Encoding does not decode, a `file`
    source whose path holds a NUL (TOML lets one in as \\u0000), and any error nobody foresaw. Each is now its
    source's failure (the file: an error of its source), in one line naming it and the URL or path; the sources
    around them are stored."""
    overflow = "Fri, 31 Dec 99999999999999999999 23:59:59 GMT"
    scripts = {"/api": [Reply(body=API)], "/atom": [Reply(body=ATOM, content_type="application/atom+xml")],
               "/overflow": [Reply(status=429, content_type="text/plain", headers={"Retry-After": overflow})],
               "/loop": [Reply(status=302, content_type="text/plain", headers={"Location": "/loop"})],
               "/gzip": [Reply(body=b"not gzip", headers={"Content-Encoding": "gzip"})],
               "/bug": [Reply(body=API)]}
    with ScriptedServer(scripts) as server:
        specs = [SourceSpec("hf_daily", name="api", url=server.url("/api")),
                 SourceSpec("hf_daily", name="overflow", url=server.url("/overflow")),
                 SourceSpec("hf_daily", name="loop", url=server.url("/loop")),
                 SourceSpec("hf_daily", name="gzip", url=server.url("/gzip")),
                 SourceSpec("file", name="nul", path="seeds\0.txt"),
                 SourceSpec("hf_daily", name="bug", url=server.url("/bug")),
                 SourceSpec("arxiv", name="atom", url=server.url("/atom"))]
        buggy = Buggy(FetchPolicy(timeout=2.0, retries=1, backoff=0), sleep=Waits())
        report = collect(store, specs, buggy, DAY)
        buggy.close()
    assert [o.line() for o in report.outcomes[1:-1]] == [
        f"overflow: failed: {server.url('/overflow')}: HTTP 429 Too Many Requests (gave up after 2 attempts)",
        f"loop: failed: {server.url('/loop')}: TooManyRedirects: Exceeded maximum allowed redirects.",
        f"gzip: failed: {server.url('/gzip')}: the body cannot be decoded as its Content-Encoding says: Error -3 while "
        "decompressing data: incorrect header check",
        "nul: 0 records, 0 new, 0 updated, 1 errors",  # a file a `file` source cannot read is an error of it
        f"bug: failed: {server.url('/bug')}: an unexpected error (KeyError: 'a bug\\non two lines'); nothing from it "
        "was stored (--debug shows where)"]
    assert [str(e) for e in report.outcomes[4].errors] == ["seeds\0.txt: cannot read: embedded null byte"]
    assert [(o.label, o.result) for o in report.outcomes[::6]] == [("api", "ok"), ("atom", "ok")]
    assert store.count_papers() == report.outcomes[0].new + report.outcomes[-1].new > 30
    assert store.last_fetch("bug").result == "failed" and "KeyError" in store.last_fetch("bug").detail
    assert "(4 failed)" in report.summary()


def test_second_run_is_conditional_and_reports_not_modified(store):
    """A source that sent an ETag is asked conditionally next time; a 304 adds nothing and is reported."""
    with ScriptedServer({"/rss": [Reply(body=RSS, content_type="application/rss+xml", etag='"r1"')]}) as server:
        spec = SourceSpec("arxiv", name="rss", url=server.url("/rss"))
        first = collect(store, [spec], fetcher(), DAY).outcomes[0]
        second = collect(store, [spec], fetcher(), DAY).outcomes[0]
    assert (first.result, first.new) == ("ok", 4)
    assert second.result == "not-modified" and "not modified" in second.line()
    assert store.last_fetch("rss").etag == '"r1"'


def test_feeds_give_ids_categories_and_authors(store):
    """Papers from the Atom API feed and the RSS listing carry arXiv ids, primary category first, and authors."""
    scripts = {"/atom": [Reply(body=ATOM, content_type="application/atom+xml")],
               "/rss": [Reply(body=RSS, content_type="application/rss+xml")]}
    with ScriptedServer(scripts) as server:
        collect(store, [SourceSpec("arxiv", url=server.url("/atom")), SourceSpec("arxiv", url=server.url("/rss"))],
                fetcher(), DAY)
    papers = {p.arxiv_id: p for p in store.all_papers()}
    assert len(papers) == 6  # two papers are in both feeds and merge into one each
    assert papers["2606.12451"].categories[0] == "cs.AI" and papers["2606.12451"].authors == ("Ana Example",
                                                                                                "Ben Example")
    assert papers["2606.12599"].authors == ("Dana Fixture", "Eli Fixture", "Fay Fixture")
    assert not papers["2606.12599"].abstract.startswith("arXiv:")


def test_file_source_reads_a_folder_and_reports_missing_files(store, tmp_path):
    """A `file` source reads every file of a folder, whatever its format (the sample's five page texts and its Daily
    Papers API day: 284 + 30 records, 197 + 30 papers); one that matches nothing is a failed source."""
    seeds = Path(__file__).resolve().parents[2] / "seeds"
    report = collect(store, [SourceSpec("file", path=str(seeds)), SourceSpec("file", path=str(tmp_path / "*.json"))],
                     fetcher(), DAY)
    ok, missing = report.outcomes
    assert (ok.result, ok.records, ok.new) == ("ok", 284 + 30, 197 + 30)
    assert missing.result == "failed" and "no files match" in missing.detail


def test_a_fetch_analyses_its_new_papers_as_an_ingest_does(tmp_path):
    """`fetch` (and `run` with sources) embeds the papers it brought in, so the sends only read them."""
    from digest.app import App
    from digest.config import build_config
    from digest.daily import fetch
    from digest.select.dense import MODEL_NAME

    with ScriptedServer({"/rss": [Reply(body=RSS, content_type="application/rss+xml")]}) as server:
        raw = {"store": {"url": "sqlite:///digest.db"}, "sources": [{"kind": "arxiv", "url": server.url("/rss")}]}
        app = App(build_config(raw, base=tmp_path))
        fetch(app, DAY)
    keys = [p.key for p in app.store.candidates(DAY, app.config.select.window_days)]
    assert len(keys) == 4 and set(app.store.embeddings(keys, MODEL_NAME)) == set(keys)
    app.close()
