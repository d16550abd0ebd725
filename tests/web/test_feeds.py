"""Readable anywhere: a reader's private Atom feed and web archive of past digests, linked from
the preferences page; the feed's address never expires but stops after unsubscribe or erasure, the archive's
expires with the preferences link. Feeds are read back with feedparser."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, timedelta

import feedparser
import pytest
import sqlalchemy as sa
from bs4 import BeautifulSoup

from digest import daily
from digest.app import App
from digest.models import Paper
from digest.render.filters import paper_url
from digest.store import Store
from digest.tokens import FOREVER
from digest.web import feeds

from ..conftest import DAY, SEEDS
from ..web_server import Server
from .test_browser import axe_source, browser, check_screens  # noqa: F401  (the browser test's fixtures)

ADA, ALAN = "ada@example.org", "alan@example.org"
DAYS = (DAY, DAY + timedelta(days=1))
ONE_CLICK = {"List-Unsubscribe": "One-Click"}


@pytest.fixture(scope="module")
def sent(tmp_path_factory, model_rows) -> Iterator[App]:
    """Ada's and Alan's digests of DAY and the day after, sent (to the outbox) once for the module (the links'
    secret: the store's own)."""
    from digest.config import build_config

    from ..conftest import SUBSCRIBERS, prime

    folder = tmp_path_factory.mktemp("feeds")
    prime(f"sqlite:///{folder / 'digest.db'}", model_rows)
    app = App(build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
                            "ingest": {"paths": [str(SEEDS)]}, "select": {"max_age_days": 0}}, base=folder))
    app.ingest([SEEDS], seen_on=DAY)
    for day in DAYS:
        for email in (ADA, ALAN):
            assert daily.send(app, day, only=email).counts["sent"] == 1
    yield app
    app.close()


@pytest.fixture
def web(sent: App) -> Iterator[Server]:
    """`digest serve` over the module's store; whatever a test suppressed or erased is its own (see `fresh`)."""
    server = Server(sent)
    yield server
    server.close()


@pytest.fixture
def fresh(make_config, subscribers_dir, monkeypatch) -> Iterator[Server]:
    """A store of its own, Ada's digest of DAY sent: for the tests that unsubscribe or erase."""
    monkeypatch.setenv("DIGEST_SECRET", "feeds-test-secret")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    app.ingest([SEEDS], seen_on=DAY)
    assert daily.send(app, DAY, only=ADA).counts["sent"] == 1
    server = Server(app)
    yield server
    server.close()
    app.close()


def reader_links(web: Server, email: str = ADA, issued: date | None = None) -> dict[str, str]:
    """The links the preferences page (of a link made on `issued`) offers, by their text."""
    page = web.client.get(web.path(web.app.links(email, issued or date.today()).preferences))
    assert page.status_code == 200
    return {a.get_text(): a["href"] for a in BeautifulSoup(page.text, "html.parser").find_all("a")}


def feed_path(web: Server, email: str = ADA) -> str:
    return reader_links(web, email)["Your papers as a feed"]


def archive_path(web: Server, email: str = ADA, issued: date | None = None) -> str:
    return reader_links(web, email, issued)["Your past digests"]


def received(app: App, email: str) -> dict[int, date]:
    """The send log's papers of `email`: id → the day of the digest that carried it."""
    from digest.store.tables import received as table

    with app.store.engine.connect() as conn:
        rows = conn.execute(sa.select(table.c.paper_id, table.c.digest_date).where(table.c.subscriber == email))
        return {r.paper_id: r.digest_date for r in rows}


def parsed(body: bytes) -> feedparser.FeedParserDict:
    result = feedparser.parse(body)
    assert not result.bozo, result.get("bozo_exception")
    assert result.version == "atom10"
    return result


@pytest.mark.slow
def test_the_feed_carries_each_digests_papers(web):
    """The feed the preferences page links parses cleanly (feedparser, no bozo) and holds one entry per paper the
    send log recorded, newest digest first, each with its title, link, authors, summary and its digest's day."""
    response = web.client.get(feed_path(web))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    feed = parsed(response.content)
    log = received(web.app, ADA)
    papers = web.app.store.papers_by_id(log)
    assert len(feed.entries) == len(log) >= 6 and set(log.values()) == set(DAYS)
    by_title = {p.title: (i, p) for i, p in papers.items()}
    days = []
    for entry in feed.entries:
        paper_id, paper = by_title[entry.title]
        assert entry.link == paper_url(paper)
        assert entry.updated_parsed[:3] == log[paper_id].timetuple()[:3]
        assert [a.name for a in entry.get("authors", [])] == list(paper.authors[:feeds.FEED_AUTHORS])
        assert paper.abstract.split()[0] in entry.summary
        days.append(log[paper_id])
    assert days == sorted(days, reverse=True)  # newest digest first
    assert feed.feed.title.endswith("your papers") and feed.feed.updated_parsed[:3] == DAYS[1].timetuple()[:3]


