"""A new reader's whole walk, in headless Chromium against `digest serve`'s app on 127.0.0.1 and a real
SMTP server (aiosmtpd) catching every email: sign up → confirm from the emailed link → rate papers on the welcome page
→ preferences → "Your interests": change an interest's keywords → bring a library (a Zotero BibTeX export and a Zotero
CSL-JSON export of real papers) → the next digest, sent through the app, follows each change → the Atom feed
(feedparser) and the archive carry that digest → the email's unsubscribe link → Resubscribe (or pause instead) →
the feed answers again. Every page visited passes axe-core at 375 px (no serious or critical violation), light and
dark. Screenshots land in tests/artifacts/.

Skipped without Chromium, unless DIGEST_REQUIRE_BROWSER=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import re
import time
from datetime import date
from email.message import EmailMessage

import feedparser
import pytest
from bs4 import BeautifulSoup

from digest import daily
from digest.app import App
from digest.config import load_config
from digest.render.filters import display_title

from ..conftest import SEEDS, sample_site
from ..signup.test_signups import settings
from ..smtpd import Recorder, smtp_server
from ..web_server import Server
from .test_browser import ARTIFACTS, axe_source, browser, serious_violations  # noqa: F401 - the module's fixtures
from .test_library import KV_BIB, MOE_JSON

READER = "walker@example.org"
OLD_WORDS = "graph neural networks, molecules"
WORDS_NAME = "Graph neural networks, molecules"  # the interest the keywords made, named from its words
NEW_WORDS = ("CUDA", "matrix multiplication")


def caught(inbox: Recorder, subject: str, *, digest: bool = False, timeout: float = 30) -> EmailMessage:
    """The latest message to READER whose subject holds `subject` (with `digest`: a digest, told by its
    List-Unsubscribe header, which the signup's own emails do not carry)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [m.message for m in inbox.messages if READER in m.rcpt_tos and subject in m.message["Subject"]
                 and (not digest or m.message["List-Unsubscribe"])]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no message {subject!r} to {READER} within {timeout} s")


def check(page, axe_source: str, name: str, scheme: str) -> None:  # noqa: F811 - the fixture's value
    """The page as loaded, at 375 px in light and dark (`scheme` first, and screenshotted): no sideways scrolling,
    no serious or critical axe-core violation."""
    page.wait_for_load_state()
    for shown in (scheme, "dark" if scheme == "light" else "light"):
        page.emulate_media(color_scheme=shown)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, name
        assert serious_violations(page, axe_source) == [], (name, shown)
        if shown == scheme:
            slug = "".join(c if c.isalnum() else "-" for c in name)
            page.screenshot(path=ARTIFACTS / f"walk-{slug}-{scheme}.png", full_page=True)


