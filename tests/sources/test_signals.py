"""Trend signals: GitHub stars and OpenAlex citation counts asked of a real local HTTP server serving answers in the
services' documented formats (tests/fixtures/signals), written into the papers, once a day, within budgets; a
failing service is one line and changes nothing."""

from __future__ import annotations

import email
import email.policy
import json
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from digest.models import Paper
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.signals import OPENALEX_BATCH, SignalPolicy, refresh, repository, work_doi

from ..http_server import Reply, ScriptedServer

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "signals"
REPO = json.loads((HERE / "github_repo.json").read_bytes())
WORKS = (HERE / "openalex_works.json").read_bytes()
DEEP = (Path(__file__).resolve().parents[1] / "fixtures" / "hostile" / "ingest" / "deep_10000.json").read_bytes()
DAY = date(2026, 6, 12)


def fetcher(max_wait: float = 120.0) -> Fetcher:
    return Fetcher(FetchPolicy(timeout=5.0, retries=1, backoff=0, max_wait=max_wait), sleep=lambda _: None)


def repo_body(full_name: str, stars: int | object) -> bytes:
    return json.dumps(REPO | {"full_name": full_name, "stargazers_count": stars}).encode()


def stored(store, *papers: Paper) -> dict[str, Paper]:
    store.add_papers(papers, seen_on=DAY)
    return {p.title: p for p in store.all_papers()}


MSA = Paper("MiniMax Sparse Attention", "Sparse attention.", arxiv_id="2606.13392",
            github_url="https://github.com/MiniMax-AI/MSA", stars=200, upvotes=103)
FEED = Paper("A feed paper with code", "We propose X. Code: https://github.com/Some-Lab/x-net.git.",
             arxiv_id="2606.00467")
BARE = Paper("A paper with no code", "Nothing to see.", arxiv_id="2606.12730")


def test_repositories_are_read_from_the_source_link_or_the_abstract_and_nothing_else():
    """The source's link first, else the first github.com link of the abstract (".git" and a full stop cut); pages
    of GitHub that are not repositories, and names that would leave the API's path, are not repositories."""
    assert repository(MSA) == "minimax-ai/msa"
    assert repository(FEED) == "some-lab/x-net"
    assert repository(BARE) is None
    for text in ("see github.com/orgs/foo and github.com/sponsors/bar", "github.com/../../etc/passwd",
                 "github.com/-bad/x", "https://github.com/a/.."):
        assert repository(Paper("t", text)) is None, text
    assert repository(Paper("t", "at github.com/a/b%2F..%2Fc")) == "a/b"  # the name stops at what it may hold


def test_a_paper_is_asked_of_openalex_by_its_doi_or_arxivs():
    assert work_doi(Paper("t", "a", arxiv_id="2606.13392")) == "10.48550/arxiv.2606.13392"
    assert work_doi(Paper("t", "a", doi="10.1101/2026.06.09.654321")) == "10.1101/2026.06.09.654321"
    assert work_doi(Paper("t", "a")) is None


def test_github_stars_are_written_into_the_papers_once_a_day_with_the_token(store, monkeypatch):
    """Two repositories asked (one request each, the token as a Bearer header); the counts replace the source's
    (200 → 251) and fill the feed paper's; a second run the same day asks nothing; the next day asks again."""
    monkeypatch.setenv("TEST_GH_TOKEN", "ghp_test")
    papers = stored(store, MSA, FEED, BARE)
    scripts = {"/repos/minimax-ai/msa": [Reply(body=repo_body("MiniMax-AI/MSA", 251))],
               "/repos/some-lab/x-net": [Reply(body=repo_body("Some-Lab/x-net", 12))]}
    with ScriptedServer(scripts) as server:
        policy = SignalPolicy(github=True, github_api=server.base, github_token_env="TEST_GH_TOKEN")
        report = refresh(store, policy, list(papers.values()), fetcher(), DAY)
        again = refresh(store, policy, store.all_papers(), fetcher(), DAY)
        assert len(server.requests) == 2
        assert {s.headers["authorization"] for s in server.requests} == {"Bearer ghp_test"}
        tomorrow = refresh(store, policy, store.all_papers(), fetcher(), DAY + timedelta(days=1))
        assert len(server.requests) == 4
    after = {p.title: p for p in store.all_papers()}
    assert after[MSA.title].stars == 251 and after[FEED.title].stars == 12 and after[BARE.title].stars is None
    assert (report.requests, report.stars, report.changed, report.problems) == (2, 2, 2, [])
    assert report.line() == "signals: 2 requests, 2 repositories' stars, 0 citation counts, 2 papers changed"
    assert (again.requests, again.stars, again.changed) == (0, 2, 0)
    assert tomorrow.requests == 2


