"""One paper across sources and versions: a paper is its version-less arXiv id, else its DOI, else its normalised
title and first author's family name. The same paper from Hugging Face, arXiv and bioRxiv, as v1 then v2, is one
row of the store (on SQLite and PostgreSQL), and one row is one paper sent once to each reader.

The papers are real, with their real ids and DOIs: ProtTrans (arXiv 2007.06225, bioRxiv 10.1101/2020.07.12.199554,
IEEE TPAMI 10.1109/TPAMI.2021.3095381), ESMFold (bioRxiv 10.1101/2022.07.20.500902, whose first version had another
title) and ResNet (arXiv 1512.03385, CVPR 10.1109/CVPR.2016.90). The feeds around them are built in each source's
documented format.
"""

from __future__ import annotations

import email
import json
from dataclasses import replace
from datetime import date, timedelta
from email import policy
from pathlib import Path

import pytest
import sqlalchemy as sa

from digest import daily
from digest.app import App
from digest.models import Paper, arxiv_version, clean_doi, family_name
from digest.sources import arxivfeed, biorxiv, hfjson
from digest.store import Store
from digest.store.engine import make_engine
from digest.store.tables import papers

MONDAY = date(2026, 6, 8)

PROTTRANS = "ProtTrans: Towards Cracking the Language of Life's Code Through Self-Supervised Deep Learning and High " \
            "Performance Computing"
PROTTRANS_AUTHORS = ("Ahmed Elnaggar", "Michael Heinzinger", "Christian Dallago", "Ghalia Rehawi", "Yu Wang",
                     "Llion Jones", "Tom Gibbs", "Tamas Feher", "Christoph Angerer", "Martin Steinegger",
                     "Debsindhu Bhowmik", "Burkhard Rost")
PROTTRANS_ABSTRACT = ("Computational biology and bioinformatics provide vast data gold-mines from protein sequences, "
                      "ideal for Language Models taken from NLP. These LMs reach for new prediction frontiers at low "
                      "inference costs. Here, we trained two auto-regressive models (Transformer-XL, XLNet) and four "
                      "auto-encoder models (BERT, Albert, Electra, T5) on data from UniRef and BFD containing up to "
                      "393 billion amino acids. The protein LMs were trained on the Summit supercomputer.")
PROTTRANS_DOI, PROTTRANS_ARXIV, PROTTRANS_JOURNAL = "10.1101/2020.07.12.199554", "2007.06225", \
    "10.1109/TPAMI.2021.3095381"

ESM_V1 = "Language models of protein sequences at the scale of evolution enable accurate structure prediction"
ESM_V2 = "Evolutionary-scale prediction of atomic level protein structure with a language model"
ESM_AUTHORS = ("Zeming Lin", "Halil Akin", "Roshan Rao", "Brian Hie", "Zhongkai Zhu", "Wenting Lu",
               "Allan dos Santos Costa", "Maryam Fazel-Zarandi", "Tom Sercu", "Sal Candido", "Alexander Rives")
ESM_ABSTRACT = ("Artificial intelligence has the potential to open insight into the structure of proteins at the scale "
                "of evolution. We train protein language models up to 15 billion parameters, the largest to date. "
                "As the language models are scaled they learn information that enables prediction of the "
                "three-dimensional structure of a protein at the resolution of individual atoms. We present "
                "ESMFold for high accuracy end-to-end atomic level structure prediction directly from the "
                "individual sequence of a protein.")
ESM_DOI = "10.1101/2022.07.20.500902"

RESNET = "Deep Residual Learning for Image Recognition"
RESNET_AUTHORS = ("Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun")
RESNET_ABSTRACT = ("Deeper neural networks are more difficult to train. We present a residual learning framework to "
                   "ease the training of networks that are substantially deeper than those used previously. We "
                   "explicitly reformulate the layers as learning residual functions with reference to the layer "
                   "inputs. Deep residual networks win the ImageNet image recognition and detection tasks.")