@pytest.mark.slow
def test_a_new_reader_walks_from_signup_to_resubscribe(browser, axe_source, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DIGEST_SECRET", "test-secret")
    today = date.today()
    inbox = Recorder()
    with smtp_server(inbox) as smtp_port:
        sample_site(tmp_path, settings(smtp_port))
        app = App(load_config(tmp_path / "digest.toml"))
        app.ingest([SEEDS], seen_on=today)
        server = Server(app)
        context = browser.new_context(viewport={"width": 375, "height": 667}, timezone_id="Europe/London",
                                      bypass_csp=True)  # (for axe's script)
        page = context.new_page()
        try:
            walk(page, axe_source, app, server, inbox, today)
        finally:
            context.close()
            server.close()
            app.close()


def walk(page, axe_source: str, app: App, server: Server, inbox: Recorder, today: date) -> None:  # noqa: F811
    store = app.store

    # Sign up, and confirm from the caught email.
    page.goto(f"{server.base}/subscribe")
    check(page, axe_source, "subscribe", "light")
    page.fill("#email", READER)
    page.fill("#name", "Wal Ker")
    page.get_by_label("LLM inference").check()
    page.fill("#keywords", OLD_WORDS)
    page.get_by_role("button", name="Subscribe").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading").first.inner_text() == "Check your inbox"
    check(page, axe_source, "subscribe sent", "dark")
    text = caught(inbox, "Confirm your subscription").get_body(("plain",)).get_content()
    page.goto(server.base + server.path(re.search(r"https://\S+/confirm/\S+", text).group(0)))
    check(page, axe_source, "confirm", "light")
    page.get_by_role("button", name="Confirm my subscription").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading", level=2, name="Teach it what you like").is_visible()
    check(page, axe_source, "welcome", "dark")

    # Rate three of the offered papers: two less, one more (in place, by the page's script).
    offered = page.locator("ol.rate > li")
    rated = {}
    for n, (rating, noted) in enumerate((("Less", "✓ Fewer like this, noted"), ("Less", "✓ Fewer like this, noted"),
                                         ("More", "✓ More like this, noted"))):
        item = offered.nth(n)
        title = item.locator("h3").inner_text()
        item.get_by_role("button", name=f"{rating} like this: {title}", exact=True).click()
        item.get_by_text(noted).wait_for()
        rated[int(item.locator("input[name=paper]").get_attribute("value"))] = 1 if rating == "More" else -1
    assert page.locator("#rated-count").inner_text() == "You have rated 3 of 12."
    assert store.feedback_by_subscriber(READER) == {READER: rated}
    check(page, axe_source, "welcome rated", "light")

    # Preferences → Your interests: the reader's own words changed.
    page.get_by_role("link", name="Change how often, or pause").click()
    check(page, axe_source, "preferences", "dark")
    preferences = page.url
    page.get_by_role("link", name="Your interests, send time and time zone").click()
    page.wait_for_load_state()
    assert page.get_by_label("Keywords").first.input_value() == OLD_WORDS
    check(page, axe_source, "interests", "light")
    page.get_by_label("Keywords").first.fill(", ".join(NEW_WORDS))
    page.get_by_role("button", name="Save").click()
    page.wait_for_load_state()
    assert "Saved. Your next digest follows these interests." in page.inner_text("main")
    check(page, axe_source, "interests saved", "dark")
    words = next(i for i in store.profile_of(READER)[1].interests if i.name == WORDS_NAME)
    assert words.keywords == NEW_WORDS

    # Bring your library: the BibTeX export into a new interest, the CSL-JSON one into another.
    page.goto(preferences)
    page.get_by_role("link", name="Bring your library").click()
    check(page, axe_source, "library", "light")
    for fixture, name, count, kind in ((KV_BIB, "KV cache", 5, "BibTeX"), (MOE_JSON, "Mixture of experts", 4,
                                                                          "CSL-JSON")):
        page.get_by_label("A library file").set_input_files(str(fixture))
        page.get_by_label("A new interest").check()
        page.get_by_label("Its name").fill(name)
        page.get_by_role("button", name="Read my library").click()
        page.wait_for_load_state()
        assert f"Read {count} papers from {fixture.name} ({kind}) into “{name}”" in page.locator(
            "[role=status]").inner_text()
    check(page, axe_source, "library read", "dark")
    interests = store.profile_of(READER)[1].interests
    assert [i.name for i in interests] == ["LLM inference", WORDS_NAME, "KV cache", "Mixture of experts"]
    libraries = {i.name: store.library_entries(i.library_key) for i in interests if i.library_key}
    assert {name: len(entries) for name, entries in libraries.items()} == {"KV cache": 5, "Mixture of experts": 4}

    # The next digest, sent through the app, follows each change.
    reader = app.profiles.roster().find(READER)
    composed = app.composer.compose(reader, today, app.composer.pool(today))
    assert daily.send(app, today, only=READER).counts["sent"] == 1
    mailed = caught(inbox, "", digest=True)
    html = mailed.get_body(("html",)).get_content()
    titles = [display_title(i.paper) for i in composed.digest.items]
    assert sorted(a.get_text() for a in BeautifulSoup(html, "html.parser").select("a.ttl")) == sorted(titles)
    sections = {s.name: s for s in composed.digest.sections}
    assert WORDS_NAME in sections and f"{WORDS_NAME} · {len(sections[WORDS_NAME].items)}" in (
        BeautifulSoup(html, "html.parser").get_text())  # the edited interest's own heading
    for item in sections[WORDS_NAME].items:  # the new words are why; the old ones are gone
        assert any(w in r for w in NEW_WORDS for r in item.reasons), item.reasons
    assert not any(w in r for w in OLD_WORDS.split(", ") for i in composed.digest.items for r in i.reasons)
    owned = {e.title for entries in libraries.values() for e in entries}
    from_libraries = [r for i in composed.digest.items for r in i.reasons
                      if r.startswith("like “") and r.find("” in your library (") > 0]
    assert from_libraries and "in your library" in mailed.get_body(("plain",)).get_content()
    assert not owned & set(titles)  # kept papers are never sent back
    assert not set(rated) & {i.paper.store_id for i in composed.digest.items}  # rated papers do not come back
    liked = store.paper(next(p for p, mark in rated.items() if mark > 0)).title
    assert any(r.find("”, which you marked more (") > 0 and r[6:].startswith(liked[:20])
               for i in composed.digest.items for r in i.reasons), liked  # the one marked more leads to others
    assert len(titles) <= reader.max_papers

    # The feed (read by feedparser) and the archive carry that digest.
    page.goto(preferences)
    feed_url = page.get_by_role("link", name="Your papers as a feed").get_attribute("href")
    feed = feedparser.parse(server.client.get(feed_url).content)
    assert not feed.bozo and feed.version == "atom10"
    assert sorted(e.title for e in feed.entries) == sorted(titles)
    page.get_by_role("link", name="Your past digests").click()
    check(page, axe_source, "archive", "light")
    assert page.locator("ul.digests li").count() == 1 and f"{len(titles)} papers" in page.inner_text("main")
    page.locator("ul.digests a").click()
    page.wait_for_load_state()
    assert page.content().count("class=\"ttl\"") == len(titles)
    for title in titles:
        assert page.get_by_role("heading", level=3, name=title, exact=True).count() == 1
    check(page, axe_source, "archived digest", "dark")

    # Unsubscribe from the email's link; the page offers Resubscribe and pause instead; Resubscribe works.
    unsubscribe = BeautifulSoup(html, "html.parser").find("a", string="Unsubscribe")["href"]
    page.goto(server.base + server.path(unsubscribe))
    check(page, axe_source, "unsubscribe", "light")
    page.get_by_role("button", name="Unsubscribe").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading").first.inner_text() == "You are unsubscribed"
    assert page.get_by_role("button", name="Pause instead").is_visible()
    check(page, axe_source, "unsubscribed", "dark")
    assert store.suppressed() == {READER: "unsubscribed"} and server.client.get(feed_url).status_code == 410
    page.get_by_role("button", name="Resubscribe").click()
    page.wait_for_load_state()
    assert "subscribed again" in page.inner_text("body") and store.suppressed() == {}
    check(page, axe_source, "resubscribed", "light")
    again = feedparser.parse(server.client.get(feed_url).content)
    assert not again.bozo and sorted(e.title for e in again.entries) == sorted(titles)
