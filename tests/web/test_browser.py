"""What a person sees, in headless Chromium (Debian's package, driven by Playwright): the digest at desktop
and phone widths, in dark mode, the operator pages, and the unsubscribe page. Screenshots land in
tests/artifacts/ for a person to look at.

Without Chromium these tests are skipped, unless DIGEST_REQUIRE_BROWSER=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import email
import os
import shutil
from collections.abc import Iterator
from datetime import date
from email import policy
from pathlib import Path

import pytest

from digest.app import App
from digest.render.filters import display_title

from ..conftest import DAY, SEEDS
from ..web_server import OPERATOR, Server

CHROMIUM = os.environ.get("DIGEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
# Headless Chromium on a closed network: no background traffic, no sandbox (CI runs as root).
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
ADA = "ada@example.org"
AXE = Path(os.environ.get("DIGEST_AXE_JS") or Path(__file__).parents[1] / "axe" / "node_modules" / "axe-core" /
           "axe.min.js")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("DIGEST_REQUIRE_BROWSER"):
            pytest.fail(f"Chromium not found at {CHROMIUM} (install Debian's chromium package)")
        pytest.skip(f"Chromium not found at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.exists():
        if os.environ.get("DIGEST_REQUIRE_AXE"):
            pytest.fail(f"axe-core not found at {AXE} (npm install --prefix tests/axe)")
        pytest.skip(f"axe-core not found at {AXE} (npm install --prefix tests/axe)")
    return AXE.read_text(encoding="utf-8")


def serious_violations(page, axe_source: str) -> list[tuple[str, str, list[str]]]:
    """axe-core's violations of serious or critical impact on the page as shown (its id, impact and first nodes).
    A page served with its Content-Security-Policy needs a context with bypass_csp=True to run the script."""
    page.add_script_tag(content=axe_source)
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    assert result["testEngine"]["name"] == "axe-core" and result["passes"] is not None
    return [(v["id"], v["impact"], [n["html"][:80] for n in v["nodes"][:3]]) for v in result["violations"]
            if v["impact"] in ("serious", "critical")]


@pytest.fixture
def web(make_config, subscribers_dir, monkeypatch) -> Iterator[Server]:
    monkeypatch.setenv("DIGEST_SECRET", "browser-test-secret")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    app.ingest([SEEDS], seen_on=DAY)
    server = Server(app)
    yield server
    server.close()
    app.close()


def digest_url(web: Server, email: str = ADA) -> str:
    return f"{web.base}/admin/preview.html?subscriber={email}&date={DAY.isoformat()}"


@pytest.mark.slow
@pytest.mark.parametrize(("width", "scheme"), [(600, "light"), (375, "light"), (375, "dark")])
def test_digest_reads_at_desktop_and_phone_widths(browser, web, width, scheme):
    """At 600 and 375 px: no sideways scrolling, every title visible inside the page, each card's More / Less pair
    on one line, the unsubscribe link there."""
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme,
                            http_credentials={"username": OPERATOR[0], "password": OPERATOR[1]})
    page.goto(digest_url(web))
    composed = web.app.composer.compose(web.app.profiles.roster().find(ADA), DAY, web.app.composer.pool(DAY))
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for item in composed.digest.items:
        shown = display_title(item.paper)  # (its LaTeX made text)
        title = page.get_by_role("heading", name=shown, exact=True).get_by_role("link")
        assert title.is_visible() and page.get_by_role("link", name=shown, exact=True).count() == 2
        # (and once at the top, "In this issue")
        box = title.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    unsubscribe = page.get_by_role("link", name="Unsubscribe", exact=True)
    assert unsubscribe.is_visible() and unsubscribe.get_attribute("href") == composed.rendered.links.unsubscribe
    # each card's feedback pair on one line: "More like this" and "Less like this" never split by the width
    more = [a.bounding_box() for a in page.locator('a:text-is("More like this")').all()]
    less = [a.bounding_box() for a in page.locator('a:text-is("Less like this")').all()]
    assert len(more) == len(less) == len(composed.digest.items)
    assert all(abs(m["y"] - n["y"]) < 2 and m["x"] < n["x"] for m, n in zip(more, less, strict=True))
    background = page.evaluate("getComputedStyle(document.querySelector('table.wrap')).backgroundColor")
    assert (background == "rgb(255, 255, 255)") is (scheme == "light")  # dark mode repaints the card
    page.screenshot(path=ARTIFACTS / f"digest-{width}-{scheme}.png", full_page=True)
    page.close()


@pytest.mark.slow
def test_the_mailed_html_part_shows_what_the_preview_shows(browser, web):
    """The HTML part as a mail client decodes it from the message (7bit, character references) reads exactly
    like the rendered page: every ·, — and accented name appears as itself, not as an entity."""
    composed = web.app.composer.compose(web.app.profiles.roster().find(ADA), DAY, web.app.composer.pool(DAY))
    raw = composed.message.as_bytes()
    part = list(email.message_from_bytes(raw, policy=policy.default).iter_parts())[1]
    assert raw.isascii() and part["Content-Transfer-Encoding"] == "7bit"
    page = browser.new_page()
    texts = []
    for html in (part.get_content(), composed.rendered.html):
        page.set_content(html)
        texts.append(page.inner_text("body"))
    page.close()
    assert texts[0] == texts[1]
    assert "·" in texts[0] and "&#" not in texts[0]


@pytest.mark.slow
def test_operator_pages_show_subscribers_and_the_preview(browser, web):
    """The operator's index lists every subscriber; the preview shows subject, both frames and the text."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000},
                            http_credentials={"username": OPERATOR[0], "password": OPERATOR[1]})
    page.goto(f"{web.base}/admin/?date={DAY.isoformat()}")
    for profile in web.app.profiles.roster().subscribers:
        assert page.locator("td", has_text=profile.email).first.is_visible()
    page.screenshot(path=ARTIFACTS / "operator-index.png", full_page=True)
    page.get_by_role("link", name="preview").first.click()
    page.wait_for_load_state()
    subject = page.locator("#subject").inner_text()
    assert subject.endswith(" more") and "Paper Digest" not in subject  # the top pick + N more, no sender name
    frames = [f for f in page.frames if "preview.html" in f.url]
    assert len(frames) == 2 and all(f.locator("table.wrap").count() == 1 for f in frames)
    assert page.locator("iframe.phone").bounding_box()["width"] == 375
    page.screenshot(path=ARTIFACTS / "operator-preview.png", full_page=True)
    page.close()


