"""Library and author interests end to end: a reader's library file (BibTeX, RIS, CSL-JSON, a list of ids) named in a
profile or a CSV import, read into the store, turned into the papers a digest picks with "in your library"; followed
authors; refusals that name the profile line; edits of the library file alone; the 0005 → 0006 upgrade.

Every file is a real file under tmp_path and every store a real SQLite file; the papers are the seed pages' (titles
and abstracts, no ids or authors), the Hugging Face Daily Papers fixture (arXiv ids and authors) and small JSONL files.
"""

from __future__ import annotations

import csv
import email
import email.policy
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from digest import daily
from digest.app import App
from digest.models import Interest, LibraryEntry, Paper
from digest.select.authors import matched
from digest.store import Store
from digest.store.subscribers import profile_json
from digest.subscribers.libraries import digest_of, read_library
from digest.subscribers.profiles import FOLLOWED, load_subscribers, parse_profile
from digest.subscribers.roster import export_csv, import_path, roster, sync

from ..conftest import DAY, FIXTURES, SEEDS, cli_env, prime

HF_PAPERS = FIXTURES / "hf_daily_papers_2026-06-12.json"  # 30 real papers with arXiv ids and author lists

# A reader who follows KV-cache work: six seed papers, five with the arXiv ids Zotero records, one without.
KV_LIBRARY = {"SnapKV": "2404.14469", "H_2O": "2306.14048", "Locret": "2410.01805", "CSKV": "2409.10593",
              "ALISA": "2403.17312", "Tangram": None}
KV_WORDS = ("kv cache", "kv-cache", "kvcache", "long-context", "long context", "eviction")
# LLM-written CUDA kernels (for RIS), mixture-of-experts systems (for CSL-JSON): seed papers, by the start of the title.
KERNEL_LIBRARY = ("CUDA-L1", "CUDA-LLM", "CudaForge", "ConCuR", "MultiKernelBench")
KERNEL_WORDS = ("cuda", "kernel")
MOE_LIBRARY = ("FlashMoE", "HybriMoE", "MoETuner", "LSH-MoE")
MOE_WORDS = ("mixture of expert", "mixture-of-expert", "moe")
# LLM agents, as arXiv ids of the Daily Papers fixture (for the plain id list): WebChallenger, TreeSeeker,
# EvoBrowseComp, ToolSense.
AGENT_IDS = ("2606.10423", "2606.11662", "2606.13120", "2606.12451")
AGENT_WORDS = ("agent",)


# -- helpers -----------------------------------------------------------------------------------------------------


def write(path: Path, text: str | bytes) -> Path:
    """`text` written to `path` (text as UTF-8, line breaks as given)."""
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def profile_text(address: str, interest: str, extra: str = "", max_papers: int = 8) -> str:
    """A profile file of one interest whose table is `interest` (TOML lines), as a reader writes one."""
    return (f"# {address}'s profile\nemail = \"{address}\"\nname = \"Reader\"\nmax_papers = {max_papers}\n"
            f"{extra}\n[[interests]]\n{interest}\n")


def line_of(path: Path, key: str) -> int:
    """The 1-based line of the first `key = ...` in a file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, start=1) if line.strip().startswith(f"{key} ="))


def seed(papers: list[Paper], start: str) -> Paper:
    """The stored seed paper whose title starts with `start`."""
    return next(p for p in papers if p.title.startswith(start))


def about(paper: Paper, words: tuple[str, ...]) -> bool:
    text = f"{paper.title} {paper.abstract}".lower()
    return any(word in text for word in words)


def bibtex(papers: list[tuple[Paper, str | None]]) -> str:
    """A Zotero BibTeX export of these papers (arXiv id or None), as Zotero 6 writes an arXiv preprint."""
    blocks = []
    for n, (paper, arxiv_id) in enumerate(papers):
        ids = (f"\turl = {{http://arxiv.org/abs/{arxiv_id}}},\n\tdoi = {{10.48550/arXiv.{arxiv_id}}},\n"
               f"\tnote = {{arXiv:{arxiv_id} [cs]}},\n" if arxiv_id else "\tpublisher = {USENIX Association},\n")
        blocks.append(f"@misc{{paper_{n}_2024,\n\ttitle = {{{paper.title}}},\n{ids}"
                      f"\tabstract = {{{paper.abstract}}},\n\turldate = {{2024-06-01}},\n\tyear = {{2024}},\n"
                      f"\tkeywords = {{Computer Science - Machine Learning}},\n}}\n")
    return "\n".join(blocks)


def ris(papers: list[Paper]) -> str:
    """A Zotero RIS export of these papers (journal articles without ids)."""
    return "".join(f"TY  - JOUR\nTI  - {p.title}\nAU  - Reader, Ada\nAB  - {p.abstract}\nPY  - 2025\n"
                   f"Y2  - 2025/06/0{n + 1}/10:20:30\nER  - \n\n" for n, p in enumerate(papers))


def csl_json(papers: list[Paper]) -> str:
    """A Zotero CSL-JSON export of these papers."""
    items = [{"id": f"http://zotero.org/users/1/items/ITEM{n}", "type": "article-journal", "title": p.title,
              "abstract": p.abstract, "author": [{"family": "Reader", "given": "Ada"}],
              "accessed": {"date-parts": [[2025, 6, n + 1]]}, "issued": {"date-parts": [["2025"]]}}
             for n, p in enumerate(papers)]
    return json.dumps(items, indent=2, ensure_ascii=False)


def id_list(ids: tuple[str, ...]) -> str:
    """A plain list as a reader writes one: comments, versions, an arXiv URL, a DOI the store cannot know."""
    first, second, third, fourth = ids
    return (f"# my reading list\n{first}v2\narXiv:{second}\n\nhttps://arxiv.org/abs/{third}\n{fourth}\n"
            "2606.99999\n10.1145/3600006.3613165\n")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty subscribers folder."""
    path = tmp_path / "subscribers"
    path.mkdir()
    return path