RESNET_ARXIV, RESNET_DOI = "1512.03385", "10.1109/CVPR.2016.90"


# ---- each source's format, as its documentation gives it ----

def biorxiv_page(*records: dict) -> str:
    """A details API response holding `records` (title, authors, doi, version, abstract, date)."""
    collection = [{"doi": r["doi"], "version": str(r["version"]), "title": r["title"],
                   "authors": "; ".join(f"{n.rsplit(' ', 1)[1]}, {n.rsplit(' ', 1)[0]}" for n in r["authors"]),
                   "date": r["date"].isoformat(), "category": "bioinformatics", "type": "new results",
                   "license": "cc_by", "published": "NA", "server": "bioRxiv", "abstract": r["abstract"]}
                  for r in records]
    return json.dumps({"messages": [{"status": "ok", "cursor": 0, "count": len(collection),
                                     "total": str(len(collection))}], "collection": collection})


def arxiv_atom(*entries: dict) -> str:
    """An arXiv API response (Atom) holding `entries` (id with its version, title, authors, abstract, doi)."""
    items = []
    for e in entries:
        doi = f"<arxiv:doi>{e['doi']}</arxiv:doi>" if e.get("doi") else ""
        authors = "".join(f"<author><name>{name}</name></author>" for name in e["authors"])
        items.append(f"""<entry><id>http://arxiv.org/abs/{e['id']}</id>
<updated>{e['date'].isoformat()}T17:00:00Z</updated><published>{e['published'].isoformat()}T17:00:00Z</published>
<title>{e['title']}</title><summary>{e['abstract']}</summary>{authors}{doi}
<link href="http://arxiv.org/abs/{e['id']}" rel="alternate" type="text/html"/>
<arxiv:primary_category term="{e['category']}" scheme="http://arxiv.org/schemas/atom"/>
<category term="{e['category']}" scheme="http://arxiv.org/schemas/atom"/></entry>""")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:arxiv="http://arxiv.org/schemas/atom"><title>ArXiv Query</title>'
            '<id>http://arxiv.org/api/q</id><updated>2026-06-12T00:00:00-04:00</updated>'
            + "".join(items) + "</feed>")


def hf_rows(*rows: dict) -> str:
    """A Daily Papers API response (a list of rows: id, title, summary, authors, upvotes, day)."""
    return json.dumps([{"paper": {"id": r["id"], "title": r["title"], "summary": r["abstract"],
                                  "authors": [{"name": n} for n in r["authors"]], "upvotes": r["upvotes"],
                                  "publishedAt": f"{r['published'].isoformat()}T00:00:00.000Z",
                                  "submittedOnDailyAt": f"{r['date'].isoformat()}T00:00:00.000Z"},
                        "title": r["title"], "numComments": 0} for r in rows])


def day(n: int) -> date:
    return MONDAY + timedelta(days=n)


def prottrans(**changes: object) -> dict:
    return {"title": PROTTRANS, "authors": PROTTRANS_AUTHORS, "abstract": PROTTRANS_ABSTRACT,
            "published": date(2020, 7, 13), "category": "cs.LG", **changes}


def esmfold(**changes: object) -> dict:
    return {"doi": ESM_DOI, "authors": ESM_AUTHORS, "abstract": ESM_ABSTRACT, **changes}


def resnet(**changes: object) -> dict:
    return {"title": RESNET, "authors": RESNET_AUTHORS, "abstract": RESNET_ABSTRACT, "published": date(2015, 12, 10),
            "category": "cs.CV", **changes}