@pytest.mark.slow
def test_unsubscribe_by_button_in_a_browser(browser, web):
    """Following the link shows a button; clicking it unsubscribes, and the Resubscribe button then resubscribes."""
    page = browser.new_page(viewport={"width": 375, "height": 800})
    page.goto(web.base + web.path(web.app.links(ADA).unsubscribe))
    assert web.app.store.suppressed() == {}
    page.get_by_role("button", name="Unsubscribe").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading").inner_text() == "You are unsubscribed"
    assert page.get_by_role("button", name="Resubscribe").is_visible()
    assert web.app.store.suppressed() == {ADA: "unsubscribed"}
    page.screenshot(path=ARTIFACTS / "unsubscribed-375.png", full_page=True)
    page.get_by_role("button", name="Resubscribe").click()  # the browser's own Origin passes the same-site check
    page.wait_for_load_state()
    assert "subscribed again" in page.inner_text("body") and web.app.store.suppressed() == {}
    page.close()


SCREENS = [(width, scheme) for width in (375, 1280) for scheme in ("light", "dark")]


@pytest.mark.slow
def test_reader_pages_pass_axe_light_and_dark(browser, web, axe_source):
    """Every page behind an email's links (preferences, unsubscribe before and after, preferences once unsubscribed,
    feedback before and after, an invalid link), at 375 and 1280 px, light and dark: no serious or critical axe-core
    violation, and the main button's text at least 4.5:1 on its colour (white on the dark accent was 1.99:1)."""
    links = web.app.links(ADA)
    composer = web.app.composer
    paper = composer.compose(web.app.profiles.roster().find(ADA), DAY, composer.pool(DAY)).digest.items[0].paper
    context = browser.new_context(bypass_csp=True)  # (for axe's script)
    page = context.new_page()
    page.goto(web.base + web.path(links.preferences))
    check_screens(page, axe_source, "preferences", button="Save")
    page.goto(web.base + web.path(links.unsubscribe))
    check_screens(page, axe_source, "unsubscribe", button="Unsubscribe")
    page.get_by_role("button", name="Unsubscribe").click()
    check_screens(page, axe_source, "unsubscribed", button="Resubscribe")
    page.goto(web.base + web.path(links.preferences))
    check_screens(page, axe_source, "preferences, unsubscribed", button="Resubscribe")
    page.get_by_role("button", name="Resubscribe").click()
    check_screens(page, axe_source, "resubscribed")
    page.goto(web.base + web.path(links.feedback) + f"/{paper.store_id}/more")
    check_screens(page, axe_source, "feedback", button="Yes, more like this")
    page.get_by_role("button", name="Yes, more like this").click()
    check_screens(page, axe_source, "feedback noted")
    page.goto(web.base + "/preferences/not-a-token")
    check_screens(page, axe_source, "invalid link")
    context.close()