@pytest.fixture
def site(make_config, folder: Path):
    """An App over `folder` with the seed pages ingested on DAY (outbox transport, under tmp_path)."""
    app = App(make_config(subscribers={"dir": str(folder)}))
    app.ingest([SEEDS], seen_on=DAY)
    yield app
    app.close()


# -- 1. a BibTeX library named in a profile ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_zotero_bibtex_library_makes_an_interest_whose_digest_is_on_its_topic(site, folder):
    """A profile naming a Zotero BibTeX export validates, and its digest (composed, and as sent) is mostly KV-cache
    papers, some not in the library, most saying which library paper they are like."""
    papers = site.store.all_papers()
    library = [(seed(papers, start), arxiv_id) for start, arxiv_id in KV_LIBRARY.items()]
    write(folder / "ada.bib", bibtex(library))
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Reading list"\nlibrary = "ada.bib"'))
    checked = load_subscribers(folder)
    assert checked.problems == () and [s.email for s in checked.subscribers] == ["ada@example.org"]
    [interest] = checked.subscribers[0].interests
    assert len(interest.library) == 6 and interest.library_source == str(folder / "ada.bib")
    assert [e.arxiv_id for e in interest.library] == list(KV_LIBRARY.values())
    assert site.profiles.sync().problems == []
    ada = site.profiles.subscriber("ada@example.org")
    assert ada.interests[0].library_key == interest.library_key  # the roster keeps the digest, the store the entries
    assert [e.title for e in site.store.library_entries(interest.library_key)] == [p.title for p, _ in library]
    digest = site.composer.compose(ada, DAY, site.composer.pool(DAY)).digest
    picks = list(digest.items)
    base_rate = sum(about(p, KV_WORDS) for p in papers) / len(papers)
    on_topic = sum(about(item.paper, KV_WORDS) for item in picks) / len(picks)
    assert len(picks) == 8 and on_topic >= 0.6 and on_topic >= 3 * base_rate, (on_topic, base_rate)
    assert [s.name for s in digest.sections] == ["Reading list"]
    owned = {p.title for p, _ in library}
    new = [item for item in picks if item.paper.title not in owned and about(item.paper, KV_WORDS)]
    assert new and any(r.find(" in your library (") > 0 for item in new for r in item.reasons)
    explained = [item for item in picks if any(r.startswith("like “") and r.find("” in your library (") > 0
                                               for r in item.reasons)]
    assert len(explained) >= len(picks) // 2
    named = Counter(r.split("”", 1)[0] for item in picks for r in item.reasons if r.startswith("like “"))
    assert max(named.values()) <= 3  # no library paper names more than three picks: the next nearest, or none
    assert all(re.search(r"\((both on .+|close in meaning)\)$", r) for i in picks for r in i.reasons if "library" in r)
    assert daily.send(site, DAY).count("sent") == 1  # the send run ranks in batches: the same picks
    sent = site.store.received_by_subscriber(DAY + timedelta(days=1), ["ada@example.org"], DAY)
    assert sent == {"ada@example.org": {item.paper.store_id for item in picks}}


def test_an_entry_with_an_arxiv_id_is_the_stored_paper_the_store_knows_by_title(site):
    """An entry with an arXiv id and a title counts as the stored paper of that title when the store has the paper
    without its id (as docs/subscribers.md says: "the stored paper when the store knows its arXiv id or title")."""
    snap = seed(site.store.all_papers(), "SnapKV")
    entry = LibraryEntry(snap.title, "", "2404.14469", None, ("Yuhong Li",), None, 2)
    interest = Interest("Reading list", library=(entry,), library_source="ada.bib", library_key=digest_of([entry]))
    assert site.dense is not None
    [(key, text, paper)] = site.dense.library_papers(interest)
    assert paper is not None and paper.store_id == snap.store_id
    assert text.startswith(snap.title) and snap.abstract[:100] in text