# The week: bioRxiv on Monday, arXiv on Tuesday, Hugging Face on Wednesday, arXiv's v2 (with the published DOIs) on
# Thursday, bioRxiv again on Friday (ESMFold's version 2 under its new title, ProtTrans's version 1 once more).
WEEK = [
    biorxiv_page(prottrans(doi=PROTTRANS_DOI, version=1, date=day(0)),
                 esmfold(title=ESM_V1, version=1, date=day(0))),
    arxiv_atom(prottrans(id=f"{PROTTRANS_ARXIV}v1", date=day(1)), resnet(id=f"{RESNET_ARXIV}v1", date=day(1))),
    hf_rows(prottrans(id=PROTTRANS_ARXIV, upvotes=12, date=day(2)), resnet(id=RESNET_ARXIV, upvotes=30, date=day(2))),
    arxiv_atom(prottrans(id=f"{PROTTRANS_ARXIV}v2", date=day(3), doi=PROTTRANS_JOURNAL,
                         abstract=PROTTRANS_ABSTRACT + " The embeddings predict secondary structure."),
               resnet(id=f"{RESNET_ARXIV}v1", date=day(3), doi=RESNET_DOI)),
    biorxiv_page(prottrans(doi=PROTTRANS_DOI, version=1, date=day(4)),
                 esmfold(title=ESM_V2, version=2, date=day(4), abstract=ESM_ABSTRACT + " Revised.")),
]


def sightings(n: int) -> tuple[Paper, ...]:
    """The papers of day `n`'s feed, as its parser reads them."""
    text, seen_on = WEEK[n], day(n)
    parser = [biorxiv, arxivfeed, hfjson, arxivfeed, biorxiv][n]
    result = parser.parse(text, f"day{n}", seen_on=seen_on)
    assert not result.errors
    return result.papers


# ---- the sources fill the ids ----

def test_ids_and_dois_are_cleaned():
    """Versions come off arXiv ids, DOIs lose their resolver and case, arXiv's own DOI is no DOI."""
    assert arxiv_version("2007.06225v2") == 2 and arxiv_version("hep-th/9901001v3") == 3
    assert arxiv_version(PROTTRANS_ARXIV) is None
    assert clean_doi("https://doi.org/10.1109/CVPR.2016.90") == RESNET_DOI.lower()
    assert clean_doi("doi:10.1101/2024.01.01.573838") == "10.1101/2024.01.01.573838"
    assert clean_doi("10.48550/arXiv.2007.06225") is None and clean_doi("not a doi") is None
    assert family_name(("A. K. Sinha",)) == family_name(("Anil Sinha",)) == "sinha" and family_name(()) == ""


def test_each_source_fills_what_it_has():
    """bioRxiv gives DOI and version (and the URL as before); arXiv the version-less id, version and its DOI; Hugging
    Face the id."""
    bio = {p.doi: p for p in sightings(0)}
    assert bio[PROTTRANS_DOI].version == 1 and bio[PROTTRANS_DOI].arxiv_id is None
    assert bio[ESM_DOI].url == f"https://www.biorxiv.org/content/{ESM_DOI}v1"
    [prot, res] = sightings(3)
    assert (prot.arxiv_id, prot.version, prot.doi) == (PROTTRANS_ARXIV, 2, PROTTRANS_JOURNAL.lower())
    assert (res.arxiv_id, res.version, res.doi) == (RESNET_ARXIV, 1, RESNET_DOI.lower())
    assert sightings(1)[0].doi is None
    hf = sightings(2)[0]
    assert (hf.arxiv_id, hf.doi, hf.upvotes) == (PROTTRANS_ARXIV, None, 12)


def test_biorxiv_keeps_the_latest_version_by_doi():
    """Two versions of one DOI in a walk are one paper, the later version, whatever their titles."""
    page = biorxiv_page(esmfold(title=ESM_V1, version=1, date=day(0)), esmfold(title=ESM_V2, version=2, date=day(0)))
    [paper] = biorxiv.latest(list(biorxiv.parse(page, "bio", seen_on=day(0)).papers))
    assert (paper.title, paper.version, paper.doi) == (ESM_V2, 2, ESM_DOI)


# ---- the store: one row per paper, on SQLite and PostgreSQL ----

@pytest.fixture
def store(store_url):
    s = Store(store_url)
    yield s
    s.close()


