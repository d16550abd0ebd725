"""The built-in sample's first digests as a person sees them on a phone: the README's first command, `digest run
--date today`, over the shipped sample (digest.toml, seeds/, subscribers/) on a Monday half a year after its Daily
Papers API day, each email's HTML part shown by headless Chromium at 375 px, light and dark. Screenshots land in
tests/artifacts/.

Without Chromium these tests are skipped, unless DIGEST_REQUIRE_BROWSER=1 (CI sets it).
"""

from __future__ import annotations

import contextlib
import email
import re
import shutil
from datetime import UTC, datetime
from email import policy
from pathlib import Path

import pytest
import time_machine

from digest.models import Paper
from digest.render.filters import display_title

from ..conftest import FIXTURES, ROOT, SEEDS, SUBSCRIBERS, prime
from ..web.test_browser import ARTIFACTS, browser  # noqa: F401 - the fixture

MONDAY = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)  # every example subscriber is due on a Monday
READERS = ("ada", "alan", "grace", "katherine", "margaret")
WIDTH = 375
# What markup looks like when it reaches a reader: a command, an escaped character, math in dollars, a page's
# dropped "$\times$" or braces. A price ("$630K") is not markup.
LATEX = re.compile(r"\\[A-Za-z%&_#${}]|\$[^$\d\s]|\d(?:\.\d+)?times\b|[\^_]\{")
CARDS = """() => [...document.querySelectorAll('td.card')].map(td => {
  const title = td.querySelector('a.ttl'), box = title.getBoundingClientRect();
  const link = name => { const a = [...td.querySelectorAll('a')].find(a => a.textContent.trim() === name);
                         return a ? a.href : null; };
  const meta = td.querySelector('div.meta'), tldr = td.querySelector('div.tl');
  return {title: title.innerText, href: title.href, w: box.width, h: box.height, pdf: link('PDF'),
          meta: meta ? meta.innerText : '', tldr: tldr ? tldr.innerText : ''};
})"""
# The right edge of every element shown, past the viewport or not.
WIDEST = """() => Math.max(...[...document.body.querySelectorAll('*')]
  .filter(el => el.getClientRects().length > 0).map(el => el.getBoundingClientRect().right))"""


@pytest.fixture(scope="module")
def sample(tmp_path_factory, model_rows) -> dict[str, str]:
    """The HTML part of every digest the README's first command writes over a copy of the shipped sample, by reader."""
    folder = tmp_path_factory.mktemp("sample")
    shutil.copy(ROOT / "digest.toml", folder / "digest.toml")
    shutil.copytree(SEEDS, folder / "seeds")
    shutil.copytree(SUBSCRIBERS, folder / "subscribers")
    prime(f"sqlite:///{folder / 'digest.db'}", model_rows)  # the text model's vectors, as a first run leaves them
    from digest.cli import main

    with pytest.MonkeyPatch.context() as patch, contextlib.chdir(folder), time_machine.travel(MONDAY):
        patch.setenv("DIGEST_SECRET", "sample-browser-secret")
        assert main(["run", "--date", "today"]) == 0
    written = sorted((folder / "outbox" / MONDAY.date().isoformat()).glob("*.eml"))
    assert [path.name.split("@")[0] for path in written] == list(READERS)
    return {path.name.split("@")[0]: html_part(path) for path in written}


def html_part(path: Path) -> str:
    message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    return message.get_body(("html",)).get_content()


def api_papers() -> dict[str, Paper]:
    """The sample's Daily Papers API papers (authors' names, arXiv ids), by the title a reader sees."""
    from digest.sources import hfjson

    text = (SEEDS / "hf_daily_papers_2026-06-12.json").read_text(encoding="utf-8")
    papers = hfjson.parse(text, "api.json", seen_on=MONDAY.date()).papers
    return {display_title(paper): paper for paper in papers}


def test_the_sample_holds_the_api_day_as_fetched():
    """seeds/ holds the Daily Papers API response byte for byte as recorded (the test fixture is the same file)."""
    assert (SEEDS / "hf_daily_papers_2026-06-12.json").read_bytes() == \
        (FIXTURES / "hf_daily_papers_2026-06-12.json").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_first_digests_read_on_a_phone(browser, sample, scheme):  # noqa: F811
    """At 375 px, light and dark, in every digest of the sample's first run: nothing wider than the screen; every
    title a visible link; a paper whose source names its authors shows three names then "et al." (never "N
    authors"), and one whose arXiv id is known links its arXiv abstract and PDF; no LaTeX in a title or TL;DR.
    The trending reader's digest is the API day's papers, each so shown, with the source's own AI summary."""
    known = api_papers()
    page = browser.new_page(viewport={"width": WIDTH, "height": 800}, color_scheme=scheme)
    for reader, html in sample.items():
        page.set_content(html)
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, reader
        assert page.evaluate(WIDEST) <= WIDTH + 0.5, reader
        shown_titles = page.evaluate("[...document.querySelectorAll('a.ttl, a.tk')].map(a => a.innerText)")
        assert not [t for t in shown_titles if "$" in t or "\\" in t], reader
        cards = page.evaluate(CARDS)
        assert cards, reader
        for card in cards:
            assert card["w"] > 0 and card["h"] > 0 and card["href"].startswith("https://"), (reader, card)
            assert not LATEX.search(card["title"] + " " + card["tldr"]), (reader, card)
            arxiv = re.fullmatch(r"https://arxiv\.org/abs/(\d{4}\.\d{4,5})", card["href"])
            if arxiv:
                assert card["pdf"] == f"https://arxiv.org/pdf/{arxiv.group(1)}", (reader, card)
            paper = known.get(card["title"])
            if paper is not None:
                names = ", ".join(paper.authors[:3]) + (" et al." if len(paper.authors) > 3 else "")
                assert card["meta"].startswith(names), (reader, card)
                assert not re.search(r"\b\d+ authors?\b", card["meta"]), (reader, card)
                assert card["href"] == f"https://arxiv.org/abs/{paper.arxiv_id}", (reader, card)
        if reader == "katherine":
            assert len(cards) >= 7 and all(card["title"] in known for card in cards), cards
            assert all(card["tldr"].startswith("TL;DR (AI summary): ") for card in cards), cards
        if reader in ("ada", "katherine"):
            page.screenshot(path=ARTIFACTS / f"sample-{reader}-{WIDTH}-{scheme}.png", full_page=True)
    page.close()
