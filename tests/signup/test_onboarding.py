"""Onboarding by rating: after confirming, the welcome page offers a dozen recent papers spanning the reader's
interests, each with "more / less like this"; the marks are the email's feedback signal, so the first digest is
ranked by a model that already knows the reader. Real SQLite, real HTTP (waitress), real SMTP, real Chromium."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, timedelta

import numpy as np
import pytest
import time_machine

from digest.models import Paper
from digest.select.pool import attention
from digest.select.rank import trend_weights
from digest.signup import onboarding
from digest.signup.onboarding import TRENDING, choices, interleave

from ..conftest import DAY
from ..web.test_browser import ARTIFACTS, axe_source, browser, check_screens  # noqa: F401 - the module's fixtures
from .test_signups import body, site  # noqa: F401 - the module's fixture

NEWT = "newt@example.org"


@pytest.mark.slow
def test_the_papers_span_the_interests_in_turn(app):
    """Grace (three interests) is offered twelve distinct papers, the interests taking turns (each one's best first,
    so every interest has four); Katherine (no interests) the twelve trending ones; a paper is never one she keeps."""
    grace = app.profiles.roster().find("grace@example.org")
    offered = choices(app, grace, DAY)
    names = [i.name for i in grace.interests]
    assert len(offered) == onboarding.COUNT == 12
    assert len({c.paper.store_id for c in offered}) == 12
    assert [c.interest for c in offered[:3]] == names and all(c.mark == 0 for c in offered)
    assert {n: [c.interest for c in offered].count(n) for n in names} == dict.fromkeys(names, 4)
    ranked = [r.paper.store_id for r in app.composer.rank(replace(grace, interests=grace.interests[:1]), DAY, limit=4)]
    assert [c.paper.store_id for c in offered if c.interest == names[0]] == ranked
    katherine = app.profiles.roster().find("katherine@example.org")
    trending = choices(app, katherine, DAY)
    assert len(trending) == 12 and {c.interest for c in trending} == {TRENDING}
    pool = app.composer.pool(DAY)  # the first is the pool's most followed paper (the highest trend)
    assert trending[0].paper.title == max(pool.papers, key=lambda p: attention(p, *trend_weights(app.composer.settings))
                                          or 0).title


def test_interleave_fills_from_the_trending_list_and_never_repeats():
    """An interest with few papers leaves its places to the others, then to the fill list; a paper two interests
    share is offered once, for the first that reaches it."""
    a, b, c, d, e = (Paper(title=t, abstract="", store_id=n) for n, t in enumerate("abcde", 1))
    got = interleave([("X", [a, b]), ("Y", [b, c]), ("", [d, e, a])], 5)
    assert got == [("X", a), ("Y", b), ("Y", c), ("", d), ("", e)]
    assert interleave([("X", [a]), ("", [a, b])], 12) == [("X", a), ("", b)]
    assert interleave([("", [])], 12) == []


def embeddings(app, papers):
    vectors = app.dense.papers(list(papers))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return float(np.log(p / (1 - p)))


@pytest.mark.slow
def test_ratings_at_onboarding_change_the_first_digest(app):
    """Grace marks three offered GPU-kernel papers more, then two accelerator papers less: her first digest, composed
    through the app as a send composes it, is learned from the five clicks; the likes raise the papers nearest the
    liked ones, the dislikes lower those nearest the disliked ones (and the disliked never come); the list she rated
    stays as it was, now marked."""
    grace = app.profiles.roster().find("grace@example.org")
    offered = choices(app, grace, DAY)
    liked = [c.paper for c in offered if c.interest == "GPU kernels"][:3]
    disliked = [c.paper for c in offered if c.interest == "Accelerators"][:2]
    assert app.composer.signals([grace], DAY)[grace.email].model is None

    def relevance() -> dict[int, float]:
        return {r.paper.store_id: r.relevance for r in app.composer.rank(grace, DAY, limit=500)}

    def nearest(group: list[Paper]) -> list[int]:
        """The ten unrated papers of the pool most like `group`."""
        others = [p for p in app.composer.pool(DAY).papers if p.store_id not in {q.store_id for q in liked + disliked}]
        order = np.argsort(-(embeddings(app, others) @ embeddings(app, group).mean(axis=0)))
        return [others[i].store_id for i in order[:10]]

    first, start = app.composer.compose(grace, DAY, app.composer.pool(DAY)).digest, relevance()
    for paper in liked:
        assert onboarding.rate(app, grace.email, paper.store_id, more=True) == paper
    liking = relevance()
    for paper in disliked:
        onboarding.rate(app, grace.email, paper.store_id, more=False)
    assert onboarding.rate(app, grace.email, 10**9, more=True) is None  # no such paper: nothing recorded
    model = app.composer.signals([grace], DAY)[grace.email].model
    assert model is not None and model.clicks == 5
    after, rated = app.composer.compose(grace, DAY, app.composer.pool(DAY)).digest, relevance()
    assert [i.paper.store_id for i in after.items] != [i.paper.store_id for i in first.items]
    assert not {p.store_id for p in disliked} & {i.paper.store_id for i in after.items}
    # (in log-odds: the papers nearest the liked ones may start near certainty, where a probability barely moves)
    assert np.mean([logit(liking[i]) - logit(start[i]) for i in nearest(liked)]) > 2.0
    assert np.mean([logit(rated[i]) - logit(liking[i]) for i in nearest(disliked)]) < -0.5
    again = choices(app, grace, DAY)
    assert [c.paper.store_id for c in again] == [c.paper.store_id for c in offered]
    assert {c.paper.store_id: c.mark for c in again if c.mark} == {
        **{p.store_id: 1 for p in liked}, **{p.store_id: -1 for p in disliked}}


def confirm(site, email: str = NEWT):  # noqa: F811 - the fixture
    site.signup(email, name="Newt", topics=["LLM inference", "GPU kernels"])
    return site.client.post(site.link(email))


def rate_url(page) -> str:
    return re.search(r'<form method="post" action="([^"]+/rate)"', page.text).group(1)


@pytest.mark.slow
def test_the_welcome_page_offers_papers_and_takes_marks_without_javascript(site):  # noqa: F811
    """The confirmation's welcome page lists twelve papers, each a plain form with its two buttons named for the
    paper; a mark is a POST answered 303 back to the list at that paper, which shows it pressed and counted; the
    email's feedback signal is what the store holds."""
    page = confirm(site)
    assert page.status_code == 200 and "Teach it what you like" in page.text and 'srcdoc="' in page.text
    assert page.text.count('value="more"') == 12 == page.text.count('value="less"')
    assert "script-src 'self'; connect-src 'self'" in page.headers["Content-Security-Policy"]  # (its small script)
    action = rate_url(page)
    ids = re.findall(r'<input type="hidden" name="paper" value="(\d+)">', page.text)
    first = site.app.store.paper(int(ids[0]))
    assert f'aria-label="More like this: {first.title}"' in page.text.replace("&#39;", "'").replace("&amp;", "&")
    done = site.client.post(action, data={"paper": ids[0], "rating": "more"})
    assert done.status_code == 303 and done.headers["Location"] == f"{action.removesuffix('/rate')}#paper-{ids[0]}"
    site.client.post(action, data={"paper": ids[1], "rating": "less"})
    site.client.post(action, data={"paper": ids[1], "rating": "less"})  # again: the same one mark
    assert site.app.store.feedback_by_subscriber(NEWT) == {NEWT: {int(ids[0]): 1, int(ids[1]): -1}}
    listed = site.client.get(done.headers["Location"].split("#")[0])
    assert listed.status_code == 200 and "You have rated 2 of 12." in body(listed)
    assert re.findall(r'<input type="hidden" name="paper" value="(\d+)">', listed.text) == ids
    assert listed.text.count('aria-pressed="true"') == 2 and "✓ Fewer like this, noted" in listed.text
    assert "/view/" in listed.text and "/preferences/" in listed.text and "<iframe" not in listed.text
    assert "connect-src 'self'" in listed.headers["Content-Security-Policy"]
    script = site.client.get("/welcome.js")
    assert script.status_code == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert '<script src="/welcome.js" defer></script>' in listed.text and "fetch(form.action" in script.text