@pytest.mark.slow
def test_the_feeds_ids_are_stable_and_name_nobody(web):
    """One address per reader whatever preferences link led to it; the feed id and each entry's id the same on every
    poll, different for another reader, and none of them holds the address."""
    path = feed_path(web)
    assert reader_links(web, issued=date.today() - timedelta(days=9))["Your papers as a feed"] == path
    first, again = parsed(web.client.get(path).content), parsed(web.client.get(path).content)
    other = parsed(web.client.get(feed_path(web, ALAN)).content)
    assert first.feed.id == again.feed.id != other.feed.id
    ids = [e.id for e in first.entries]
    assert ids == [e.id for e in again.entries] and len(set(ids)) == len(ids)
    assert not set(ids) & {e.id for e in other.entries}
    assert all(re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", i) for i in [first.feed.id, *ids])
    assert ADA not in web.client.get(path).text


def test_the_feed_is_cheap_and_cached_privately(web):
    """A poll costs at most two queries; the feed is private (never no-store, never a shared cache's) with an ETag
    and Last-Modified, so a poll between two digests is answered 304 without a body."""
    path = feed_path(web)
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    sa.event.listen(web.app.store.engine, "before_cursor_execute", count)
    try:
        response = web.client.get(path)
    finally:
        sa.event.remove(web.app.store.engine, "before_cursor_execute", count)
    queries = [s for s in statements if not s.startswith(("BEGIN", "COMMIT", "ROLLBACK"))]
    assert response.status_code == 200 and len(queries) <= 2, statements
    assert response.headers["cache-control"] == f"private, max-age={feeds.FEED_MAX_AGE}"
    etag, modified = response.headers["etag"], response.headers["last-modified"]
    assert modified.startswith("Sat, 13 Jun 2026 00:00:00")  # the newest digest's day
    for condition in ({"If-None-Match": etag}, {"If-Modified-Since": modified}):
        again = web.client.get(path, headers=condition)
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert web.client.get(path, headers={"If-None-Match": '"other"'}).status_code == 200


def test_hostile_text_round_trips_through_the_feed(make_config, monkeypatch):
    """Titles, authors and abstracts holding <, &, quotes, CDATA ends and control characters come out of
    feedparser as the text they were (each control character a space: XML cannot carry them), nothing injected."""
    monkeypatch.setenv("DIGEST_SECRET", "feeds-hostile-secret")
    app = App(make_config())
    hostile = [Paper(title='<script>alert("x")</script> & \'quoted\' \x01\x0bbell\x7f ]]> &amp; <![CDATA[',
                     abstract='An <b>abstract</b> & "more" \x00 with ]]> inside. We show it.',
                     authors=("Ada <ada@example.org>", 'O"Brien & Sons', "\x1b[31mred"), arxiv_id="2601.00001"),
               Paper(title="Entities &lt; &#60; &#x3C; \u2028line \ufffe end", abstract="Plain.",
                     url="https://example.org/p?a=1&b=\"2\"")]
    try:
        app.store.add_papers(hostile, seen_on=DAY)  # (the sources refuse control characters; the feed's own care)
        ids = sorted(app.store.papers_by_id(range(1, 400)))
        app.store.mark_sent(ADA, DAY, ids)
        server = Server(app)
        try:
            body = server.client.get(f"/feed/{app.signer.make('feed', ADA, FOREVER)}").content
        finally:
            server.close()
    finally:
        app.close()
    feed = parsed(body)
    shown = {e.title: e for e in feed.entries}

    def expected(text: str) -> str:
        return " ".join(re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]", " ", text).split())

    first, second = (shown[expected(p.title)] for p in hostile)
    assert [a.name for a in first.authors] == [expected(a) for a in hostile[0].authors]
    assert expected(hostile[0].abstract) in first.summary and "<b>" not in body.decode()
    assert second.link == paper_url(hostile[1])  # (a URL holding a quote is no link: a search)
    assert b"<script>" not in body and body.count(b"<entry>") == len(ids)


def test_a_title_written_in_latex_reads_as_text_in_the_feed():
    """An entry's title is the paper's as a reader reads it, its LaTeX made text; its link is the paper's."""
    import uuid

    paper = Paper(title="Mask$^2$DiT: Dual Mask-based Diffusion Transformer for Multi-Scene Long Video Generation",
                  abstract="A.", arxiv_id="2503.19881", store_id=1)
    body = feeds.atom([(DAY, paper)], feed_id=uuid.uuid4(), updated=DAY, title="Feed", author="Digest",
                      self_url="https://digest.example.org/feed/x")
    [entry] = parsed(body).entries
    assert entry.title == "Mask²DiT: Dual Mask-based Diffusion Transformer for Multi-Scene Long Video Generation"
    assert entry.link == "https://arxiv.org/abs/2503.19881"


@pytest.mark.slow
def test_unsubscribe_stops_the_feed_and_resubscribing_brings_it_back(fresh):
    """After the one-click unsubscribe the feed answers 410 (a feed reader drops it) and the preferences page no
    longer offers it; Resubscribe brings the same address back."""
    path = feed_path(fresh)
    assert fresh.client.get(path).status_code == 200
    unsubscribe = fresh.path(fresh.app.links(ADA).unsubscribe)
    assert fresh.client.post(unsubscribe, data=ONE_CLICK).status_code == 200
    gone = fresh.client.get(path)
    assert gone.status_code == 410 and "stopped" in gone.text and b"<feed" not in gone.content
    assert "Your papers as a feed" not in reader_links(fresh)
    preferences = fresh.path(fresh.app.links(ADA).preferences)
    assert fresh.client.post(preferences, data={"do": "resubscribe"}).status_code == 200
    assert fresh.client.get(path).status_code == 200 and feed_path(fresh) == path


@pytest.mark.slow
def test_erasure_stops_the_feed_and_the_archive(fresh):
    """'Delete my data' (privacy.forget): the feed and the archive answer 410 from then on, and show nothing."""
    feed, archive = feed_path(fresh), archive_path(fresh)
    day = f"{archive}/{DAY.isoformat()}"
    assert fresh.client.get(archive).status_code == 200 and fresh.client.get(day).status_code == 200
    forget = fresh.path(fresh.app.links(ADA).preferences) + "/forget"
    assert fresh.client.post(forget).status_code == 200 and fresh.app.store.is_forgotten(ADA)
    for path in (feed, archive, day):
        response = fresh.client.get(path)
        assert response.status_code == 410 and ADA not in response.text, path


@pytest.mark.slow
def test_the_archive_lists_past_digests_and_opens_each_as_mailed(web):
    """The archive lists the reader's digests by day, newest first, with their paper counts; each opens the digest
    as it was mailed ("View in browser"'s rendering); a day without a digest, or written otherwise, is 404."""
    path = archive_path(web)
    response = web.client.get(path)
    assert response.status_code == 200 and "no-store" in response.headers["cache-control"]
    links = BeautifulSoup(response.text, "html.parser").select("ul.digests a")
    assert [a["href"] for a in links] == [f"{path}/{day.isoformat()}" for day in reversed(DAYS)]
    counts = {d: list(received(web.app, ADA).values()).count(d) for d in DAYS}
    assert f"{counts[DAYS[0]]} papers" in response.text
    for day in DAYS:
        mailed = web.client.get(f"{path}/{day.isoformat()}")
        composed = web.app.composer.compose(web.app.profiles.roster().find(ADA), day, web.app.composer.pool(day))
        assert mailed.status_code == 200 and mailed.text == composed.rendered.html
    for missing in ((DAY - timedelta(days=1)).isoformat(), "20260612", "2026-6-12", "not-a-day"):
        assert web.client.get(f"{path}/{missing}").status_code == 404, missing
    assert "ada@" not in path and "alan" not in response.text


def test_the_archive_expires_with_the_preferences_link_and_the_feed_never(web):
    """An archive link offered by an old preferences page answers 410 once that page's link would have; the feed's
    address (made for the day tokens.FOREVER, decades old) still answers; a forged or other-action token is 400."""
    days = web.app.config.web.link_days
    assert web.client.get(archive_path(web, issued=date.today() - timedelta(days=days))).status_code == 200
    old = web.app.signer.make("archive", ADA, date.today() - timedelta(days=days + 1))
    assert web.client.get(f"/archive/{old}").status_code == 410
    assert web.client.get(f"/archive/{old}/{DAY.isoformat()}").status_code == 410
    assert (date.today() - FOREVER).days > 365 * 20 and web.client.get(feed_path(web)).status_code == 200
    other = web.app.signer.make("preferences", ADA, FOREVER)
    for path in (f"/feed/{other}", f"/archive/{web.app.signer.make('feed', ADA, date.today())}",
                 f"/feed/{web.app.signer.make_legacy('feed', ADA)}", feed_path(web)[:-3] + "AAA"):
        assert web.client.get(path).status_code == 400, path


@pytest.mark.parametrize("url", ["sqlite", "postgresql"])
def test_the_feed_keeps_to_its_limits(url, tmp_path, request):
    """The store gives a feed the papers of the last FEED_DIGESTS digests only, at most FEED_ENTRIES of them, and
    the archive the last ARCHIVE_DIGESTS days (with 0 for a digest whose papers were all received before)."""
    store = Store(f"sqlite:///{tmp_path / 'limits.db'}" if url == "sqlite"
                  else request.getfixturevalue("postgres").new_database())
    try:
        store.add_papers([Paper(title=f"Paper number {i}", abstract="A.") for i in range(300)], seen_on=DAY)
        ids = sorted(store.papers_by_id(range(1, 301)))
        days = [DAY + timedelta(days=n) for n in range(feeds.ARCHIVE_DIGESTS + 5)]
        for n, day in enumerate(days):
            store.enqueue(day, [ADA], message_id=lambda e, n=n: f"<{n}@b>", transport="outbox")
            store.mark_sent(ADA, day, ids[2 * n: 2 * n + 2] if n < 40 else ids[:1])  # from day 40: nothing new
        lately = store.received_lately(ADA, feeds.FEED_DIGESTS, feeds.FEED_ENTRIES)
        assert {d for d, _ in lately} == set(days[10:40]) and len(lately) == 60  # the last 30 digests with papers
        assert store.received_lately(ADA, feeds.FEED_DIGESTS, 7)[0][0] == days[39]
        assert len(store.received_lately(ADA, 1000, feeds.FEED_ENTRIES)) == 80  # every paper once, on its first day
        assert len(store.received_lately(ADA, 1000, 50)) == 50
        archived = store.past_digests(ADA, feeds.ARCHIVE_DIGESTS)
        assert len(archived) == feeds.ARCHIVE_DIGESTS and archived[0] == (days[-1], 0)
        assert archived[-1] == (days[5], 2) and store.past_digests(ALAN, 10) == []
    finally:
        store.close()


def test_the_feed_holds_at_most_feed_entries_and_names_few_authors(make_config, monkeypatch):
    """A reader with more papers than FEED_ENTRIES in the last digests gets FEED_ENTRIES entries; a paper with 500
    authors names FEED_AUTHORS of them."""
    monkeypatch.setenv("DIGEST_SECRET", "feeds-limit-secret")
    app = App(make_config())
    try:
        many = [Paper(title=f"Crowded paper {i}", abstract="A.", authors=tuple(f"Author {k}" for k in range(500)))
                for i in range(feeds.FEED_ENTRIES + 20)]
        app.store.add_papers(many, seen_on=DAY)
        app.store.mark_sent(ADA, DAY, sorted(app.store.papers_by_id(range(1, len(many) + 1))))
        server = Server(app)
        try:
            feed = parsed(server.client.get(f"/feed/{app.signer.make('feed', ADA, FOREVER)}").content)
        finally:
            server.close()
    finally:
        app.close()
    assert len(feed.entries) == feeds.FEED_ENTRIES
    assert {len(e.authors) for e in feed.entries} == {feeds.FEED_AUTHORS}


@pytest.mark.slow
def test_the_archive_page_passes_axe_light_and_dark(browser, axe_source, web):  # noqa: F811
    """The archive and the preferences page linking it, at 375 and 1280 px, light and dark: no sideways scrolling and
    no serious or critical axe-core violation; a day's link opens that digest."""
    context = browser.new_context(bypass_csp=True)  # (for axe's script)
    page = context.new_page()
    page.goto(web.base + web.path(web.app.links(ADA).preferences))
    page.get_by_role("link", name="Your past digests").click()
    check_screens(page, axe_source, "archive")
    page.get_by_role("link", name="Saturday 13 June 2026").click()
    page.wait_for_load_state()
    assert page.locator("table.wrap").count() == 1
    context.close()