# -- 2. RIS, CSL-JSON and a plain id list --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ris", "csl-json", "ids"])
def test_ris_csl_json_and_an_id_list_each_make_a_working_interest(site, folder, kind, caplog):
    """A RIS, a CSL-JSON export and a plain list of arXiv ids each give an interest whose digest leans to the
    library's topic, says "in your library" and never sends back a paper the reader keeps; ids the store has not seen
    yet are logged with file:line and left out. (The id list is four agent papers on different questions, in a store
    of 227 papers: its best paper not in the library is judged 0.46 likely on topic, under the default floor, so this
    operator lowers `select.min_relevance` to 0.4 to see more.)"""
    papers = site.store.all_papers()
    if kind == "ris":
        name, words, text = "kernels.ris", KERNEL_WORDS, ris([seed(papers, s) for s in KERNEL_LIBRARY])
    elif kind == "csl-json":
        name, words, text = "moe.json", MOE_WORDS, csl_json([seed(papers, s) for s in MOE_LIBRARY])
    else:
        site.ingest([HF_PAPERS], seen_on=DAY)
        site.settings = replace(site.settings, min_relevance=0.4)
        name, words, text = "agents.txt", AGENT_WORDS, id_list(AGENT_IDS)
    library = write(folder / name, text)
    write(folder / "ada.toml", profile_text("ada@example.org", f'name = "Mine"\nlibrary = "{name}"'))
    assert read_library(library).format == kind
    with caplog.at_level(logging.INFO, logger="digest"):
        assert site.profiles.sync().problems == []
    ada = site.profiles.subscriber("ada@example.org")
    stored = site.store.library_entries(ada.interests[0].library_key)
    assert len(stored) == {"ris": 5, "csl-json": 4, "ids": 6}[kind]
    ranked = site.composer.rank(ada, DAY)
    assert 1 <= len(ranked) <= 8 and all(r.passes_floor and r.section == "Mine" for r in ranked)
    kept = {p.key for _, _, p in site.dense.library_papers(ada.interests[0]) if p is not None}  # type: ignore[union-attr]
    assert kept and not kept & {r.paper.key for r in ranked}  # the reader's own papers are not news to them
    stored_papers = site.store.all_papers()
    base_rate = sum(about(p, words) for p in stored_papers) / len(stored_papers)
    share = sum(about(r.paper, words) for r in ranked) / len(ranked)
    assert share >= 2 * base_rate, (base_rate, [r.paper.title for r in ranked])
    assert any(reason.find(" in your library (") > 0 for r in ranked for reason in r.reasons)
    if kind == "ids":
        counted = site.dense.library_papers(ada.interests[0])  # type: ignore[union-attr]
        assert sorted(p.arxiv_id for _, _, p in counted if p is not None) == sorted(AGENT_IDS)
        left_out = [r.getMessage() for r in caplog.records if "not in the store yet" in r.getMessage()]
        assert any(m.startswith(f"{library}:7: 2606.99999 ") for m in left_out), left_out
        assert any(m.startswith(f"{library}:8: 10.1145/3600006.3613165 ") for m in left_out), left_out


# -- 3. a library file that cannot be used -------------------------------------------------------------------------

UNUSABLE = {
    "missing": (None, "cannot read it: No such file or directory"),
    "binary": (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\x00\x00endobj\n",
               "binary content (a NUL byte): not a library export"),
    "unusable": ("@misc{later,\n  year = {2024},\n  note = {read later},\n}\n@misc{also, howpublished = {print}}\n",
                 "no usable entry (each needs a title, an arXiv id or a DOI)"),
}


def unusable_site(folder: Path) -> dict[str, Path]:
    """A profile for each unusable library (its `library` line on a different line each time), and a good one."""
    profiles = {}
    for n, (name, (content, _)) in enumerate(UNUSABLE.items()):
        if content is not None:
            write(folder / f"{name}.bib", content)
        padding = "# a comment line\n" * n
        profiles[name] = write(folder / f"{name}.toml", profile_text(
            f"{name}@example.org", f'name = "Mine"\n{padding}library = "{name}.bib"'))
    write(folder / "bob.toml", profile_text("bob@example.org", 'name = "Kernels"\nkeywords = ["CUDA", "kernel"]'))
    return profiles