@pytest.mark.slow
def test_the_preferences_page_leads_back_to_the_papers_to_rate(site):  # noqa: F811
    """Not only the confirmation: the preferences page links the welcome page's dozen papers, which take marks."""
    confirm(site)
    preferences = site.client.get(site.server.path(site.app.links(NEWT).preferences))
    found = re.search(r'<a href="(/welcome/[^"]+)">Rate a dozen recent papers</a>', preferences.text)
    assert preferences.status_code == 200 and found
    page = site.client.get(found.group(1))
    assert page.status_code == 200 and page.text.count('value="more"') == 12
    ids = re.findall(r'<input type="hidden" name="paper" value="(\d+)">', page.text)
    assert site.client.post(rate_url(page), data={"paper": ids[0], "rating": "more"}).status_code == 303
    assert site.app.store.feedback_by_subscriber(NEWT) == {NEWT: {int(ids[0]): 1}}


@pytest.mark.slow
def test_bad_expired_and_cross_site_marks_change_nothing(site):  # noqa: F811
    """A forged, cut or other action's token: 400; an expired one: 410; an erased reader's: 410; a POST from another
    site: 403; a mark that is not more/less or not a paper id: 400; an unknown paper: 404. None records a mark."""
    action = rate_url(confirm(site))
    token = action.split("/")[-2]
    mark = {"paper": "1", "rating": "more"}
    for bad in (token[:-3], "nonsense", "x" * 300, site.app.signer.make("preferences", NEWT, date.today())):
        assert site.client.get(f"/welcome/{bad}").status_code == 400
        assert site.client.post(f"/welcome/{bad}/rate", data=mark).status_code == 400
    old = site.app.signer.make("feedback", NEWT, date.today() - timedelta(days=site.app.config.web.link_days + 1))
    assert site.client.get(f"/welcome/{old}").status_code == 410
    assert site.client.post(f"/welcome/{old}/rate", data=mark).status_code == 410
    other = site.client.post(action, data=mark, headers={"Origin": "https://evil.example"})
    assert other.status_code == 403 and "Not from this site" in other.text
    for form in ({"paper": "1", "rating": "up"}, {"paper": "one", "rating": "more"}, {"paper": "-1", "rating": "more"},
                 {"paper": "1" * 40, "rating": "more"}, {"paper": "١", "rating": "more"}, {"rating": "more"}):
        assert site.client.post(action, data=form).status_code == 400, form
    assert site.client.post(action, data={"paper": "999999", "rating": "more"}).status_code == 404
    assert site.app.store.feedback_by_subscriber(NEWT) == {}
    from digest.subscribers.privacy import forget

    forget(site.app, NEWT)
    assert site.client.get(action.removesuffix("/rate")).status_code == 410
    assert site.client.post(action, data=mark).status_code == 410


