"""Rendering: escaping, inlined CSS, size under Gmail's clip, a faithful text part, operator overrides."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from digest.models import Digest, Interest, Item, Links, Newsletter, Paper, Section, Subscriber
from digest.render.filters import paper_url
from digest.render.renderer import Renderer, RenderError

DAY = date(2026, 6, 12)
NEWS = Newsletter(name="Kernel Weekly", postal_address="1 Test Road, Testville")
LINKS = Links("https://digest.example.org/unsubscribe/TOK", "https://digest.example.org/preferences/TOK",
              feedback="https://digest.example.org/feedback/eyJlIjoiYWRhQGV4YW1wbGUub3JnIn0.DXCqa6ECoRyqoVQ8R8xfv1Uq5xo")
SUB = Subscriber(email="ada@example.org", name="Ada", interests=(Interest("GPU kernels", ("CUDA",)),))
LONG = ("We study fused attention kernels on modern accelerators and show large speedups across many "
        "models and sequence lengths, with careful ablations and open code. ") * 6


def paper(n: int, title: str = "", **kw) -> Paper:
    return Paper(title=title or f"Paper number {n} about CUDA kernels", abstract=kw.pop("abstract", LONG),
                 arxiv_id=kw.pop("arxiv_id", f"2606.{10000 + n}"),
                 authors=kw.pop("authors", ("A. Author", "B. Author")), published=DAY, upvotes=n, store_id=n, **kw)


def digest_of(*papers: Paper, sections: int = 1) -> Digest:
    items = [Item(p, float(100 - i), ("CUDA", "kernel fusion")) for i, p in enumerate(papers)]
    size = -(-len(items) // sections)
    groups = tuple(Section(f"Topic {k + 1}", tuple(items[k * size:(k + 1) * size])) for k in range(sections))
    return Digest(SUB, DAY, groups)


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer()


def test_markup_in_a_title_is_escaped(renderer):
    """A title or abstract holding HTML shows as text in the HTML part and never becomes an element."""
    evil = paper(1, title='<script>alert(1)</script><img src=x onerror="y">Attack',
                 abstract='Abstract with <u>underline</u> & "quotes"')
    out = renderer.render(digest_of(evil), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    assert soup.find("script") is None and soup.find("img") is None and soup.find("u") is None
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out.html
    assert '<script>alert(1)</script><img src=x onerror="y">Attack' in soup.get_text()
    assert "Abstract with &lt;u&gt;underline&lt;/u&gt; &amp; &#34;quotes&#34;" in out.html
    assert "<script>alert(1)</script>" in out.text  # the text part is plain text, shown as written


def test_every_paper_has_title_link_meta_summary_and_reason(renderer):
    """Each paper card carries its linked title, authors, date, upvotes, a TL;DR and why it was picked."""
    papers = [paper(n) for n in range(1, 4)] + [paper(4, arxiv_id=None, title="No id: a paper")]
    out = renderer.render(digest_of(*papers), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    for p in papers:
        link = soup.find("a", class_="ttl", string=p.title)
        assert link is not None and link["href"] == paper_url(p)
        card = link.find_parent("td").get_text(" ", strip=True)
        assert "A. Author, B. Author" in card and "published 12 Jun" in card and f"▲\u00a0{p.upvotes}" in card
        assert "Why: CUDA, kernel fusion" in card
        assert "From the abstract: We study fused attention kernels" in card and len(card) < len(LONG)
    assert paper_url(papers[0]) == "https://arxiv.org/abs/2606.10001"
    assert paper_url(papers[3]) == "https://huggingface.co/papers?q=No+id%3A+a+paper"
    assert paper_url(replace(papers[3], url="https://example.org/p/4")) == "https://example.org/p/4"
    assert paper_url(replace(papers[3], url="javascript:alert(1)")).startswith("https://huggingface.co/papers?q=")


def test_arxiv_papers_link_abstract_pdf_code_project_and_discussion(renderer):
    """A paper with an arXiv id links its abstract (the title, and a link labelled arXiv) and PDF; code, project page
    and the Hugging Face page (its comment count as text) when known; a link that is not http(s) is never made."""
    rich = paper(1, github_url="https://github.com/ada/kv", project_url="https://ada.example.org/kv", comments=4,
                 summary="It compresses the KV cache 4x.")
    bare = paper(2, arxiv_id=None, github_url="javascript:alert(1)", abstract="Code: https://github.com/b/c.")
    out = renderer.render(digest_of(rich, bare), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    hrefs = {a.get_text(strip=True): a["href"]
             for a in soup.find("a", class_="ttl", string=rich.title).find_parent("td")("a")}
    assert hrefs[rich.title] == "https://arxiv.org/abs/2606.10001"
    assert hrefs["PDF"] == "https://arxiv.org/pdf/2606.10001"
    assert hrefs["Code"] == "https://github.com/ada/kv" and hrefs["Project\xa0page"] == "https://ada.example.org/kv"
    assert hrefs["arXiv"] == "https://arxiv.org/abs/2606.10001"  # labelled, beside PDF
    assert hrefs["Hugging\xa0Face"] == "https://huggingface.co/papers/2606.10001"  # the count is text, not the name
    rich_card = soup.find("a", class_="ttl", string=rich.title).find_parent("td")
    assert "4\xa0comments" not in hrefs and "4\xa0comments" in rich_card.text  # (one line)
    bare_card = soup.find("a", class_="ttl", string=bare.title).find_parent("td")
    assert {a.get_text(strip=True): a["href"] for a in bare_card("a")}.get("Code") == "https://github.com/b/c"
    assert "javascript:" not in out.html and "PDF" not in bare_card.get_text()
    for url in ("https://arxiv.org/pdf/2606.10001", "https://github.com/ada/kv", "https://github.com/b/c"):
        assert url in out.text


def test_code_named_in_an_abstract_links_the_repository_the_trend_asks_about(renderer):
    """An abstract's repository, written with or without a scheme, with ".git" or a full stop after it, is the
    card's Code link, the same repository the trend's signals ask GitHub about; GitHub's own pages are not code."""
    from digest.sources.signals import repository

    for text, expected in (("Code: github.com/Some-Lab/x-net.git.", "https://github.com/Some-Lab/x-net"),
                           ("See https://github.com/orgs/acme and https://github.com/acme/tool.", "https://github.com/acme/tool"),
                           ("Nothing here: github.com/sponsors/x.", None)):
        card_paper = paper(1, abstract=text)
        out = renderer.render(digest_of(card_paper), NEWS, LINKS)
        card = BeautifulSoup(out.html, "html.parser").find("td", class_="card")
        assert {a.get_text(strip=True): a["href"] for a in card("a")}.get("Code") == expected, text
        assert repository(card_paper) == (expected.removeprefix("https://github.com/").lower() if expected else None)