@pytest.mark.slow
def test_an_unusable_library_refuses_its_profile_on_the_library_line_and_the_others_are_sent(site, folder, tmp_path):
    """A library file that is missing, binary or without a usable entry refuses its profile with a problem naming the
    profile file, the `library` line and what is wrong; the other profile still syncs and is sent."""
    profiles = unusable_site(folder)
    problems = {Path(p.path).stem: p for p in site.profiles.sync().problems}
    assert sorted(problems) == sorted(UNUSABLE)
    for name, (_, reason) in UNUSABLE.items():
        problem = problems[name]
        assert (problem.path, problem.line) == (str(profiles[name]), line_of(profiles[name], "library"))
        assert str(folder / f"{name}.bib") in problem.message and reason in problem.message, problem
        assert "\n" not in str(problem)
    assert load_subscribers(folder).problems == tuple(sorted(problems.values(), key=lambda p: p.path))
    report = daily.send(site, DAY)
    assert report.count("sent") == 1 and report.invalid_profiles == 3
    assert [p.name for p in (tmp_path / "outbox" / DAY.isoformat()).glob("*.eml")] == ["bob@example.org.eml"]


def test_a_profile_refused_for_its_library_is_taken_once_the_library_file_is_fixed(site, folder):
    """Creating the missing library file (or making the binary one a real export) lets the next sync take the profile,
    without the profile file being touched."""
    unusable_site(folder)
    assert len(site.profiles.sync().problems) == 3
    snap = seed(site.store.all_papers(), "SnapKV")
    for name in UNUSABLE:
        write(folder / f"{name}.bib", bibtex([(snap, "2404.14469")]))
    report = site.profiles.sync()
    assert report.problems == []
    assert set(site.store.subscribers_by_email([f"{n}@example.org" for n in UNUSABLE])) == {
        f"{n}@example.org" for n in UNUSABLE}


# -- 4. entries that name no paper ---------------------------------------------------------------------------------


def test_entries_without_title_id_or_doi_are_logged_with_file_and_line_and_the_rest_count(tmp_path, folder, caplog):
    """Entries with no title, arXiv id or DOI are each logged as `file:line: not usable` and skipped; the others are
    the interest's library, kept in the store."""
    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    text = ("@misc{good1, title = {SnapKV: LLM Knows What You are Looking for Before Generation}}\n"  # line 1
            "@misc{junk1,\n  year = {2023},\n  note = {to read},\n}\n"  # line 2
            "@article{good2, doi = {10.1103/PhysRevLett.116.061102}}\n"  # line 6
            "@misc{good3, eprint = {2306.14048}, archivePrefix = {arXiv}}\n"  # line 7
            "\n@misc{junk2, keywords = {LLM}}\n")  # line 9
    bib = write(folder / "lib.bib", text)
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "lib.bib"'))
    with caplog.at_level(logging.WARNING, logger="digest"):
        report = sync(store, folder)
    assert report.problems == []
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"{bib}:{line}: not usable: no title, arXiv id or DOI" for line in (2, 9)]
    [interest] = store.subscribers_by_email(["ada@example.org"])["ada@example.org"].interests
    entries = store.library_entries(interest.library_key)
    assert [(e.line, e.title[:6], e.arxiv_id, e.doi) for e in entries] == [
        (1, "SnapKV", None, None), (6, "", None, "10.1103/physrevlett.116.061102"), (7, "", "2306.14048", None)]
    store.close()


# -- 5. editing the library file alone -----------------------------------------------------------------------------


def test_editing_only_the_library_file_makes_the_next_sync_read_the_profile_again(site, folder):
    """A new content of the .bib (the profile untouched) is read by the next sync: a new library_key, its entries in
    the store, and a digest on the new topic; deleting the file refuses the profile on its `library` line."""
    papers = site.store.all_papers()
    bib = write(folder / "ada.bib", bibtex([(seed(papers, s), i) for s, i in KV_LIBRARY.items()]))
    toml = write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "ada.bib"'))
    assert site.profiles.sync().parsed == 1
    before = site.profiles.subscriber("ada@example.org").interests[0].library_key
    assert site.profiles.sync().parsed == 0  # nothing changed: nothing read
    kernels = [seed(papers, s) for s in KERNEL_LIBRARY]
    write(bib, bibtex([(p, None) for p in kernels]) + "\n")
    profile_stamp = toml.stat().st_mtime_ns
    report = site.profiles.sync()
    assert (report.parsed, report.problems) == (1, []) and toml.stat().st_mtime_ns == profile_stamp
    ada = site.profiles.subscriber("ada@example.org")
    after = ada.interests[0].library_key
    assert after != before
    assert [e.title for e in site.store.library_entries(after)] == [p.title for p in kernels]
    ranked = site.composer.rank(ada, DAY)
    assert ranked and sum(about(r.paper, KERNEL_WORDS) for r in ranked) >= 0.6 * len(ranked)
    assert not any(about(r.paper, ("kv cache",)) for r in ranked[:3])
    bib.unlink()
    [problem] = site.profiles.sync().problems
    assert (problem.path, problem.line) == (str(toml), line_of(toml, "library"))
    assert "cannot read it" in problem.message
    assert site.store.subscribers_by_email(["ada@example.org"]) == {}