@pytest.mark.slow
def test_a_store_with_no_recent_papers_says_so(site):  # noqa: F811
    """Three weeks after the last papers came in (the window holds none), the welcome page and the list say there is
    nothing to rate yet, and no form is offered."""
    with time_machine.travel(date.today() + timedelta(days=21)):
        page = confirm(site)
        assert page.status_code == 200 and "no recent papers to rate yet" in body(page)
        assert 'name="rating"' not in page.text
        listed = site.client.get(f"/welcome/{site.app.signer.make('feedback', NEWT, date.today())}")
        assert listed.status_code == 200 and "no recent papers to rate yet" in body(listed)


@pytest.mark.slow
def test_a_failure_to_pick_the_papers_still_confirms(site, monkeypatch, caplog):  # noqa: F811
    """Should picking the papers fail (here the selector raises), the reader is subscribed all the same and the
    welcome page says the papers could not be picked; the failure is logged with the address."""
    def broken(*args, **kwargs):
        raise RuntimeError("the selector broke")

    monkeypatch.setattr(onboarding, "rank", broken)
    page = confirm(site)
    assert page.status_code == 200 and "could not be picked just now" in body(page) and 'srcdoc="' in page.text
    assert site.app.store.owners([NEWT]) == {NEWT: ("web", None)}
    assert "could not pick the papers to rate for newt@example.org" in caplog.text


@pytest.mark.slow
def test_rating_in_a_browser_passes_axe(browser, axe_source, site):  # noqa: F811
    """In Chromium: the welcome page after pressing "Confirm", then a mark made in place by the page's script (the
    reader stays beside their digest), then the list as the server shows it: no sideways scrolling and no serious
    or critical axe-core violation at 375 and 1280 px, light and dark, the pressed button's text 4.5:1 on its colour.
    With JavaScript off, the same button posts the form and the list comes back at that paper, marked."""
    site.signup(NEWT, name="Newt", topics=["LLM inference", "GPU kernels"])
    context = browser.new_context(bypass_csp=True)  # (for axe's script)
    page = context.new_page()
    page.goto(site.server.base + site.link(NEWT))
    page.get_by_role("button", name="Confirm my subscription").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading", level=2, name="Teach it what you like").is_visible()
    check_screens(page, axe_source, "welcome to rate")
    title = page.locator("ol.rate h3").first.inner_text()
    more = page.get_by_role("button", name=f"More like this: {title}", exact=True)
    more.click()
    page.get_by_text("✓ More like this, noted").wait_for()
    assert more.get_attribute("aria-pressed") == "true" and page.locator("iframe.digest").count() == 1
    assert page.locator("#rated-count").inner_text() == "You have rated 1 of 12."
    assert list(site.app.store.feedback_by_subscriber(NEWT)[NEWT].values()) == [1]
    page.goto(site.server.base + page.locator("form.pair").first.get_attribute("action").removesuffix("/rate"))
    check_screens(page, axe_source, "welcome rated", button=f"More like this: {title}")
    listed = page.url
    context.close()

    plain = browser.new_context(java_script_enabled=False)
    page = plain.new_page()
    page.goto(listed)
    second = page.locator("ol.rate h3").nth(1).inner_text()
    page.get_by_role("button", name=f"Less like this: {second}", exact=True).click()
    page.wait_for_load_state()
    assert re.search(r"/welcome/[^/]+#paper-\d+$", page.url)
    less = page.get_by_role("button", name=f"Less like this: {second}", exact=True)
    assert less.get_attribute("aria-pressed") == "true"
    assert page.locator("#rated-count").inner_text() == "You have rated 2 of 12."
    plain.close()