def test_an_authors_tldr_is_labelled_as_theirs_in_the_email_and_the_feed(renderer):
    """A summary the authors wrote (an OpenReview TL;DR) says so, in both parts and the reader's feed; never "AI"."""
    from digest.web.feeds import _summary

    theirs = paper(1, summary="We fuse attention kernels.", summary_by="authors")
    out = renderer.render(digest_of(theirs), NEWS, LINKS)
    card = BeautifulSoup(out.html, "html.parser").find("td", class_="card").get_text(" ", strip=True)
    assert "TL;DR (authors): We fuse attention kernels." in card and "AI summary" not in out.html
    assert "TL;DR (authors): We fuse attention kernels." in " ".join(out.text.split())
    assert _summary(theirs, DAY).startswith("TL;DR (authors): We fuse attention kernels.")
    assert _summary(replace(theirs, summary_by=None), DAY).startswith("TL;DR (AI summary): ")


def test_a_summary_is_a_labelled_tldr_and_authors_are_named(renderer):
    """The source's one-line summary shows as a TL;DR labelled as AI-written (in place of the abstract, which the
    title links to); authors by name: the first three and "et al." past them."""
    many = paper(1, summary="Tangram compresses the KV cache non-uniformly.",
                 authors=("Ada Lovelace", "Alan Turing", "Grace Hopper", "Katherine Johnson"))
    out = renderer.render(digest_of(many), NEWS, LINKS)
    card = BeautifulSoup(out.html, "html.parser").find("td", class_="card").get_text(" ", strip=True)
    assert "TL;DR (AI summary): Tangram compresses the KV cache non-uniformly." in card
    assert "Ada Lovelace, Alan Turing, Grace Hopper et al." in card and "Katherine Johnson" not in card
    assert "Ada Lovelace, Alan Turing, Grace Hopper et al." in out.text
    assert "We study fused attention kernels" not in card and "From the abstract" not in card
    assert "TL;DR (AI summary): Tangram compresses" in " ".join(out.text.split())