def test_forgetting_a_reader_erases_the_libraries_they_had_before_an_edit(site, folder):
    """After a reader edits their library and is then forgotten, no entry of either version stays in the store."""
    from digest.subscribers.privacy import forget

    papers = site.store.all_papers()
    bib = write(folder / "ada.bib", bibtex([(seed(papers, s), i) for s, i in KV_LIBRARY.items()]))
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "ada.bib"'))
    site.profiles.sync()
    first = site.profiles.subscriber("ada@example.org").interests[0].library_key
    write(bib, bibtex([(seed(papers, s), None) for s in KERNEL_LIBRARY]))
    site.profiles.sync()
    second = site.profiles.subscriber("ada@example.org").interests[0].library_key
    forget(site, "ada@example.org")
    assert site.store.library_entries(second) == ()
    assert site.store.library_entries(first) == ()


# -- 6. CSV import and export --------------------------------------------------------------------------------------


def csv_site(tmp_path: Path) -> Path:
    """A CSV list with a library column (relative to the CSV) and an authors column, and the library it names."""
    lists = tmp_path / "lists"
    (lists / "libraries").mkdir(parents=True)
    write(lists / "libraries" / "ada.bib",
          "@misc{a, title = {SnapKV: LLM Knows What You are Looking for Before Generation}, eprint = {2404.14469}}\n"
          "@misc{b, title = {H_2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language Models}}\n")
    return write(lists / "list.csv", (
        "email,name,timezone,send_at,frequency,max_papers,exclude,interest,keywords,description,seed_papers,weight,"
        "library,authors\n"
        "ada@example.org,Ada,Europe/London,07:30,daily,10,autonomous driving,LLM inference,KV cache;speculative "
        "decoding,,,1,,\n"
        "ada@example.org,,,,,,,GPU kernels,CUDA;Triton,,,0.8,,\"Tri Dao;Hwang, Jayoo\"\n"
        "ada@example.org,,,,,,,My reading list,,,,1,libraries/ada.bib,\n"
        "bob@example.org,Bob,UTC,08:00,daily,5,,Missing library,,,,1,libraries/nope.bib,\n"
        "cy@example.org,Cy,UTC,09:00,weekly:mon,10,,,,,,,,\n"))


def test_csv_import_reads_library_and_authors_columns_and_export_writes_them_back(tmp_path):
    """`library` (relative to the CSV) and `authors` (';'-separated) are imported, a missing library is a problem on
    its row, and export_csv writes both columns back in a shape another store imports to the same profiles."""
    listing = csv_site(tmp_path)
    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    report = import_path(store, listing)
    assert report.imported == 2
    [problem] = report.problems
    assert (problem.path, problem.line) == (str(listing), 5)
    assert "interest 1:" in problem.message and "nope.bib: cannot read it" in problem.message
    ada = store.subscribers_by_email(["ada@example.org"])["ada@example.org"]
    kernels, mine = ada.interests[1], ada.interests[2]
    assert kernels.authors == ("Tri Dao", "Hwang, Jayoo") and kernels.weight == 0.8
    assert mine.library_source == str(listing.parent / "libraries" / "ada.bib")
    assert [e.arxiv_id for e in store.library_entries(mine.library_key)] == ["2404.14469", None]
    out = io.StringIO()
    assert export_csv(store, out, tmp_path) == 2  # written to tmp_path: the library relative to it
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [(r["interest"], r["library"], r["authors"]) for r in rows if r["email"] == "ada@example.org"] == [
        ("LLM inference", "", ""), ("GPU kernels", "", "Tri Dao;Hwang, Jayoo"),
        ("My reading list", "lists/libraries/ada.bib", "")]
    exported = write(tmp_path / "exported.csv", out.getvalue())
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    again = import_path(other, exported)
    assert again.problems == [] and again.imported == 2
    assert {s.email: profile_json(s) for s in roster(store).subscribers} == {
        s.email: profile_json(s) for s in roster(other).subscribers}
    store.close()
    other.close()


def test_an_export_of_a_list_imported_by_a_relative_path_imports_again(tmp_path, monkeypatch):
    """`digest subscribers import lists/list.csv` (a relative path, as typed) then an export saved beside it imports
    again with the same library."""
    csv_site(tmp_path)
    monkeypatch.chdir(tmp_path)
    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    assert import_path(store, Path("lists/list.csv")).imported == 2
    out = io.StringIO()
    export_csv(store, out, Path("lists"))  # as `digest subscribers export --out lists/exported.csv` writes it
    exported = write(tmp_path / "lists" / "exported.csv", out.getvalue())
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    report = import_path(other, exported)
    store.close()
    other.close()
    assert report.problems == [] and report.imported == 2