def test_a_week_from_three_sources_in_two_versions_is_three_papers(store):
    """Every sighting of the week lands on its paper's row: ids united, the newest version's text, the first date."""
    for n in range(len(WEEK)):
        store.add_papers(sightings(n), seen_on=day(n))
    rows = {p.title: p for p in store.all_papers()}
    assert sorted(rows) == sorted([PROTTRANS, ESM_V2, RESNET])
    prot, esm, res = rows[PROTTRANS], rows[ESM_V2], rows[RESNET]
    # seen first by DOI (bioRxiv), then by arXiv id: one row with both; the journal DOI does not replace bioRxiv's
    assert (prot.arxiv_id, prot.doi, prot.version, prot.upvotes) == (PROTTRANS_ARXIV, PROTTRANS_DOI, 2, 12)
    assert prot.abstract.endswith("The embeddings predict secondary structure.")
    # a new title in version 2: the same DOI, so the same row, now under the new title and text
    assert (esm.doi, esm.version, esm.abstract) == (ESM_DOI, 2, ESM_ABSTRACT + " Revised.")
    assert esm.url == f"https://www.biorxiv.org/content/{ESM_DOI}v2"
    assert (res.arxiv_id, res.doi) == (RESNET_ARXIV, RESNET_DOI.lower())
    # still the papers of the day they were first seen, and no other day's new papers
    assert {p.title for p in store.candidates(day(0), 1)} == {PROTTRANS, ESM_V2}
    assert {p.title for p in store.candidates(day(1), 1)} == {RESNET}
    assert store.candidates(day(4), 3) == []
    assert store.find_papers([f"doi:{ESM_DOI}", f"doi:{RESNET_DOI}"]).keys() == {f"doi:{ESM_DOI}", f"doi:{RESNET_DOI}"}


def test_an_older_version_read_later_does_not_replace_the_newer_text(store):
    """v2 then v1 (a late feed): v2's text and version stay, the first listing day stays the paper's day."""
    [v1, v2] = biorxiv.parse(biorxiv_page(esmfold(title=ESM_V1, version=1, date=day(0)),
                                          esmfold(title=ESM_V2, version=2, date=day(0))), "bio", seen_on=day(0)).papers
    store.add_papers([v2], seen_on=day(0))
    store.add_papers([replace(v1, listed_on=day(2))], seen_on=day(2))
    [paper] = store.all_papers()
    assert (paper.title, paper.version) == (ESM_V2, 2)
    assert [p.title for p in store.candidates(day(0), 1)] == [ESM_V2] and store.candidates(day(2), 1) == []


def test_a_title_alone_is_not_a_paper(store):
    """The same title by another first author, or under another arXiv id, is another paper; the same title and
    first author without ids is the same paper, and gains the ids it is seen with later."""
    first = Paper(title="Attention Is All You Need", abstract="A transformer.", authors=("Ashish Vaswani",))
    other_author = replace(first, abstract="A review of attention.", authors=("Jane Doe",))
    other_id = replace(first, abstract="Another paper.", arxiv_id="2401.00001")
    store.add_papers([first], seen_on=day(0))
    store.add_papers([other_author], seen_on=day(0))
    store.add_papers([replace(first, arxiv_id="1706.03762", authors=("A. Vaswani", "N. Shazeer"))], seen_on=day(1))
    store.add_papers([other_id], seen_on=day(1))
    found = sorted((p.arxiv_id or "", p.authors[:1]) for p in store.all_papers())
    assert found == [("", ("Jane Doe",)), ("1706.03762", ("Ashish Vaswani",)), ("2401.00001", ("Ashish Vaswani",))]


