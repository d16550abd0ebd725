"""The digest as a reader's mail client shows it, measured in headless Chromium (Playwright): at 375 and 600 px,
with the <style> block and without it (as Gmail's apps with other accounts and Yahoo on Android show it), light and
dark: no sideways scrolling, links at least 44 px tall and wide and 8 px apart, text at least 14 px, contrast at
least 4.5:1 from the colours the browser rendered, and no serious or critical axe-core violation (axe-core from its
npm package, run in the page). Screenshots land in tests/artifacts/.

Without Chromium these tests are skipped, unless DIGEST_REQUIRE_BROWSER=1 (CI sets it); without axe-core
(`npm install --prefix tests/axe`, which .ci/run does) the axe test is skipped unless DIGEST_REQUIRE_AXE=1.
"""

from __future__ import annotations

import itertools
import os
import re

import pytest

from digest.app import App

from ..conftest import DAY, SEEDS
from ..web.test_browser import ARTIFACTS, axe_source, browser, serious_violations  # noqa: F401 - the fixtures

READERS = ["ada@example.org", "alan@example.org", "grace@example.org", "katherine@example.org",
           "margaret@example.org"]
# What the page reports: its width, every link's box (titles aside: text in a heading, not a tap target), and
# every visible element holding text, with its font size, its colour and the colour behind it.
MEASURE = """() => {
  const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const behind = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
    }
    return null;
  };
  const shown = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const links = [...document.querySelectorAll('a')].filter(a => shown(a) && !a.classList.contains('ttl'))
    .map(a => { const r = a.getBoundingClientRect();
                return {text: a.textContent.trim(), x: r.left, y: r.top + scrollY, w: r.width, h: r.height}; });
  const texts = [...document.body.querySelectorAll('*')].filter(el => shown(el) &&
      [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
    .map(el => { const s = getComputedStyle(el);
                 return {text: el.textContent.trim().slice(0, 40), size: parseFloat(s.fontSize), color: rgb(s.color),
                         background: behind(el)}; });
  return {width: document.documentElement.scrollWidth, links, texts};
}"""


def luminance(rgb: list[float]) -> float:
    def channel(value: float) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(v) for v in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: list[float], b: list[float]) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def without_style(html: str) -> str:
    """The HTML as a client that drops <style> shows it: only the inline styles left."""
    stripped = re.sub(r"<style[^>]*>.*?</style>", "", html, flags=re.S)
    assert "<style" not in stripped and "prefers-color-scheme" not in stripped
    return stripped


@pytest.fixture(scope="module")
def digests(tmp_path_factory) -> dict[str, str]:
    """Each example subscriber's HTML part on DAY from the sample: the seed pages and the Daily Papers API day (arXiv
    ids, names, AI summaries, code and project links, comments), the default age limit (a "Trending again" section)."""
    os.environ.setdefault("DIGEST_SECRET", "reader-test-secret")
    from digest.config import build_config

    from ..conftest import SUBSCRIBERS

    config = build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)}},
                          base=tmp_path_factory.mktemp("reader"))
    app = App(config)
    app.ingest([SEEDS], seen_on=DAY)
    pool = app.composer.pool(DAY)
    out = {email: app.composer.compose(app.profiles.roster().find(email), DAY, pool).rendered.html for email in READERS}
    app.close()
    return out


@pytest.mark.slow
def test_the_digests_show_what_a_reader_uses(digests):
    """The example digests carry arXiv abstract and PDF links, code links, AI TL;DRs, authors by name and a
    "Trending again" section: the pages measured below hold every kind of element."""
    html = "".join(digests.values())
    for needle in ("https://arxiv.org/abs/", "https://arxiv.org/pdf/", ">Code</a>", "TL;DR (AI summary):",
                   "From the abstract:", "Trending again", "View in browser", " et al."):
        assert needle in html, needle


@pytest.mark.slow
@pytest.mark.parametrize(("width", "styled", "scheme"), list(itertools.product((375, 600), (True, False),
                                                                                  ("light", "dark"))))