# -- 7. followed authors ---------------------------------------------------------------------------------------------

AUTHOR_PAPERS = [  # off-topic papers by a followed author, written as sources write names
    ("2606.90001", "Pollination networks of alpine meadows under warming",
     "We survey bumblebee visits to alpine flowers over ten summers and model how warming shifts pollination "
     "networks.", ["Tri Dao", "Ana Ruiz"]),
    ("2606.90002", "Coral reef soundscapes as indicators of recovery",
     "Passive acoustic recordings of reefs after bleaching show that fish choruses return before coral cover does.",
     ["Mei Lin", "T. Dao"]),
    ("2606.90003", "Medieval grain prices in the Low Countries",
     "We assemble a series of grain prices from monastery ledgers and relate famines to weather records.",
     ["Thanh Dao"]),
    ("2606.90004", "Speculative decoding with a tiny draft model for LLM serving",
     "Speculative decoding lets a small draft model propose tokens that the large model verifies in parallel, "
     "cutting LLM serving latency; we study draft acceptance rates.", ["Dao, Tri"]),
]
BY_TRI_DAO = {"2606.90001", "2606.90002", "2606.90004"}


@pytest.fixture
def authored(site, tmp_path):
    """The site with four papers of authors named Dao ingested on DAY (papers JSONL with author lists)."""
    lines = [json.dumps({"id": i, "title": t, "abstract": a, "authors": names}) for i, t, a, names in AUTHOR_PAPERS]
    report = site.ingest([write(tmp_path / "dao.jsonl", "\n".join(lines) + "\n")], seen_on=DAY)
    assert report.new == 4 and report.errors == []
    return site


@pytest.mark.slow
def test_a_followed_authors_papers_are_always_picked_and_say_so(authored, folder):
    """Following "Tri Dao" in an interest picks his papers written as "Tri Dao", "T. Dao" and "Dao, Tri", even off
    the keywords, each with "by Tri Dao, whom you follow"; "Thanh Dao"'s paper is not picked."""
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Serving"\nkeywords = ["speculative decoding"]\n'
                                                               'authors = ["Tri Dao"]', max_papers=4))
    authored.profiles.sync()
    ada = authored.profiles.subscriber("ada@example.org")
    assert ada.interests[0].authors == ("Tri Dao",)
    picks = list(authored.composer.compose(ada, DAY, authored.composer.pool(DAY)).digest.items)
    assert len(picks) == 4
    by_id = {item.paper.arxiv_id: item for item in picks}
    assert set(by_id) >= BY_TRI_DAO and "2606.90003" not in by_id
    assert all("by Tri Dao, whom you follow" in by_id[i].reasons for i in BY_TRI_DAO)
    assert all(not any("whom you follow" in r for r in item.reasons) for item in picks
               if item.paper.arxiv_id not in BY_TRI_DAO)
    ranked = authored.composer.rank(ada, DAY, limit=300)
    thanh = next(r for r in ranked if r.paper.arxiv_id == "2606.90003")
    assert not thanh.passes_floor and not any("follow" in reason for reason in thanh.reasons)


@pytest.mark.slow
def test_a_top_level_authors_list_makes_an_authors_you_follow_section_in_the_sent_digest(authored, folder, tmp_path):
    """A profile's own `authors` list becomes the interest "Authors you follow", whose section in the sent email
    holds the followed author's off-topic papers."""
    toml = write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Serving"\nkeywords = ["speculative '
                                                                      'decoding"]', 'authors = ["Tri Dao"]\n'))
    subscriber, problems = parse_profile(toml)
    assert problems == [] and subscriber is not None
    assert [(i.name, i.authors, i.keywords) for i in subscriber.interests] == [
        ("Serving", (), ("speculative decoding",)), (FOLLOWED, ("Tri Dao",), ())]
    report = daily.send(authored, DAY)
    assert report.count("sent") == 1
    ada = authored.profiles.subscriber("ada@example.org")
    digest = authored.composer.compose(ada, DAY, authored.composer.pool(DAY)).digest
    followed = next(s for s in digest.sections if s.name == FOLLOWED)
    assert {"2606.90001", "2606.90002"} <= {item.paper.arxiv_id for item in followed.items}
    assert all("by Tri Dao, whom you follow" in item.reasons for item in followed.items)
    message = email.message_from_bytes((tmp_path / "outbox" / DAY.isoformat() / "ada@example.org.eml").read_bytes(),
                                       policy=email.policy.default)
    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert FOLLOWED in text and "Pollination networks of alpine meadows" in text


