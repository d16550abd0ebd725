"""The `openreview` source: a venue's notes of API v2 walked by offset from a real local HTTP server serving the
responses in tests/fixtures/openreview (one real response, and pages built around its note: see its README)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from digest.config import build_config
from digest.errors import ConfigError
from digest.models import Paper
from digest.sources import OPENREVIEW_JSON, detect_format, parse_file
from digest.sources.collect import collect
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.live import SourceSpec

from ..http_server import Reply, ScriptedServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HERE = FIXTURES / "openreview"
REAL = (HERE / "regml_search_response.json").read_bytes()
OFFSET0, OFFSET3 = (HERE / "regml_offset0.json").read_bytes(), (HERE / "regml_offset3.json").read_bytes()
UNDER_REVIEW = (HERE / "iclr2026_submissions.json").read_bytes()
BAD = (HERE / "bad_notes.json").read_bytes()
DEEP = (FIXTURES / "hostile" / "ingest" / "deep_10000.json").read_bytes()
DAY = date(2026, 6, 12)
VENUE = "NeurIPS.cc/2025/Workshop/RegML"
QUERY = "content.venueid=NeurIPS.cc%2F2025%2FWorkshop%2FRegML"


def page(offset: int, prefix: str = "", query: str = QUERY) -> str:
    return f"{prefix}/notes?{query}&offset={offset}&limit=1000"


def fetcher(sleep=lambda _: None) -> Fetcher:
    return Fetcher(FetchPolicy(timeout=5.0, retries=1, backoff=0), sleep=sleep)


def test_a_venue_is_walked_page_by_page_and_each_note_is_one_paper(store):
    """Two pages (offset 0, then offset 3 as the first page's three notes say, until the count of 5): four papers,
    the note on both pages once, each linked to its forum page and dated the day it was accepted."""
    scripts = {page(0): [Reply(body=OFFSET0)], page(3): [Reply(body=OFFSET3)]}
    with ScriptedServer(scripts) as server:
        spec = SourceSpec("openreview", name="regml", url=server.base, venue=VENUE)
        report = collect(store, [spec], fetcher(), DAY)
    assert [seen.path for seen in server.requests] == list(scripts)
    assert report.outcomes[0].line() == "regml: 4 records, 4 new, 0 updated, 0 errors"
    papers = {p.url: p for p in store.all_papers()}
    assert set(papers) == {f"https://openreview.net/forum?id={i}"
                           for i in ("4aMedv0ONH", "Xq3Lm9TpWe", "Rk8VbN2cQa", "Hn4WsY7uJk")}
    real = papers["https://openreview.net/forum?id=4aMedv0ONH"]
    assert real.title == "Emergency Response Measures for Catastrophic Risk"
    assert real.authors[:2] == ("James Zhang", "Miles Kodama") and real.n_authors == 6
    assert real.keywords == ("China AI Governance", "Emergency Response", "Catastrophic AI Risks",
                             "Frontier Safety Policy")
    assert real.published == date(2025, 9, 23) and real.categories == ()  # pdate; the workshop has no area
    assert real.summary == ("Conceptualizing and recommending emergency management measures for catastrophic AI "
                            "risks in China.") and real.summary_by == "authors"  # the authors' TL;DR, as theirs
    assert real.arxiv_id is None and real.doi is None
    assert "Frontier Safety Policies (FSPs)" in real.abstract
    private = papers["https://openreview.net/forum?id=Rk8VbN2cQa"]
    assert (private.summary, private.summary_by) == (None, None)  # no TLDR: a model may summarise it
    assert "ϵ-differential privacy with ϵ = 1" in private.abstract  # LaTeX made plain text
    assert store.last_fetch("regml").url == server.url(page(0))


def test_submissions_under_review_are_read_without_authors_and_dated_when_made_public(store):
    """A venue's /Submission id reads the papers under review: their authors hidden, no acceptance date, so the day
    they became public (odate) is their date; the primary area is their category. No name: the label names the
    venue."""
    query = "content.venueid=ICLR.cc%2F2026%2FConference%2FSubmission"
    with ScriptedServer({page(0, query=query): [Reply(body=UNDER_REVIEW)]}) as server:
        spec = SourceSpec("openreview", url=server.base, venue="ICLR.cc/2026/Conference/Submission")
        outcome = collect(store, [spec], fetcher(), DAY).outcomes[0]
    assert outcome.line() == "openreview:ICLR.cc/2026/Conference/Submission: 2 records, 2 new, 0 updated, 0 errors"
    sparse = next(p for p in store.all_papers() if p.url == "https://openreview.net/forum?id=Wm2KcE5rTy")
    assert (sparse.authors, sparse.n_authors, sparse.published) == ((), None, date(2025, 10, 8))
    assert sparse.categories == ("foundation or frontier models, including LLMs",)


def test_bad_notes_are_refused_in_one_line_each_and_the_others_go_in(store):
    """Of 23 notes, 11 are refused, each in one line naming the source, its number and its id where it has one; the
    12 good ones are stored, the one whose title holds HTML as the text it is."""
    with ScriptedServer({page(0): [Reply(body=BAD)]}) as server:
        spec = SourceSpec("openreview", name="regml", url=server.base, venue=VENUE)
        outcome = collect(store, [spec], fetcher(), DAY).outcomes[0]
    assert (outcome.result, outcome.records, outcome.new) == ("ok", 12, 12)
    assert [str(error) for error in outcome.errors] == [
        "regml: record 6 (Nt1AaB2cDe): no title",
        "regml: record 8 (V1sTyLe000): content.abstract is text, not an object holding its value (API v2)",
        "regml: record 9 (NuMbEr0001): content.title is a number, not text",
        "regml: record 10: expected an object, found text",
        "regml: record 12 (AuThOrS001): content.authors is text, not a list of names",
        "regml: record 13 (PdAtE00001): pdate '2025-09-23' is not a time (milliseconds since 1970)",
        "regml: record 15 (NuL0000001): abstract holds U+0000 (NUL) at character 11: not text",
        "regml: record 16 (RePlY00001): a reply in forum Hn4WsY7uJk, not a submission",
        "regml: record 17 (NoCoNtEnT1): no content",
        "regml: record 19: id '<not an id>' is not a note id",
        "regml: record 20: expected an object, found a number"]
    assert store.count_papers() == 12
    forged = next(p for p in store.all_papers() if p.url == "https://openreview.net/forum?id=Fg5HtM0lPw")
    assert forged.title == "<script>alert('x')</script> Forged <b>Title</b> &amp; more"


def test_a_malformed_page_fails_its_source_in_one_line_and_the_others_go_in(store):
    """A body that is not JSON, not UTF-8, a list, an object whose 'notes' is not a list, the API's error object,
    JSON nested 10,000 levels, one past the 20 MB limit, a 403, or a bad second page: each fails its own source in
    one line naming the page's URL; nothing of it is stored, and the good source beside them is."""
    huge = b'{"count": 1, "notes": ["' + b"x" * 20_000_001 + b'"]}'
    challenge = b'{"name": "ForbiddenError", "message": "Too many requests: try again later", "status": 403}'
    bodies = {"text": b"<html>busy</html>", "latin1": b'{"notes": [], "title": "caf\xe9"}', "list": b"[]",
              "dict": b'{"notes": {"id": "4aMedv0ONH"}, "count": 1}', "error": challenge, "deep": DEEP,
              "huge": huge}
    scripts = {page(0, f"/{name}"): [Reply(body=body)] for name, body in bodies.items()}
    scripts[page(0, "/forbidden")] = [Reply(status=403, body=challenge)]
    scripts[page(0, "/page2")] = [Reply(body=OFFSET0)]
    scripts[page(3, "/page2")] = [Reply(body=b"[[[")]
    scripts[page(0)] = [Reply(body=OFFSET0.replace(b'"count": 5', b'"count": 3'))]
    names = [*bodies, "forbidden", "page2"]
    with ScriptedServer(scripts) as server:
        specs = [SourceSpec("openreview", name=name, url=server.url(f"/{name}"), venue=VENUE) for name in names]
        report = collect(store, [*specs, SourceSpec("openreview", name="good", url=server.base, venue=VENUE)],
                         fetcher(), DAY)
    first = server.url(page(0, "/{}")).format
    assert [o.line() for o in report.outcomes] == [
        f"text: failed: {first('text')}: invalid JSON: Expecting value (line 1, column 1); nothing from it was stored",
        f"latin1: failed: {first('latin1')}: not UTF-8 (byte 0xe9 at offset 27); nothing from it was stored",
        f"list: failed: {first('list')}: expected a notes response (an object with a 'notes' list), found a list; "
        "nothing from it was stored",
        f"dict: failed: {first('dict')}: 'notes' is an object, not a list of notes; nothing from it was stored",
        f"error: failed: {first('error')}: the API answered 'ForbiddenError': 'Too many requests: try again later'; "
        "nothing from it was stored",
        f"deep: failed: {first('deep')}: invalid JSON: nested deeper than 32 levels (line 1, column 142); nothing "
        "from it was stored",
        f"huge: failed: {first('huge')}: the body is larger than 20,000,000 bytes: not a page we read",
        f"forbidden: failed: {first('forbidden')}: HTTP 403 Forbidden",
        f"page2: failed: {server.url(page(3, '/page2'))}: invalid JSON: Expecting value (line 1, column 4); nothing "
        "from it was stored",
        "good: 3 records, 3 new, 0 updated, 0 errors"]
    assert store.count_papers() == 3 and store.last_fetch("deep").result == "failed"


def test_a_server_whose_count_is_never_reached_is_stopped(store, monkeypatch):
    """The real search response says 10,000 notes and gives one: asked for page after page, the walk stops after
    MAX_PAGES pages, failing the source rather than walking for ever, nothing stored."""
    from digest.sources import openreview

    monkeypatch.setattr(openreview, "MAX_PAGES", 3)
    scripts = {page(n): [Reply(body=REAL)] for n in range(5)}
    with ScriptedServer(scripts) as server:
        spec = SourceSpec("openreview", name="regml", url=server.base, venue=VENUE)
        outcome = collect(store, [spec], fetcher(), DAY).outcomes[0]
    assert outcome.result == "failed" and "over 3 pages (3 notes) and the API says there are more" in outcome.detail
    assert [seen.path for seen in server.requests] == [page(0), page(1), page(2)] and store.count_papers() == 0


def test_a_429_is_retried_after_the_wait_the_server_asks(store):
    """The fetch client's Retry-After: a 429 asking for 7 seconds is waited out (here, recorded) and retried; the
    page then read."""
    waits: list[float] = []
    busy = Reply(status=429, body=b"slow down", content_type="text/plain", headers={"Retry-After": "7"})
    scripts = {page(0): [busy, Reply(body=REAL.replace(b'"count": 10000', b'"count": 1'))]}
    with ScriptedServer(scripts) as server:
        spec = SourceSpec("openreview", name="regml", url=server.base, venue=VENUE)
        outcome = collect(store, [spec], fetcher(sleep=waits.append), DAY).outcomes[0]
    assert waits == [7.0] and server.hits(page(0)) == 2
    assert outcome.line() == "regml: 1 records, 1 new, 0 updated, 0 errors"
    assert store.last_fetch("regml").attempts == 2


def test_a_saved_response_is_read_as_a_file_too():
    """A notes response saved to a file is recognised and read by `digest ingest`'s parsers."""
    assert detect_format(REAL.decode()) == OPENREVIEW_JSON
    [paper] = parse_file(HERE / "regml_search_response.json", seen_on=DAY).papers
    assert (paper.url, paper.published, paper.listed_on) == ("https://openreview.net/forum?id=4aMedv0ONH",
                                                            date(2025, 9, 23), DAY)


def test_the_same_paper_from_arxiv_is_one_paper_by_title_and_first_author(store):
    """A note has neither arXiv id nor DOI, so a sighting from arXiv is the same paper when the normalised title
    and the first author's family name agree (the store's rule for every source): it gains the arXiv id. A paper
    of that title by another first author stays a paper of its own."""
    with ScriptedServer({page(0): [Reply(body=OFFSET0.replace(b'"count": 5', b'"count": 3'))]}) as server:
        collect(store, [SourceSpec("openreview", url=server.base, venue=VENUE)], fetcher(), DAY)
    title = "Auditable thresholds for model-release decisions"  # as arXiv might write it
    store.add_papers([Paper(title=title, abstract="Thresholds.", arxiv_id="2510.00001", authors=("A. Example",)),
                      Paper(title=title, abstract="Another.", arxiv_id="2510.00002", authors=("Zoe Other",))],
                     seen_on=DAY)
    merged = [p for p in store.all_papers() if p.title.lower().startswith("auditable")]
    assert sorted((p.arxiv_id, p.url) for p in merged) == [
        ("2510.00001", "https://openreview.net/forum?id=Xq3Lm9TpWe"), ("2510.00002", None)]
    assert store.count_papers() == 4


@pytest.mark.parametrize(("entry", "expected"), [
    ({"kind": "openreview"}, "an `openreview` source needs `venue`"),
    ({"kind": "openreview", "venue": "ICLR 2025"}, "`venue` must be a venue id such as ICLR.cc/2025/Conference"),
    ({"kind": "openreview", "venue": "ICLR.cc/2025/Conference", "days": 2}, "`days` is only for `biorxiv`"),
    ({"kind": "openreview", "venue": "ICLR.cc/2025/Conference", "query": "x"}, "`categories` and `query` are only"),
    ({"kind": "biorxiv", "venue": "ICLR.cc/2025/Conference"}, "`venue` is only for `openreview` sources"),
    ({"kind": "openreview", "venue": 2025}, "sources.venue must be"),
])
def test_bad_entries_are_rejected(tmp_path, entry, expected):
    with pytest.raises(ConfigError, match=expected):
        build_config({"sources": [entry]}, base=tmp_path)


def test_digest_fetch_and_run_read_an_openreview_source_end_to_end(make_config, tmp_path):
    """`digest fetch` and `digest run` (daily.fetch_job, daily.run) with an openreview source from the settings:
    its papers are stored, the fetch is in the run log, and the run sends every due digest."""
    from digest import daily
    from digest.app import App

    from ..conftest import SEEDS

    scripts = {page(0): [Reply(body=OFFSET0)], page(3): [Reply(body=OFFSET3)]}
    with ScriptedServer(scripts) as server:
        config = make_config(fetch={"timeout": 5, "retries": 1, "backoff": 0})
        config.sources = build_config({"sources": [{"kind": "openreview", "name": "regml", "url": server.base,
                                                    "venue": VENUE}]}, base=tmp_path).sources
        app = App(config)
        app.ingest([SEEDS], seen_on=DAY)
        fetched = daily.fetch_job(app, DAY)
        report = daily.run(app, datetime.now(), DAY)
    assert fetched.summary() == "fetched 1 sources (0 failed): 4 records, 4 new papers, 0 record errors"
    assert report.fetched.outcomes[0].line() == "regml: 4 records, 0 new, 0 updated, 0 errors"
    assert "https://openreview.net/forum?id=4aMedv0ONH" in {p.url for p in app.store.all_papers()}
    [sent] = report.sends
    assert (sent.count("sent"), sent.count("failed")) == (4, 0) and not report.failed
    app.close()