def test_without_a_token_no_authorization_is_sent_and_the_budget_leaves_the_rest_for_tomorrow(store, monkeypatch):
    """github_budget 1: the newest paper's repository is asked, the other left (counted); a later run the same day
    has no budget left and asks nothing."""
    monkeypatch.delenv("TEST_GH_TOKEN", raising=False)
    papers = stored(store, MSA, FEED)
    scripts = {"/repos/minimax-ai/msa": [Reply(body=repo_body("MiniMax-AI/MSA", 251))],
               "/repos/some-lab/x-net": [Reply(body=repo_body("Some-Lab/x-net", 12))]}
    with ScriptedServer(scripts) as server:
        policy = SignalPolicy(github=True, github_api=server.base, github_token_env="TEST_GH_TOKEN", github_budget=1)
        first = refresh(store, policy, list(papers.values()), fetcher(), DAY)
        second = refresh(store, policy, store.all_papers(), fetcher(), DAY)
    assert [s.path for s in server.requests] == ["/repos/some-lab/x-net"]  # stored second: the newer paper
    assert "authorization" not in server.requests[0].headers
    assert (first.requests, first.left, second.requests, second.left) == (1, 1, 0, 1)
    assert "1 left for a later run" in first.line()


def test_openalex_counts_come_in_batches_by_doi_and_unknown_works_change_nothing(store):
    """120 papers: three requests (50, 50, 20 DOIs, with the mailto); the three works OpenAlex knows get their
    counts (0 included), the others stay None and are counted as not known."""
    many = [Paper(f"Paper {n}", "Text.", arxiv_id=f"2606.{10000 + n}") for n in range(117)]
    known = [Paper("Known A", "a", arxiv_id="2606.00467"), Paper("Known B", "b", arxiv_id="2606.12730"),
             Paper("Known C", "c", arxiv_id="2606.13594")]
    papers = stored(store, *known, *many)
    with ScriptedServer({"/works": [Reply(body=WORKS)]}) as server:
        policy = SignalPolicy(citations="openalex", openalex_api=server.base, mailto="ops@example.org")
        report = refresh(store, policy, list(papers.values()), fetcher(), DAY)
    asked = [parse_qs(urlsplit(s.path).query) for s in server.requests]
    sizes = [len(q["filter"][0].removeprefix("doi:").split("|")) for q in asked]
    assert sorted(sizes, reverse=True) == [OPENALEX_BATCH, OPENALEX_BATCH, 20]
    assert all(q["mailto"] == ["ops@example.org"] and q["select"] == ["doi,cited_by_count"] for q in asked)
    every = {d for q in asked for d in q["filter"][0].removeprefix("doi:").split("|")}
    assert "10.48550/arxiv.2606.00467" in every and len(every) == 120
    after = {p.title: p.citations for p in store.all_papers()}
    assert (after["Known A"], after["Known B"], after["Known C"]) == (4, 0, 17)
    assert after["Paper 0"] is None
    assert (report.citations, report.unknown, report.changed) == (3, 117, 3)


@pytest.mark.parametrize(("reply", "why"), [
    (Reply(status=500), "HTTP 500"),
    (Reply(status=403, body=b'{"message": "API rate limit exceeded"}'), "HTTP 403"),
    (Reply(status=429, headers={"Retry-After": "86400"}), "asked to retry after 86400 s"),
    (Reply(body=b"<html>not json</html>", content_type="application/json"), "not JSON"),
    (Reply(body=b"[1, 2]"), "not a JSON object"),
    (Reply(body=DEEP), "not JSON"),
    (Reply(body=repo_body("MiniMax-AI/MSA", "lots")), "stargazers_count is not a count"),
    (Reply(body=repo_body("MiniMax-AI/MSA", -3)), "stargazers_count is not a count"),
    (Reply(body=repo_body("MiniMax-AI/MSA", 10**30)), "not a count"),
    (Reply(body=b"x" * 3_000_000), "larger than 2,000,000 bytes"),
    (Reply(body=repo_body("MiniMax-AI/MSA", 5), content_type="text/html"), "expected application/json"),
])
def test_a_failing_github_is_one_line_and_the_counts_stay(store, reply, why):
    papers = stored(store, MSA)
    with ScriptedServer({"/repos/minimax-ai/msa": [reply]}) as server:
        policy = SignalPolicy(github=True, github_api=server.base, github_token_env="")
        report = refresh(store, policy, list(papers.values()), fetcher(max_wait=60), DAY)
    assert len(report.problems) == 1 and report.problems[0].startswith("GitHub: "), report.problems
    assert why in report.problems[0] and "\n" not in report.line()
    assert store.all_papers()[0].stars == 200
    assert report.changed == 0