def test_one_doi_is_one_row_in_the_schema(store_url):
    """The database itself holds a DOI once (any number of rows have none)."""
    Store(store_url).close()
    engine = make_engine(store_url)
    row = dict(title_norm="t", title="T", abstract="A", data="{}", first_seen=day(0), updated_at=day(0))
    with engine.begin() as conn:
        conn.execute(papers.insert(), [dict(row, arxiv_id=None, doi=None), dict(row, arxiv_id="x", doi=None)])
        conn.execute(papers.insert().values(doi=ESM_DOI, **row))
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(papers.insert().values(doi=ESM_DOI, arxiv_id="y", **row))
    engine.dispose()


# ---- a week of digests: each paper once per reader ----

READERS = {
    "rosalind": ("Protein models", ["protein language model", "protein structure prediction", "protein sequences",
                                    "amino acids"]),
    "yann": ("Vision", ["image recognition", "residual learning", "deep residual networks", "ImageNet"]),
}


def test_a_reader_gets_each_paper_once_whatever_source_or_version_brings_it_again(make_config, tmp_path: Path):
    """Five days of sends through the outbox while the week's feeds arrive: every reader gets each of the three
    papers in one digest at most, though they come back from other sources, as v2, and under a new title."""
    readers = tmp_path / "readers"
    readers.mkdir()
    for name, (interest, keywords) in READERS.items():
        (readers / f"{name}.toml").write_text(
            f'email = "{name}@example.org"\nfrequency = "daily"\nmax_papers = 5\n\n'
            f'[[interests]]\nname = "{interest}"\nkeywords = {json.dumps(keywords)}\n')
    app = App(make_config(subscribers={"dir": str(readers)}, delivery={"transport": "outbox"}))
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    for n, text in enumerate(WEEK):
        path = feeds / f"day{n}.{'xml' if n in (1, 3) else 'json'}"
        path.write_text(text)
        assert not app.ingest([path], seen_on=day(n)).errors
        daily.send(app, day(n))
    assert app.store.count_papers() == 3
    digests: dict[str, list[str]] = {}  # each reader's digests of the week, as text
    for path in sorted(Path(app.config.delivery.outbox).rglob("*.eml")):
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        body = message.get_body(preferencelist=("plain",))
        digests.setdefault(str(message["To"]), []).append(" ".join(body.get_content().split()))
    for reader, texts in digests.items():
        for titles in ((ESM_V1, ESM_V2), (PROTTRANS,), (RESNET,)):
            sent = [n for n, text in enumerate(texts) if any(title in text for title in titles)]
            assert len(sent) <= 1, f"{reader} got {titles[-1]!r} in {len(sent)} digests"
    # both protein papers went to Rosalind on Monday, ResNet to Yann on Tuesday, and none of them again
    rosalind, yann = " ".join(digests["rosalind@example.org"]), " ".join(digests["yann@example.org"])
    assert ESM_V1 in rosalind and PROTTRANS in rosalind and RESNET in yann
    app.close()


def test_who_wrote_a_summary_goes_with_the_summary(store):
    """The Daily Papers API's AI summary seen first, then the same paper from OpenReview with its authors' TL;DR: the
    summary kept is the AI's, still labelled as the AI's (the TL;DR's author does not cling to it); a paper first
    seen with the authors' TL;DR keeps both together."""
    ai = Paper("Sparse attention at scale", "Abstract.", arxiv_id="2606.13392", summary="An AI's line.")
    theirs = Paper("Sparse attention at scale", "Abstract.", summary="The authors' line.", summary_by="authors")
    store.add_papers([ai], seen_on=date(2026, 6, 12))
    store.add_papers([theirs], seen_on=date(2026, 6, 12))
    [kept] = store.all_papers()
    assert (kept.summary, kept.summary_by) == ("An AI's line.", None)
    other = Paper("Another paper", "Abstract.", summary="Theirs.", summary_by="authors")
    store.add_papers([other], seen_on=date(2026, 6, 12))
    store.add_papers([replace(other, summary=None, summary_by=None)], seen_on=date(2026, 6, 12))
    assert {(p.summary, p.summary_by) for p in store.all_papers() if p.title == "Another paper"} == \
        {("Theirs.", "authors")}