def test_css_is_inlined_and_dark_mode_rules_kept(renderer):
    """Styles sit on the elements themselves; only dark-mode rules (the media query and Outlook.com's
    [data-ogsc] / [data-ogsb]) remain in <style>; the layout is fluid: 100% wide up to 600 px."""
    html = renderer.render(digest_of(paper(1)), NEWS, LINKS).html
    soup = BeautifulSoup(html, "html.parser")
    title = soup.find("a", class_="ttl", string=paper(1).title)
    assert "font-size:18px" in title.find_parent("h3")["style"] and "color:#111827" in title["style"]
    assert soup.find("meta", attrs={"name": "color-scheme"})["content"] == "light dark"
    style = "\n".join(tag.string for tag in soup.find_all("style") if tag.string)
    assert "prefers-color-scheme" in style
    assert "[data-ogsc] .ttl" in style and "[data-ogsb] .wrap" in style
    assert re.search(r"^\s*\.ttl\s*\{", style, re.M) is None  # plain rules were moved inline, not kept
    wrap = soup.find("table", class_="wrap")
    assert wrap["width"] == "100%" and "max-width:600px" in wrap["style"]
    assert '<table role="presentation" width="600"' in html  # Outlook's ghost table, in a conditional comment


def test_preheader_is_hidden_without_colour_tricks(renderer):
    """The preheader says what is inside beyond the subject, is hidden with display:none, not by matching the
    background, and is padded so that the inbox preview shows it alone."""
    out = renderer.render(digest_of(paper(1), paper(2), paper(3)), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    pre = soup.find("div", class_="pre")
    assert out.preheader == f"3 papers on Topic 1. Also: {paper(2).title} · {paper(3).title}"
    assert pre.get_text().startswith(out.preheader)
    # invisible padding after it: past the ~200 characters an inbox list shows of preheader and body text
    assert len(pre.get_text()) - len(out.preheader) >= 100 and len(pre.get_text()) >= 200
    assert "display:none" in pre["style"].replace(" ", "")
    assert "color" not in pre["style"]


def test_fifteen_papers_stay_under_gmail_clipping(renderer):
    """A 15-paper digest in three sections, long titles and abstracts, is under 100 KB of HTML."""
    papers = [paper(n, title=f"A rather long paper title number {n} about fused CUDA kernels for attention "
                              "on accelerators at scale") for n in range(1, 16)]
    out = renderer.render(digest_of(*papers, sections=3), NEWS, LINKS)
    size = len(out.html.encode("utf-8"))
    assert 10_000 < size < 100_000, size
    assert out.html.count('class="card"') == 15


def test_text_part_carries_the_same_content(renderer):
    """Every title, link, reason, the unsubscribe and preferences URLs and the postal address are in the text."""
    papers = [paper(n) for n in range(1, 6)]
    out = renderer.render(digest_of(*papers, sections=2), NEWS, LINKS)
    flat = " ".join(out.text.split())
    for p in papers:
        assert p.title in flat and paper_url(p) in out.text
    for needle in ("Topic 1", "Topic 2", "Why: CUDA, kernel fusion", LINKS.unsubscribe, LINKS.preferences,
                   NEWS.postal_address, "HTML version"):
        assert (needle in flat) is (needle != "HTML version"), needle
    assert max(len(line) for line in out.text.splitlines() if "https://" not in line) <= 72


def test_subject_leads_with_the_top_pick_and_the_count(renderer):
    """The subject is the top pick's title and how many more, under 70 characters, without the sender's name."""
    out = renderer.render(digest_of(*(paper(n) for n in range(1, 5)), sections=2), NEWS, LINKS)
    assert out.subject == "Paper number 1 about CUDA kernels + 3 more"
    long = paper(1, title="Tangram: non-uniform KV cache compression for long-context LLM serving at scale, "
                          "with\r\nBcc: eve@example.org headers")
    subject = renderer.render(digest_of(long, *(paper(n) for n in range(2, 11))), NEWS, LINKS).subject
    assert subject.endswith(" + 9 more") and len(subject) <= 70 and "…" in subject
    assert subject.startswith("Tangram: non-uniform KV cache compression")
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", subject) and NEWS.name not in subject
    one = renderer.render(digest_of(paper(1, title="Only\x85one\u2028paper")), NEWS, LINKS).subject
    assert one == "Only one paper"


def test_footer_has_name_address_unsubscribe_and_preferences(renderer):
    """The footer names the newsletter and the postal address and links to unsubscribe and preferences."""
    soup = BeautifulSoup(renderer.render(digest_of(paper(1)), NEWS, LINKS).html, "html.parser")
    footer = soup.find("td", class_="ftr")
    hrefs = {a.get_text(): a["href"] for a in footer.find_all("a")}
    assert hrefs == {"Unsubscribe": LINKS.unsubscribe, "Preferences": LINKS.preferences}
    assert "Kernel Weekly" in footer.get_text() and NEWS.postal_address in footer.get_text()


def test_override_folder_first_and_builtin_still_extendable(tmp_path: Path):
    """An operator's digest.html.j2 wins, can extend the built-in, and is autoescaped like the original."""
    (tmp_path / "digest.html.j2").write_text(
        '{% extends "builtin/digest.html.j2" %}{% block header %}<tr><td class="hdr">'
        "OPERATOR {{ subscriber.name }}</td></tr>{% endblock %}", encoding="utf-8")
    sub = Subscriber(email="x@example.org", name="<i>Eve</i>")
    out = Renderer([tmp_path]).render(Digest(sub, DAY, (Section("T", (Item(paper(1), 1.0),)),)), NEWS, LINKS)
    assert "OPERATOR &lt;i&gt;Eve&lt;/i&gt;" in out.html
    assert "<i>Eve</i>" not in out.html
    soup = BeautifulSoup(out.html, "html.parser")
    assert "padding:18px 20px 8px" in soup.find("td", class_="hdr")["style"]  # the parent's CSS is inlined here too
    assert soup.find("a", string=paper(1).title) is not None


def test_missing_template_lists_where_it_looked(tmp_path: Path):
    """A template found nowhere is an error that names every folder searched."""
    renderer = Renderer([tmp_path])
    with pytest.raises(RenderError) as err:
        renderer.render_template("nope.html.j2", {})
    assert str(tmp_path) in str(err.value) and "templates" in str(err.value)


def test_missing_override_folder_is_an_error(tmp_path: Path):
    """A configured override folder that does not exist is reported, not silently ignored."""
    with pytest.raises(RenderError, match="template folder not found"):
        Renderer([tmp_path / "missing"])


def test_every_paper_has_more_and_less_like_this_links(renderer):
    """Each paper offers 'more like this' and 'less like this' links naming it, in the HTML and the text."""
    papers = [paper(n) for n in (3, 7)]
    out = renderer.render(digest_of(*papers), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    for p in papers:
        for direction, label in (("more", "More like this"), ("less", "Less like this")):
            url = f"{LINKS.feedback}/{p.store_id}/{direction}"
            assert soup.find("a", href=url).get_text() == label
            assert f"{label}: {url}" in out.text


def test_a_send_run_reads_each_template_once_and_later_runs_see_edits(tmp_path: Path):
    """Inside `pinned()` (a send run) templates are not rechecked per message; outside, an edit shows at once."""
    import os

    template = tmp_path / "subject.txt.j2"
    template.write_text("First {{ digest.count }}", encoding="utf-8")
    renderer = Renderer([tmp_path])
    digest = digest_of(paper(1))
    with renderer.pinned():
        assert renderer.render(digest, NEWS, LINKS).subject == "First 1"
        template.write_text("Second {{ digest.count }}", encoding="utf-8")
        os.utime(template, (template.stat().st_mtime + 5,) * 2)  # a newer mtime whatever the clock's grain
        assert renderer.render(digest, NEWS, LINKS).subject == "First 1"
    assert renderer.render(digest, NEWS, LINKS).subject == "Second 1"


def test_fifty_real_papers_stay_under_gmail_clipping(renderer):
    """50 papers of the Daily Papers API (names, AI summaries, code, project pages, comments), three reasons each,
    long feedback links: the HTML part as mailed (7bit, character references) is under Gmail's 102 KB clip."""
    import email as emails
    from email import policy

    from digest.delivery.message import build_message
    from digest.sources import hfjson

    from ..conftest import FIXTURES

    rows = hfjson.parse((FIXTURES / "hf_daily_papers_2026-06-12.json").read_text(), "api", seen_on=DAY).papers
    papers = [replace(p, store_id=1000 + n, arxiv_id=f"2606.{90000 + n}" if n >= len(rows) else p.arxiv_id)
              for n, p in enumerate([*rows, *rows[:20]])]
    items = [Item(p, 1.0, ("KV cache", "speculative decoding", "LLM serving")) for p in papers]
    token = "O6EJqBLEOTOiV9Z4Aaft1uMPfgkp_ZA5Q_aaNu4_pBenhA"
    links = Links(f"https://digest.example.org/unsubscribe/{token}", f"https://digest.example.org/preferences/{token}",
                  feedback=f"https://digest.example.org/feedback/{token}", view=f"https://digest.example.org/view/{token}")
    digest = Digest(SUB, DAY, (Section("LLM inference", tuple(items[:25])), Section("Quantization", tuple(items[25:]))))
    out = renderer.render(digest, NEWS, links)
    raw = build_message(out, SUB, NEWS, DAY, id_key=b"k" * 32).as_bytes()
    part = list(emails.message_from_bytes(raw, policy=policy.default).iter_parts())[1]
    assert part["Content-Transfer-Encoding"] == "7bit" and digest.count == 50
    assert out.html.count('class="card"') == 50 and out.html.count(">Code</a>") >= 16
    assert len(part.get_content().encode()) < 102 * 1024


def test_in_this_issue_headings_and_named_feedback_links(renderer):
    """The titles come first, linked and grouped by section ("In this issue", in both parts); sections are h2 and
    titles h3 (styled inline); each feedback link's accessible name names its paper, and the pair has a line of its
    own after the paper's links; a digest past CONTENTS_LIMIT papers has no list (the limit, tried)."""
    from digest.render.renderer import CONTENTS_LIMIT

    papers = [paper(n) for n in range(1, 5)]
    out = renderer.render(digest_of(*papers, sections=2), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    assert [h.get_text(strip=True) for h in soup("h1")] == [NEWS.name]
    assert [h.get_text(strip=True) for h in soup("h2")] == ["In this issue", "Topic 1 · 2", "Topic 2 · 2"]
    assert [h.get_text(strip=True) for h in soup("h3")] == [p.title for p in papers]
    assert all("margin:0" in h["style"] for h in soup("h2") + soup("h3"))
    contents = soup.find("td", class_="toc")
    assert [d.get_text() for d in contents("div")] == ["Topic 1", "Topic 2"]
    assert [(a.get_text(), a["href"]) for a in contents("a")] == [(p.title, paper_url(p)) for p in papers]
    card = soup.find("a", class_="ttl", string=papers[0].title).find_parent("td")
    more, less = card.find("a", string="More like this"), card.find("a", string="Less like this")
    assert more["aria-label"] == "More like this: " + papers[0].title  # (a long title cut at a word, with …)
    assert less["aria-label"].startswith("Less like this: Paper number 1")
    assert more.find_previous_sibling().name == "br" and less.find_previous_sibling() is more
    head = out.text.split("Topic 1 (2)")[0]
    assert "In this issue" in head and all(p.title in head for p in papers) and head.index("Topic 2") > 0

    at_limit = renderer.render(digest_of(*[paper(n) for n in range(1, CONTENTS_LIMIT + 1)]), NEWS, LINKS)
    past = renderer.render(digest_of(*[paper(n) for n in range(1, CONTENTS_LIMIT + 2)]), NEWS, LINKS)
    assert "In this issue" in at_limit.html and "In this issue" in at_limit.text
    assert "In this issue" not in past.html and "In this issue" not in past.text
    one = renderer.render(digest_of(paper(1)), NEWS, LINKS)
    assert "In this issue" not in one.html  # one paper: nothing to list


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def api_papers() -> list[Paper]:
    """The papers of a real Daily Papers API response (30 rows of 12 June 2026), as the parser stores them."""
    from digest.sources import hfjson

    text = (FIXTURES / "hf_daily_papers_2026-06-12.json").read_text(encoding="utf-8")
    return list(hfjson.parse(text, "api.json", seen_on=DAY).papers)


def test_real_papers_show_their_authors_names_and_link_arxiv(renderer):
    """Papers of a real API response: each card names the first three authors ("et al." past them), and its title
    links the arXiv abstract of its own id, with the PDF beside it, in the HTML and in the text."""
    papers = [p for p in api_papers() if len(p.authors) > 3][:4] + [p for p in api_papers() if len(p.authors) <= 3][:1]
    assert len(papers) == 5
    out = renderer.render(digest_of(*papers), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    text = " ".join(out.text.split())
    for p in papers:
        names = ", ".join(p.authors[:3]) + (" et al." if len(p.authors) > 3 else "")
        link = soup.find("a", class_="ttl", string=p.title)
        assert link["href"] == f"https://arxiv.org/abs/{p.arxiv_id}"
        card = link.find_parent("td")
        assert names in card.get_text(" ", strip=True) and f"{len(p.authors)} authors" not in card.get_text()
        hrefs = {a.get_text(strip=True): a["href"] for a in card("a")}
        assert hrefs["PDF"] == f"https://arxiv.org/pdf/{p.arxiv_id}"
        assert names in text and f"https://arxiv.org/abs/{p.arxiv_id}" in text
        assert f"PDF: https://arxiv.org/pdf/{p.arxiv_id}" in text
    assert "huggingface.co/papers?q=" not in out.html + out.text


def test_a_url_naming_an_arxiv_id_links_arxiv_and_its_pdf(renderer):
    """A record without an id field whose URL names one (an arXiv or Hugging Face paper page) links the arXiv abstract
    and PDF of that id; another URL is the paper's own link; with neither, a search for the title."""
    by_url = paper(1, arxiv_id=None, url="https://huggingface.co/papers/2606.00467")
    by_pdf = paper(2, arxiv_id=None, url="https://arxiv.org/pdf/2606.00468v2")
    own = paper(3, arxiv_id=None, url="https://example.org/p/3")
    out = renderer.render(digest_of(by_url, by_pdf, own), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    for p, arxiv in ((by_url, "2606.00467"), (by_pdf, "2606.00468")):
        card = soup.find("a", class_="ttl", string=p.title).find_parent("td")
        hrefs = {a.get_text(strip=True): a["href"] for a in card("a")}
        assert hrefs[p.title] == f"https://arxiv.org/abs/{arxiv}" and hrefs["PDF"] == f"https://arxiv.org/pdf/{arxiv}"
    assert soup.find("a", class_="ttl", string=own.title)["href"] == "https://example.org/p/3"
    assert "arxiv.org/pdf/" not in soup.find("a", class_="ttl", string=own.title).find_parent("td").decode()


@pytest.mark.parametrize("published, listed, upvotes, words", [
    (date(2026, 6, 3), date(2026, 6, 11), 7, "published 3 Jun · listed 11 Jun · ▲ 7"),
    (None, date(2025, 8, 20), None, "listed 20 Aug 2025"),
    (date(2024, 11, 29), date(2026, 6, 10), None, "published 29 Nov 2024 (1 year ago) · listed 10 Jun"),
    (date(2026, 6, 3), date(2026, 6, 3), 2, "published 3 Jun · ▲ 2"),
])
def test_each_date_says_what_it_is(renderer, published, listed, upvotes, words):
    """The paper's own date reads "published", the day a source listed it "listed" (with or without upvotes, "▲" never
    apart from its count in the HTML), the year shown when it is not the digest's; the text part says the same."""
    dated = replace(paper(1), published=published, listed_on=listed, upvotes=upvotes)
    out = renderer.render(digest_of(dated), NEWS, LINKS)
    meta = BeautifulSoup(out.html, "html.parser").find("div", class_="meta").get_text(" ", strip=True)
    assert "▲ " not in meta
    meta = meta.replace("\u00a0", " ")
    assert meta.endswith(words) and "trending" not in meta and "Published" not in meta
    assert words in " ".join(out.text.split())


def test_abstracts_from_latex_show_as_text(renderer):
    """Real abstracts written in LaTeX (from the arXiv sample, as the parser stores them) show no markup in the HTML
    or text: "4.64×", not "4.64$\\times$"."""
    import gzip
    import json

    from digest.sources import jsonl

    rows = {row["id"]: row for row in map(json.loads, gzip.decompress(
        (FIXTURES / "arxiv_sample_head.jsonl.gz").read_bytes()).decode().splitlines())}
    text = "".join(json.dumps(rows[key]) + "\n" for key in ("2503.11685", "2503.14070", "2503.13060"))
    papers = list(jsonl.parse(text, "sample.jsonl", seen_on=DAY).papers)
    out = renderer.render(digest_of(*papers), NEWS, LINKS)
    shown = " ".join(BeautifulSoup(out.html, "html.parser").find("table", class_="wrap").get_text(" ").split())
    for part in (shown, " ".join(out.text.split())):
        assert "$" not in part and "\\times" not in part and "\\textbf" not in part
        assert "×" in part


def test_titles_from_latex_show_as_text_and_stay_stored_as_written(renderer):
    """Titles written in LaTeX (real arXiv titles, a seed page's "H_2O") show as text wherever the email shows a
    title: the card, "In this issue", the feedback links' names, the text part, the subject and the preheader. The
    paper keeps its title as written (one without an arXiv id is known by it), and the search for it looks for that."""
    mask = paper(1, arxiv_id="2503.19881",
                 title="Mask$^2$DiT: Dual Mask-based Diffusion Transformer for Multi-Scene Long Video Generation")
    wing = paper(2, arxiv_id="2503.18652", title=r"Robust face recognition based on the wing loss and the $\ell_1$ "
                                                 "regularization")
    h2o = paper(3, arxiv_id=None, title="H_2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large "
                                        "Language Models")
    shown = ["Mask²DiT: Dual Mask-based Diffusion Transformer for Multi-Scene Long Video Generation",
             "Robust face recognition based on the wing loss and the ℓ₁ regularization",
             "H₂O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language Models"]
    out = renderer.render(digest_of(mask, wing, h2o), NEWS, LINKS)
    soup = BeautifulSoup(out.html, "html.parser")
    assert [a.get_text() for a in soup("a", class_="ttl")] == shown
    assert [a.get_text() for a in soup("a", class_="tk")] == shown
    assert soup.find("a", attrs={"aria-label": True})["aria-label"] == "More like this: Mask²DiT: Dual Mask-based…"
    text = " ".join(out.text.split())
    assert all(title in text for title in shown)
    assert out.subject.startswith("Mask²DiT: Dual Mask-based") and "H₂O: Heavy-Hitter Oracle" in out.preheader
    page = " ".join(soup.find("table", class_="wrap").get_text(" ").split())
    words = " ".join(word for word in text.split() if "://" not in word)  # (the search link holds the title as written)
    for part in (page, words, out.subject, out.preheader):
        assert "$" not in part and "\\" not in part and "H_2O" not in part
    assert h2o.title.startswith("H_2O") and mask.title.startswith("Mask$^2$DiT")
    assert paper_url(h2o).endswith("?q=H_2O%3A+Heavy-Hitter+Oracle+for+Efficient+Generative+Inference+of+Large+"
                                   "Language+Models")


def test_a_models_summary_replaces_the_quoted_sentence_escaped_and_the_sources_own_comes_first(renderer):
    """A summary a model made (`[summaries]`, passed by store id) shows as the TL;DR in place of the sentence quoted
    from the abstract, in both parts, escaped in the HTML and on one line; a paper whose source gave its own summary
    keeps that one; a paper with none made keeps the quoted sentence."""
    made = paper(1)
    own = paper(2, summary="The source's own summary.")
    none = paper(3)
    summaries = {1: 'Fuses kernels: 2x <faster> & "leaner".\r\nBcc: x@example.org', 2: "Not shown."}
    out = renderer.render(digest_of(made, own, none), NEWS, LINKS, summaries)
    cards = [c.get_text(" ", strip=True) for c in BeautifulSoup(out.html, "html.parser").find_all("td", class_="card")]
    assert 'TL;DR (AI summary): Fuses kernels: 2x <faster> & "leaner". Bcc: x@example.org' in cards[0]
    assert "From the abstract" not in cards[0]
    assert "Fuses kernels: 2x &lt;faster&gt; &amp; &#34;leaner&#34;. Bcc: x@example.org" in out.html
    assert "TL;DR (AI summary): The source's own summary." in cards[1] and "Not shown." not in out.html
    assert "From the abstract" in cards[2]
    text = " ".join(out.text.split())
    assert 'TL;DR (AI summary): Fuses kernels: 2x <faster> & "leaner". Bcc: x@example.org' in text
    assert "\r" not in out.text and "\nBcc" not in out.text and "Not shown." not in out.text
    assert out.text.count("From the abstract") == 1