def test_a_repository_github_does_not_know_is_not_a_failure(store):
    papers = stored(store, MSA, FEED)
    scripts = {"/repos/minimax-ai/msa": [Reply(status=404, body=b'{"message": "Not Found"}')],
               "/repos/some-lab/x-net": [Reply(body=repo_body("Some-Lab/x-net", 12))]}
    with ScriptedServer(scripts) as server:
        report = refresh(store, SignalPolicy(github=True, github_api=server.base, github_token_env=""),
                         list(papers.values()), fetcher(), DAY)
    assert (report.problems, report.unknown, report.stars) == ([], 1, 1)
    after = {p.title: p.stars for p in store.all_papers()}
    assert after == {MSA.title: 200, FEED.title: 12}


@pytest.mark.parametrize(("body", "why"), [
    (b'{"meta": {}}', "no 'results' list"),
    (b'{"results": "none"}', "no 'results' list"),
    (b"\xff\xfe not utf-8", "not JSON"),
])
def test_a_malformed_openalex_answer_is_one_line(store, body, why):
    papers = stored(store, Paper("Known A", "a", arxiv_id="2606.00467"))
    with ScriptedServer({"/works": [Reply(body=body)]}) as server:
        report = refresh(store, SignalPolicy(citations="openalex", openalex_api=server.base),
                         list(papers.values()), fetcher(), DAY)
    assert len(report.problems) == 1 and report.problems[0].startswith("OpenAlex: ") and why in report.problems[0]
    assert store.all_papers()[0].citations is None


def test_odd_results_are_skipped_not_fatal(store):
    """A result that is not an object, has no DOI, or a count that is not one, is skipped; the others count."""
    body = json.dumps({"results": [7, {"doi": None}, {"doi": "https://doi.org/10.48550/arxiv.2606.00467",
                                                       "cited_by_count": "many"},
                                   {"doi": "HTTPS://DOI.ORG/10.48550/ARXIV.2606.12730", "cited_by_count": 9}]})
    papers = stored(store, Paper("Known A", "a", arxiv_id="2606.00467"), Paper("Known B", "b", arxiv_id="2606.12730"))
    with ScriptedServer({"/works": [Reply(body=body.encode())]}) as server:
        report = refresh(store, SignalPolicy(citations="openalex", openalex_api=server.base),
                         list(papers.values()), fetcher(), DAY)
    assert report.problems == [] and (report.citations, report.unknown) == (1, 1)
    assert {p.title: p.citations for p in store.all_papers()} == {"Known A": None, "Known B": 9}


def test_nothing_is_asked_without_signals(store):
    papers = stored(store, MSA, FEED)
    with ScriptedServer({}) as server:
        report = refresh(store, SignalPolicy(github_api=server.base), list(papers.values()), fetcher(), DAY)
    assert server.requests == [] and report.requests == 0


def test_a_later_sighting_does_not_lower_the_counts(store):
    """Stars and citations only go up when an older listing is seen again (like upvotes)."""
    store.add_papers([replace(MSA, stars=251, citations=3)], seen_on=DAY)
    store.add_papers([replace(MSA, stars=100, citations=None)], seen_on=DAY)
    paper = store.all_papers()[0]
    assert (paper.stars, paper.citations) == (251, 3)