@pytest.mark.slow
def test_a_followed_authors_paper_says_so_whichever_section_it_is_in(authored, folder):
    """A paper by a followed author that the reader's keywords also match still says "by Tri Dao, whom you follow"
    (docs/subscribers.md: "a paper by a followed author always passes the floor and its reason says so")."""
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Serving"\nkeywords = ["speculative decoding"]',
                                            'authors = ["Tri Dao"]\n'))
    authored.profiles.sync()
    ada = authored.profiles.subscriber("ada@example.org")
    digest = authored.composer.compose(ada, DAY, authored.composer.pool(DAY)).digest
    item = next(i for i in digest.items if i.paper.arxiv_id == "2606.90004")
    assert "by Tri Dao, whom you follow" in item.reasons


@pytest.mark.parametrize(("written", "follows"), [
    ("Tri Dao", True), ("Dao, Tri", True), ("T. Dao", True), ("T Dao", True), ("tri  DAO", True),
    ("Dao, T.", True), ("Thanh Dao", False), ("Tri Nguyen", False), ("Dao", False), ("", False)])
def test_author_names_match_on_full_name_or_initial_but_never_another_first_name(written, follows):
    """"Dao, Tri" and "T. Dao" are "Tri Dao" (order, case, spaces, an initial); "Thanh Dao" and a bare "Dao" are not."""
    assert matched(["Tri Dao"], ["Someone Else", written]) == (["Tri Dao"] if follows else [])


def test_author_names_match_without_accents_and_with_the_name_followed_as_written():
    """Accents and "Last, First" on either side are ignored, and `matched` returns the followed names as written."""
    assert matched(["Raphael Baena", "Dao, Tri"], ["Raphaël Baena", "Tri Dao"]) == ["Raphael Baena", "Dao, Tri"]
    assert matched(["Boglárka Ecsedi"], ["B. Ecsedi"]) == ["Boglárka Ecsedi"]


# -- 8. the 0005 → 0006 upgrade ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_0005_database_upgrades_to_0006_and_then_stores_a_library_profile(tmp_path, folder, model_rows, make_config):
    """A store made at schema 0005 is refused until upgraded; `schema.upgrade` brings it to 0006 (and on to the
    newest) with its rows, and a library profile is then stored (entries in `libraries`, the file in
    `profile_files.libraries`)."""
    import sqlalchemy as sa
    from alembic import command

    from digest.errors import StoreError
    from digest.store import schema
    from digest.store.engine import make_engine

    url = f"sqlite:///{tmp_path / 'digest.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        command.upgrade(schema.alembic_config(conn), "0005")
        assert schema.current(conn) == "0005"
        assert "libraries" not in sa.inspect(conn).get_table_names()
        conn.execute(sa.text("INSERT INTO subscribers (email_key, email, source, path, timezone, send_at, frequency, "
                             "profile, updated_at) VALUES ('cy@example.org', 'cy@example.org', 'import', NULL, 'UTC', "
                             "'09:00', 'daily', :profile, '2026-06-01 00:00:00')"),
                     {"profile": json.dumps({"email": "cy@example.org", "name": "Cy", "timezone": "UTC",
                                             "send_at": "09:00", "frequency": "daily", "max_papers": 10,
                                             "exclude": [], "interests": []})})
    with pytest.raises(StoreError, match=f"revision 0005.*needs {schema.HEAD}: run `digest db upgrade`"):
        Store(url)
    assert schema.upgrade(engine) == ("0005", schema.HEAD)  # through 0006 (libraries) to the newest
    engine.dispose()
    prime(url, model_rows)  # the text model's vectors of the seeds, as a first run after the upgrade would have them
    app = App(make_config(subscribers={"dir": str(folder)}))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        bib = write(folder / "ada.bib", bibtex([(seed(app.store.all_papers(), s), i) for s, i in KV_LIBRARY.items()]))
        write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "ada.bib"'))
        assert app.profiles.sync().problems == []
        [interest] = app.profiles.subscriber("ada@example.org").interests
        assert len(app.store.library_entries(interest.library_key)) == 6
        [state] = app.store.file_states().values()
        assert [path for path, _, _ in state.libraries] == [str(bib)]
        assert {s.email for s in app.store.iter_subscribers()} == {"ada@example.org", "cy@example.org"}
        ranked = app.composer.rank(app.profiles.subscriber("ada@example.org"), DAY)
        assert any(reason.find(" in your library (") > 0 for r in ranked for reason in r.reasons)
    finally:
        app.close()


