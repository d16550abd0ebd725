"""The `biorxiv` and `medrxiv` sources: the details API walked by cursor from a real local HTTP server serving the
responses in tests/fixtures/biorxiv (built in the API's documented format: see its README)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from digest.config import build_config
from digest.errors import ConfigError
from digest.sources import BIORXIV_JSON, detect_format, parse_file
from digest.sources.collect import collect
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.live import SourceSpec

from ..http_server import Reply, ScriptedServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HERE = FIXTURES / "biorxiv"
PAGE0, PAGE3 = (HERE / "biorxiv_page0.json").read_bytes(), (HERE / "biorxiv_page3.json").read_bytes()
MED = (HERE / "medrxiv_page0.json").read_bytes()
BAD = (HERE / "bad_records.json").read_bytes()
DEEP = (FIXTURES / "hostile" / "ingest" / "deep_10000.json").read_bytes()
DAY = date(2026, 6, 12)
RANGE = "2026-06-11/2026-06-12"  # days = 2


def fetcher() -> Fetcher:
    return Fetcher(FetchPolicy(timeout=5.0, retries=1, backoff=0), sleep=lambda _: None)


def test_a_range_is_walked_page_by_page_and_each_doi_keeps_its_latest_version(store):
    """Two pages (cursor 0, then cursor 3 as the first page's count says, until its total of 5): four papers, the
    one posted as v2 on page one and v3 on page two once, as v3, with DOI and version in its URL."""
    scripts = {f"/details/biorxiv/{RANGE}/0/json": [Reply(body=PAGE0)],
               f"/details/biorxiv/{RANGE}/3/json": [Reply(body=PAGE3)]}
    with ScriptedServer(scripts) as server:
        spec = SourceSpec("biorxiv", name="bio", url=server.base, days=2)
        report = collect(store, [spec], fetcher(), DAY)
    assert [seen.path for seen in server.requests] == list(scripts)
    assert report.outcomes[0].line() == "bio: 4 records, 4 new, 0 updated, 0 errors"
    papers = {p.url: p for p in store.all_papers()}
    assert set(papers) == {"https://www.biorxiv.org/content/10.64898/2026.07.31.741992v1",
                           "https://www.biorxiv.org/content/10.1101/2026.06.09.654321v1",
                           "https://www.biorxiv.org/content/10.1101/2026.05.30.640001v3",
                           "https://www.biorxiv.org/content/10.1101/2026.06.10.655555v1"}
    protein = papers["https://www.biorxiv.org/content/10.1101/2026.05.30.640001v3"]
    assert protein.authors == ("E. Sample", "F. Example", "I. Fixture") and protein.n_authors == 3
    assert protein.categories == ("bioinformatics",) and protein.published == date(2026, 6, 12)
    assert "52,000 measured" in protein.abstract and protein.arxiv_id is None
    assert store.last_fetch("bio").url == server.url(f"/details/biorxiv/{RANGE}/0/json")


def test_categories_keep_the_records_of_those_subjects_whatever_their_case(store):
    """`categories` are matched on each record's category, case and '_' for a space ignored: 'developmental_biology'
    keeps 'Developmental Biology', 'Neuroscience' keeps 'neuroscience'; the others are passed over, not errors."""
    scripts = {f"/details/biorxiv/{RANGE}/0/json": [Reply(body=PAGE0)],
               f"/details/biorxiv/{RANGE}/3/json": [Reply(body=PAGE3)]}
    with ScriptedServer(scripts) as server:
        spec = SourceSpec("biorxiv", url=server.base, days=2, categories=("developmental_biology", "Neuroscience"))
        outcome = collect(store, [spec], fetcher(), DAY).outcomes[0]
    assert (outcome.result, outcome.records, outcome.errors) == ("ok", 2, ())
    assert sorted(p.categories[0] for p in store.all_papers()) == ["Developmental Biology", "neuroscience"]


def test_medrxiv_links_to_medrxiv_and_an_empty_day_is_no_failure(store):
    """A medrxiv source reads its own server's path and links to medrxiv.org; 'no posts found' is an empty day."""
    scripts = {"/details/medrxiv/2026-06-12/2026-06-12/0/json": [Reply(body=MED)],
               "/details/biorxiv/2026-06-12/2026-06-12/0/json": [Reply(body=(HERE / "no_posts.json").read_bytes())]}
    with ScriptedServer(scripts) as server:
        specs = [SourceSpec("medrxiv", name="med", url=server.base), SourceSpec("biorxiv", name="bio", url=server.base)]
        report = collect(store, specs, fetcher(), DAY)
    assert [o.line() for o in report.outcomes] == ["med: 2 records, 2 new, 0 updated, 0 errors",
                                                   "bio: 0 records, 0 new, 0 updated, 0 errors"]
    assert all(p.url.startswith("https://www.medrxiv.org/content/10.1101/2026.06.1") for p in store.all_papers())


def test_bad_records_are_refused_in_one_line_each_and_the_others_go_in(store):
    """Of fifteen records, seven are refused, each in one line naming the source, its number and its DOI; the eight
    good ones are stored."""
    with ScriptedServer({"/details/biorxiv/2026-06-12/2026-06-12/0/json": [Reply(body=BAD)]}) as server:
        outcome = collect(store, [SourceSpec("biorxiv", name="bio", url=server.base)], fetcher(), DAY).outcomes[0]
    assert (outcome.result, outcome.records, outcome.new) == ("ok", 8, 8)
    assert [str(error) for error in outcome.errors] == [
        "bio: record 2 (10.1101/2026.06.01.600002): no title",
        "bio: record 3 (10.1101/2026.06.01.600003): authors is a list, not text",
        "bio: record 4 (10.1101/2026.06.01.600004): version {'number': 1} is not a version number",
        "bio: record 5 (10.1101/2026.06.01.600005): abstract holds U+0000 (NUL) at character 11: not text",
        "bio: record 6: doi 'not a doi at all' is not a DOI",
        "bio: record 7: expected an object, found a number",
        "bio: record 13 (10.1101/2026.06.01.600011): title is 600 characters long (over 500)"]
    assert all("\n" not in str(error) for error in outcome.errors)
    assert len(store.all_papers()) == 8


def test_a_malformed_page_fails_its_source_in_one_line_and_the_others_go_in(store):
    """A body that is not JSON, JSON nested 10,000 levels, one past the 20 MB limit, the API's error status, or a
    bad second page: each fails its own source in one line naming the page's URL; nothing of it is stored, and the
    medrxiv source beside them is."""
    huge = b'{"messages": [{"status": "ok"}], "collection": ["' + b"x" * 20_000_001 + b'"]}'
    one_day = "2026-06-12/2026-06-12"
    scripts = {f"/text/details/biorxiv/{one_day}/0/json": [Reply(body=b"<html>busy</html>")],
               f"/deep/details/biorxiv/{one_day}/0/json": [Reply(body=DEEP)],
               f"/huge/details/biorxiv/{one_day}/0/json": [Reply(body=huge)],
               f"/error/details/biorxiv/{one_day}/0/json": [Reply(body=b'{"messages": [{"status": "error"}]}')],
               f"/page2/details/biorxiv/{RANGE}/0/json": [Reply(body=PAGE0)],
               f"/page2/details/biorxiv/{RANGE}/3/json": [Reply(body=b"[[[")],
               f"/details/medrxiv/{one_day}/0/json": [Reply(body=MED)]}
    with ScriptedServer(scripts) as server:
        specs = [SourceSpec("biorxiv", name=name, url=server.url(f"/{name}"), days=2 if name == "page2" else 1)
                 for name in ("text", "deep", "huge", "error", "page2")]
        report = collect(store, [*specs, SourceSpec("medrxiv", name="med", url=server.base)], fetcher(), DAY)
    lines = [o.line() for o in report.outcomes]
    page = server.url(f"/{{}}/details/biorxiv/{one_day}/0/json").format
    assert lines == [
        f"text: failed: {page('text')}: invalid JSON: Expecting value (line 1, column 1); nothing from it was stored",
        f"deep: failed: {page('deep')}: invalid JSON: nested deeper than 32 levels (line 1, column 142); nothing from "
        "it was stored",
        f"huge: failed: {page('huge')}: the body is larger than 20,000,000 bytes: not a page we read",
        f"error: failed: {page('error')}: the API's status is 'error', not 'ok'; nothing from it was stored",
        f"page2: failed: {server.url(f'/page2/details/biorxiv/{RANGE}/3/json')}: invalid JSON: Expecting value "
        "(line 1, column 4); nothing from it was stored",
        "med: 2 records, 2 new, 0 updated, 0 errors"]
    assert store.count_papers() == 2 and store.last_fetch("deep").result == "failed"


def test_a_server_whose_pages_never_end_is_stopped(store, monkeypatch):
    """A total that is never reached (each page says there are more) stops after MAX_PAGES pages, failing the source
    rather than walking for ever."""
    from digest.sources import biorxiv

    monkeypatch.setattr(biorxiv, "MAX_PAGES", 3)
    endless = PAGE0.replace(b'"total": "5"', b'"total": "999999"')
    scripts = {f"/details/biorxiv/2026-06-12/2026-06-12/{n}/json": [Reply(body=endless)] for n in (0, 3, 6, 9)}
    with ScriptedServer(scripts) as server:
        outcome = collect(store, [SourceSpec("biorxiv", name="bio", url=server.base)], fetcher(), DAY).outcomes[0]
    assert outcome.result == "failed" and "over 3 pages (9 records)" in outcome.detail
    assert len(server.requests) == 3 and store.count_papers() == 0


def test_a_saved_response_is_read_as_a_file_too(tmp_path):
    """A details response saved to a file is recognised and read by `digest ingest`'s parsers."""
    path = tmp_path / "page.json"
    path.write_bytes(MED)
    assert detect_format(MED.decode()) == BIORXIV_JSON
    result = parse_file(path, seen_on=DAY)
    assert [p.url for p in result.papers] == ["https://www.medrxiv.org/content/10.1101/2026.06.10.26301234v1",
                                              "https://www.medrxiv.org/content/10.1101/2026.06.11.26301299v1"]


@pytest.mark.parametrize(("entry", "expected"), [
    ({"kind": "biorxiv", "days": 0}, "sources.days must be at least 1"),
    ({"kind": "medrxiv", "days": 40}, "sources.days must be at most 31"),
    ({"kind": "biorxiv", "query": "cancer"}, "`query` is only for `arxiv` sources"),
    ({"kind": "hf_daily", "days": 3}, "`days` is only for `biorxiv` and `medrxiv` sources"),
])
def test_bad_entries_are_rejected(tmp_path, entry, expected):
    with pytest.raises(ConfigError, match=expected):
        build_config({"sources": [entry]}, base=tmp_path)


def test_digest_fetch_and_run_read_a_biorxiv_source_end_to_end(make_config, tmp_path):
    """`digest fetch` and `digest run` (daily.fetch_job, daily.run) with a biorxiv source from the settings: its
    papers are stored, the fetch is in the run log, and the run sends every due digest."""
    from digest import daily
    from digest.app import App

    from ..conftest import SEEDS

    scripts = {f"/details/biorxiv/{RANGE}/0/json": [Reply(body=PAGE0)],
               f"/details/biorxiv/{RANGE}/3/json": [Reply(body=PAGE3)]}
    with ScriptedServer(scripts) as server:
        config = make_config(fetch={"timeout": 5, "retries": 1, "backoff": 0})
        config.sources = build_config({"sources": [{"kind": "biorxiv", "name": "bio", "url": server.base, "days": 2}]},
                                      base=tmp_path).sources
        app = App(config)
        app.ingest([SEEDS], seen_on=DAY)
        fetched = daily.fetch_job(app, DAY)
        report = daily.run(app, datetime.now(), DAY)
    assert fetched.summary() == "fetched 1 sources (0 failed): 4 records, 4 new papers, 0 record errors"
    assert report.fetched.outcomes[0].line() == "bio: 4 records, 0 new, 0 updated, 0 errors"
    assert "https://www.biorxiv.org/content/10.1101/2026.06.10.655555v1" in {p.url for p in app.store.all_papers()}
    [sent] = report.sends
    assert (sent.count("sent"), sent.count("failed")) == (4, 0) and not report.failed
    app.close()