@pytest.mark.slow
def test_digest_run_asks_for_the_signals_and_a_trending_reader_sees_what_they_changed(tmp_path):
    """`digest run` over the real Daily Papers response with `[signals]` on: GitHub says one repository now has
    2,000 stars (the others, 16 the API names and one linked only in an abstract: not found), OpenAlex fails with a
    500. The run prints the signals' line and the OpenAlex failure, exits 0 (a signal never fails a run), and the
    reader without interests gets that paper first, its card showing the stars; a second run the same day asks
    GitHub nothing."""
    from ..test_operations import cli, write_profiles

    write_profiles(tmp_path / "subscribers", {"a": 'email = "a@example.org"\nmax_papers = 3\n'})
    api = (HERE.parent / "hf_daily_papers_2026-06-12.json").read_bytes()
    scripts = {"/api": [Reply(body=api)], "/repos/jqtangust/robust-u1": [Reply(body=repo_body("jqtangust/Robust-U1",
                                                                                             2000))],
               "/works": [Reply(status=500, content_type="text/plain")]}
    with ScriptedServer(scripts) as server:
        (tmp_path / "digest.toml").write_text(
            f'[fetch]\nretries = 0\nbackoff = 0\n\n[[sources]]\nkind = "hf_daily"\nname = "daily"\n'
            f'url = "{server.url("/api?date={date}")}"\n\n[signals]\ngithub = true\ngithub_api = "{server.base}"\n'
            f'github_token_env = ""\ncitations = "openalex"\nopenalex_api = "{server.base}"\n', encoding="utf-8")
        first = cli(tmp_path, "run", "--date", "2026-06-12")
        github = sum(1 for s in server.requests if s.path.startswith("/repos/"))
        second = cli(tmp_path, "run", "--date", "2026-06-12")
        again = sum(1 for s in server.requests if s.path.startswith("/repos/")) - github
    assert first.returncode == 0, first.stdout + first.stderr
    assert github == 17 and again == 0  # 16 repositories the API names, one linked in an abstract
    assert "signals: 18 requests, 1 repositories' stars, 0 citation counts, 1 papers changed, 16 not known; " \
           f"OpenAlex: {server.base}/works?" in first.stdout
    assert "HTTP 500" in first.stdout and second.returncode == 0
    message = email.message_from_bytes((tmp_path / "outbox" / "2026-06-12" / "a@example.org.eml").read_bytes(),
                                       policy=email.policy.default)
    text = message.get_body(("plain",)).get_content()
    first, rest = text.split("Robust-U1", 1)  # first in the list, before the two most upvoted papers
    assert "MiniMax Sparse Attention" not in first and "MiniMax Sparse Attention" in rest and "EvoArena" in rest
    assert "▲ 74 · 3 comments · ★ 2,000" in text  # the card says the counts that put it there


def test_the_daily_papers_api_reports_the_stars_of_the_code_it_knows():
    """The real response: the 16 rows with `githubRepo` give their `githubStars` (MSA's 251), the others none."""
    from digest.sources import hfjson

    result = hfjson.parse((HERE.parent / "hf_daily_papers_2026-06-12.json").read_text(), "api", seen_on=DAY)
    stars = {p.arxiv_id: p.stars for p in result.papers}
    assert stars["2606.13392"] == 251
    assert sum(1 for s in stars.values() if s is not None) == 16


def test_a_card_shows_the_stars_and_citations_it_has():
    from digest.render.filters import signal_counts

    assert signal_counts(replace(MSA, stars=2000, citations=1)) == "★ 2,000 · 1 citation"
    assert signal_counts(replace(MSA, stars=0, citations=None)) == ""


def test_no_request_starts_after_the_steps_deadline(store):
    """A GitHub answering slowly: the step stops asking once its deadline has passed (the clock given), counts
    the rest as left, says so in one line, and keeps what it had learnt; OpenAlex is not asked at all."""
    papers = stored(store, MSA, FEED, Paper("Third", "Code: github.com/c/d", arxiv_id="2606.12999"))
    ticks = iter(range(100))
    scripts = {f"/repos/{r}": [Reply(body=repo_body(r, 7))] for r in ("minimax-ai/msa", "some-lab/x-net", "c/d")}
    with ScriptedServer(scripts | {"/works": [Reply(body=WORKS)]}) as server:
        policy = SignalPolicy(github=True, github_api=server.base, github_token_env="", citations="openalex",
                              openalex_api=server.base, deadline=1.5)
        report = refresh(store, policy, list(papers.values()), fetcher(), DAY, clock=lambda: float(next(ticks)))
    assert len(server.requests) == 1 and not any(s.path.startswith("/works") for s in server.requests)
    assert (report.requests, report.left, report.late) == (1, 2, True)
    assert "the step's deadline (1.5 s) passed" in report.line() and "2 left for a later run" in report.line()
    assert sum(1 for p in store.all_papers() if p.stars == 7) == 1