def check_screens(page, axe_source: str, name: str, button: str | None = None) -> None:
    """A reader page as loaded, at 375 and 1280 px, light and dark: no sideways scrolling, no serious or critical
    axe-core violation, and `button`'s text at least 4.5:1 on its own colour. Screenshots (375 px): tests/artifacts/."""
    page.wait_for_load_state()
    for width, scheme in SCREENS:
        page.set_viewport_size({"width": width, "height": 800})
        page.emulate_media(color_scheme=scheme)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (name, width)
        assert serious_violations(page, axe_source) == [], (name, width, scheme)
        if button:
            assert button_contrast(page, button) >= 4.5, (name, button, width, scheme)
        if width == 375:
            slug = "".join(c if c.isalnum() else "-" for c in name)
            page.screenshot(path=ARTIFACTS / f"page-{slug}-{width}-{scheme}.png", full_page=True)


def button_contrast(page, name: str) -> float:
    """The contrast of a button's text on its own background, from the colours the browser rendered."""
    from ..render.test_reader import contrast

    colors = page.get_by_role("button", name=name, exact=True).evaluate(
        "b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]"
        ".map(c => c.match(/[\\d.]+/g).slice(0, 3).map(Number))")
    return contrast(*colors)


@pytest.mark.slow
def test_after_a_one_click_unsubscribe_pause_instead(browser, web):
    """The page after the email's one-click unsubscribe is no dead end: "Pause instead" subscribes the reader again,
    paused for the chosen time, through the preferences page's own form (same-site POST)."""
    page = browser.new_page(viewport={"width": 375, "height": 800})
    page.goto(web.base + web.path(web.app.links(ADA).unsubscribe))
    page.get_by_role("button", name="Unsubscribe").click()
    page.wait_for_load_state()
    assert web.app.store.suppressed() == {ADA: "unsubscribed"}
    page.get_by_label("two weeks").check()
    page.get_by_role("button", name="Pause instead").click()
    page.wait_for_load_state()
    assert "Subscribed again, and paused until" in page.inner_text("body")
    assert web.app.store.suppressed() == {}
    until = web.app.store.preference(ADA).paused_until
    assert until is not None and (until - date.today()).days == 14
    page.close()


@pytest.mark.slow
def test_the_email_passes_axe_at_phone_and_desktop_light_and_dark(browser, web, axe_source):
    """The digest as mailed, at 375 and 1280 px, light and dark: no serious or critical axe-core violation (now with
    an h1, section h2s and title h3s, and feedback links that name their paper)."""
    composed = web.app.composer.compose(web.app.profiles.roster().find(ADA), DAY, web.app.composer.pool(DAY))
    page = browser.new_page()
    page.set_content(composed.rendered.html)
    check_screens(page, axe_source, "email")
    assert page.get_by_role("heading", level=2, name="In this issue").is_visible()
    title = display_title(composed.digest.items[0].paper)
    assert page.get_by_role("link", name=f"More like this: {title[:20]}").count() == 1
    page.close()