# -- 9. hostile library files --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_huge_or_deeply_nested_library_is_refused_fast_in_one_line_and_the_others_go_through(site, folder, tmp_path):
    """A 25 MB library and a CSL-JSON nested 100,000 deep each refuse their profile with a one-line problem on its
    `library` line, within a second or so, and the other subscriber is still sent."""
    entry = "@misc{k, title = {Padding}, abstract = {" + "x" * 1000 + "}}\n"
    write(folder / "huge.bib", entry * (25_000_000 // len(entry) + 1))
    write(folder / "deep.json", "[" * 100_000 + "]" * 100_000)
    huge = write(folder / "huge.toml", profile_text("huge@example.org", 'name = "Mine"\nlibrary = "huge.bib"'))
    deep = write(folder / "deep.toml", profile_text("deep@example.org", 'name = "Mine"\nlibrary = "deep.json"'))
    write(folder / "bob.toml", profile_text("bob@example.org", 'name = "Kernels"\nkeywords = ["CUDA", "kernel"]'))
    assert (folder / "huge.bib").stat().st_size > 25_000_000
    for path, reason in ((huge, "larger than 20,000,000 bytes"), (deep, "JSON nested deeper than 12 levels")):
        start = time.perf_counter()
        subscriber, problems = parse_profile(path)
        took = time.perf_counter() - start
        assert subscriber is None and took < 1.5, took
        [problem] = problems
        assert problem.line == line_of(path, "library") and reason in problem.message
        assert "\n" not in str(problem) and len(str(problem)) < 300
    start = time.perf_counter()
    report = daily.send(site, DAY)
    assert time.perf_counter() - start < 10
    assert report.count("sent") == 1 and report.invalid_profiles == 2
    assert [p.name for p in (tmp_path / "outbox" / DAY.isoformat()).glob("*.eml")] == ["bob@example.org.eml"]


def test_a_library_that_is_a_named_pipe_is_refused_without_waiting(folder):
    """A `library` naming a FIFO is refused at once (not a regular file) instead of blocking the profile's reading."""
    fifo = folder / "lib.bib"
    os.mkfifo(fifo)
    toml = write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "lib.bib"'))
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(parse_profile(toml)), daemon=True)
    reader.start()
    reader.join(2.0)
    blocked = reader.is_alive()
    if blocked:  # let it go: a writer that opens and closes the pipe gives it an empty file
        os.close(os.open(fifo, os.O_WRONLY))
        reader.join(5.0)
    assert not blocked, "parse_profile was still waiting on the pipe after 2 s"
    [(subscriber, problems)] = found  # type: ignore[misc]
    assert subscriber is None and [p.line for p in problems] == [line_of(toml, "library")]


# -- `digest subscribers check` as a user runs it ------------------------------------------------------------------


def test_subscribers_check_prints_library_problems_as_file_line_and_exits_1(tmp_path, folder):
    """`digest subscribers check` (no database) prints the refused profile's `library` line and what is wrong, warns
    of a skipped entry with its file:line, counts the valid profile, and exits 1."""
    write(folder / "ada.bib", "@misc{a, title = {SnapKV: LLM Knows What You are Looking for Before Generation}}\n"
                              "@misc{b,\n  year = {2024},\n}\n")
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "ada.bib"'))
    bad = write(folder / "bob.toml", profile_text("bob@example.org", 'name = "Mine"\nlibrary = "elsewhere/bob.bib"'))
    result = subprocess.run([sys.executable, "-m", "digest", "subscribers", "check"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env=cli_env())
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "1 valid, 1 invalid profiles"
    [problem] = lines[:-1]
    assert re.fullmatch(rf"\S*subscribers/bob\.toml:{line_of(bad, 'library')}: interest 1: "
                        r"\S*elsewhere/bob\.bib: cannot read it: No such file or directory", problem), problem
    assert re.search(r"subscribers/ada\.bib:2: not usable: no title, arXiv id or DOI", result.stderr), result.stderr
    assert not (tmp_path / "digest.db").exists()


def test_library_warnings_are_logged_each_time_the_profile_is_read_not_on_every_sync(site, folder, caplog):
    """A library's skipped entries are logged when its profile is read, and an unchanged profile is not read again."""
    write(folder / "ada.bib", "@misc{a, title = {SnapKV: LLM Knows What You are Looking for Before Generation}}\n"
                              "@misc{b, year = {2024}}\n")
    write(folder / "ada.toml", profile_text("ada@example.org", 'name = "Mine"\nlibrary = "ada.bib"'))
    with caplog.at_level(logging.WARNING, logger="digest"):
        site.profiles.sync()
        first = [r.getMessage() for r in caplog.records]
        caplog.clear()
        site.profiles.sync()
    assert first == [f"{folder / 'ada.bib'}:2: not usable: no title, arXiv id or DOI"]
    assert caplog.records == []