def test_a_phone_and_a_desktop_show_the_whole_digest(browser, digests, width, styled, scheme):  # noqa: F811
    """No sideways scrolling; every link at least 44 × 44 px and 8 px from the next; all text at least 14 px and
    at least 4.5:1 against what is behind it: with and without <style>, light and dark."""
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    for email in READERS:
        html = digests[email] if styled else without_style(digests[email])
        page.set_content(html)
        seen = page.evaluate(MEASURE)
        assert seen["width"] <= width, (email, seen["width"])
        assert len(seen["links"]) >= 4
        for link in seen["links"]:
            assert link["h"] >= 44 and link["w"] >= 44, (email, link)
        for a, b in itertools.combinations(seen["links"], 2):
            if a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]:  # side by side: the gap across
                assert max(b["x"] - a["x"] - a["w"], a["x"] - b["x"] - b["w"]) >= 8, (email, a, b)
            elif a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]:  # one above the other: the gap between
                assert max(b["y"] - a["y"] - a["h"], a["y"] - b["y"] - b["h"]) >= 8, (email, a, b)
        for text in seen["texts"]:
            assert text["size"] >= 14, (email, text)
            assert text["background"] is not None
            assert contrast(text["color"], text["background"]) >= 4.5, (email, text)
        if email == READERS[0]:
            name = f"reader-{width}-{'styled' if styled else 'bare'}-{scheme}.png"
            page.screenshot(path=ARTIFACTS / name, full_page=True)
    if styled:  # dark mode repaints the card where <style> is kept; without it the light design stays, readable
        background = page.evaluate("getComputedStyle(document.querySelector('table.wrap')).backgroundColor")
        assert (background == "rgb(255, 255, 255)") is (scheme == "light")
    page.close()


@pytest.mark.slow
def test_outlook_com_dark_mode_is_honoured(browser, digests):  # noqa: F811
    """Outlook.com marks what it darkens with data-ogsc / data-ogsb: the digest's own dark colours apply, and every
    text still has 4.5:1."""
    page = browser.new_page(viewport={"width": 600, "height": 900}, color_scheme="light")
    page.set_content(digests[READERS[0]])
    page.evaluate("document.body.setAttribute('data-ogsc', ''); document.body.setAttribute('data-ogsb', '')")
    assert page.evaluate("getComputedStyle(document.querySelector('table.wrap')).backgroundColor") == \
        "rgb(17, 24, 39)"
    assert page.evaluate("getComputedStyle(document.querySelector('a.ttl')).color") == "rgb(243, 244, 246)"
    for text in page.evaluate(MEASURE)["texts"]:
        assert contrast(text["color"], text["background"]) >= 4.5, text
    page.screenshot(path=ARTIFACTS / "reader-600-outlook-dark.png", full_page=True)
    page.close()


@pytest.mark.slow
@pytest.mark.parametrize(("width", "styled", "scheme"), [(375, True, "light"), (375, True, "dark"),
                                                          (600, True, "light"), (375, False, "light")])
def test_no_serious_accessibility_violation(browser, digests, axe_source, width, styled, scheme):  # noqa: F811
    """axe-core, run in the page, finds no violation of serious or critical impact in any example digest."""
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    for email in READERS:
        page.set_content(digests[email] if styled else without_style(digests[email]))
        bad = serious_violations(page, axe_source)
        assert bad == [], (email, bad)
    page.close()


CARDS = """() => [...document.querySelectorAll('td.card')].map(td => {
  const title = td.querySelector('a.ttl'), box = title.getBoundingClientRect();
  const pdf = [...td.querySelectorAll('a')].find(a => a.textContent.trim() === 'PDF');
  return {href: title.href, w: box.width, h: box.height, pdf: pdf ? pdf.href : null, text: td.innerText};
})"""


@pytest.mark.slow
def test_a_phone_shows_names_paper_links_and_clean_abstracts(browser, digests):  # noqa: F811
    """At 375 px every card's title is a visible link to the paper (the arXiv abstract of its id, with its PDF beside
    it, where the id is known), authors show by name where the source names them, and no abstract shows LaTeX."""
    page = browser.new_page(viewport={"width": 375, "height": 900})
    named = on_arxiv = 0
    for email in READERS:
        page.set_content(digests[email])
        shown = page.evaluate("document.body.innerText")
        assert not re.search(r"\dtimes|\\[A-Za-z]+|\$[^$\s]*[\\^_{]|~\(", shown), email
        for card in page.evaluate(CARDS):
            assert card["w"] > 0 and card["h"] > 0 and card["href"].startswith("https://"), (email, card)
            arxiv = re.fullmatch(r"https://arxiv\.org/abs/(\d{4}\.\d{4,5})", card["href"])
            if arxiv:
                on_arxiv += 1
                assert card["pdf"] == f"https://arxiv.org/pdf/{arxiv.group(1)}", (email, card)
            named += bool(re.search(r"^[^,\n]+, [^,\n]+, [^,\n]+ et al\.", card["text"], re.M))  # three names
    page.close()
    assert named and on_arxiv
    assert "11.1×" in digests["ada@example.org"] and "11.1times" not in digests["ada@example.org"]
