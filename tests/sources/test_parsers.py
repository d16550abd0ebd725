"""Tests for digest.sources: the four formats, malformed records, format detection and file handling."""

from __future__ import annotations

import gzip
import html
import json
import shutil
from datetime import date
from itertools import islice
from pathlib import Path

import pytest

from digest.models import Paper, ParseResult, normalise_title
from digest.sources import (
    ARXIV_FEED,
    HF_API_JSON,
    HF_PAGE_HTML,
    HF_PAGE_TEXT,
    JSONL,
    SourceError,
    UnknownFormat,
    detect_format,
    iter_paths,
    parse_file,
    parse_text,
)

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "seeds"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
API_JSON = FIXTURES / "hf_daily_papers_2026-06-12.json"
HTML_PAGE = FIXTURES / "hf_page.html"
# The first 300 lines of ../shared/data/arxiv_sample.jsonl.gz (arXiv metadata, CC0), kept here so CI has them.
ARXIV_SAMPLE = FIXTURES / "arxiv_sample_head.jsonl.gz"
# Late enough that every seed page date resolves to the year its entries' explicit dates imply
# (page 004 "Jun 19" lists papers from Dec 2025, so it is Jun 19, 2026).
SEEN = date(2026, 8, 21)
API_DAY = date(2026, 6, 13)


def seed_result(name: str) -> ParseResult:
    """The parse of the one seed page whose file name starts with `name`."""
    (path,) = SEEDS.glob(f"{name}_*.txt")
    return parse_file(path, seen_on=SEEN)


def by_title(result: ParseResult, title: str) -> Paper:
    """The one paper of `result` with exactly `title`."""
    (paper,) = [paper for paper in result.papers if paper.title == title]
    return paper


def fixture_source(name: str) -> str:
    """The source name errors use for a fixture file."""
    return str(FIXTURES / name)


def page(*lines: str) -> str:
    """Daily Papers page text: the real header, then `lines` separated by blank lines."""
    header = ["new", "Get trending papers in your email inbox!", "Subscribe", "Daily Papers"]
    return "\n\n".join([*header, "byAK and the research community", *lines]) + "\n"


# Daily Papers page text


def test_seed_pages_hold_284_entries_of_197_distinct_papers() -> None:
    """The five seed pages parse into 284 entries of 197 papers distinct by normalised title, with no errors."""
    results = [parse_file(path, seen_on=SEEN) for path in sorted(SEEDS.glob("*.txt"))]
    papers = [paper for result in results for paper in result.papers]
    assert len(results) == 5
    assert [error for result in results for error in result.errors] == []
    assert len(papers) == 284
    assert len({normalise_title(paper.title) for paper in papers}) == 197


def test_authors_meta_block_gives_count_date_and_upvotes() -> None:
    """A '• N authors' / '·' / 'Apr 22, 2024 2' block gives the author count, the date and the upvotes."""
    paper = by_title(seed_result("002"), "SnapKV: LLM Knows What You are Looking for Before Generation")
    assert (paper.n_authors, paper.published, paper.upvotes) == (9, date(2024, 4, 22), 2)
    assert paper.organization is None and paper.arxiv_id is None
    assert paper.abstract.startswith("Large Language Models (LLMs) have made remarkable progress")


def test_date_without_upvote_count_leaves_upvotes_unknown() -> None:
    """A meta block whose date line has no count gives upvotes None, not 0."""
    paper = seed_result("000").papers[0]
    assert paper.title.startswith("CE-SSL: Computation-Efficient Semi-Supervised Learning")
    assert (paper.n_authors, paper.published, paper.upvotes) == (7, date(2024, 6, 20), None)


def test_organisation_line_gives_its_display_name() -> None:
    """An organisation line '<slug> <Display Name>' gives the display name and no author count."""
    result = seed_result("000")
    paper = by_title(
        result, "CUDA-L2: Surpassing cuBLAS Performance for Matrix Multiplication through Reinforcement Learning"
    )
    assert (paper.organization, paper.n_authors) == ("DeepReinforce", None)
    assert (paper.published, paper.upvotes) == (date(2025, 12, 2), 2)
    zyphra = [paper.organization for paper in result.papers if paper.title.startswith("Training Foundation Models on")]
    assert zyphra == ["Zyphra"]


def test_entry_without_meta_block_is_kept_and_the_next_entry_still_parsed() -> None:
    """An entry with only a title and an abstract has no date, authors or upvotes, and does not disturb the next one."""
    result = seed_result("001")
    titles = [paper.title for paper in result.papers]
    lone = by_title(result, "Rolling Forcing: Autoregressive Long Video Diffusion in Real Time")
    following = result.papers[titles.index(lone.title) + 1]
    assert (lone.published, lone.upvotes, lone.n_authors, lone.organization) == (None, None, None, None)
    assert lone.abstract and not lone.abstract.startswith("Nexus")
    assert following.title == "Nexus:Proactive Intra-GPU Disaggregation of Prefill and Decode in LLM Serving"
    assert following.published == date(2025, 7, 9)


def test_page_without_any_meta_block_pairs_titles_and_abstracts() -> None:
    """A page whose entries all lack meta blocks still yields one paper per title/abstract pair."""
    result = seed_result("003")
    assert len(result.papers) == 93 and result.errors == ()
    last = result.papers[-1]
    assert last.title == "A Hardware-Aware System for Accelerating Deep Neural Network Optimization"
    assert last.abstract.startswith("Recent advances in Neural Architecture Search (NAS)")
    assert all(paper.published is None for paper in result.papers)


def test_page_date_is_the_latest_such_day_on_or_before_seen_on() -> None:
    """Each seed page's 'Mon D' date is the latest such day on or before seen_on, and its entries' listed_on."""
    listed = {
        name: {paper.listed_on for paper in seed_result(name).papers} for name in ("000", "001", "002", "003", "004")
    }
    assert listed == {
        "000": {date(2026, 1, 5)},
        "001": {date(2025, 12, 11)},
        "002": {date(2026, 2, 9)},
        "003": {date(2026, 8, 20)},
        "004": {date(2026, 6, 19)},
    }


def test_implied_year_entry_dates_resolve_against_the_page_date() -> None:
    """'Nov 27 3' and 'Jan 7' on the Dec 11, 2025 page are the latest such days on or before it."""
    result = seed_result("001")
    z_image = by_title(
        result, "Z-Image: An Efficient Image Generation Foundation Model with Single-Stream Diffusion Transformer"
    )
    frontier = by_title(result, "Scaling Large Language Model Training on Frontier with Low-Bandwidth Partitioning")
    assert (z_image.organization, z_image.published, z_image.upvotes) == ("Tongyi-MAI", date(2025, 11, 27), 3)
    assert frontier.published == date(2025, 1, 7)
    # The same paper carries the explicit "Jan 7, 2025" on the Jan 5 page.
    assert by_title(seed_result("000"), frontier.title).published == date(2025, 1, 7)


def test_implied_year_crosses_new_year() -> None:
    """On a 'Jan 5' page, an entry dated 'Dec 30 4' is from the previous December."""
    text = page("Jan 5", "A Paper", "Its abstract.", "  • 2 authors\n·\nDec 30 4")
    result = parse_text(text, "page.txt", seen_on=date(2026, 1, 10))
    (paper,) = result.papers
    assert (paper.listed_on, paper.published, paper.upvotes) == (date(2026, 1, 5), date(2025, 12, 30), 4)


def test_implied_february_29_goes_back_to_a_leap_year() -> None:
    """'Feb 29' without a year is the latest Feb 29 on or before the page date."""
    text = page("Mar 1", "Leap Paper", "Its abstract.", "  • 1 authors\n·\nFeb 29")
    (paper,) = parse_text(text, "page.txt", seen_on=date(2027, 3, 2)).papers
    assert (paper.listed_on, paper.published, paper.n_authors) == (date(2027, 3, 1), date(2024, 2, 29), 1)


def test_malformed_page_entries_are_reported_with_file_line_and_skipped() -> None:
    """Each malformed entry gives 'file:line: reason' at the line its entry starts, and the good entries survive."""
    result = parse_file(FIXTURES / "page_malformed.txt", seen_on=date(2026, 3, 10))
    source = fixture_source("page_malformed.txt")
    assert [str(error) for error in result.errors] == [
        f"{source}:21: '·' is not followed by a date like 'Jun 20, 2024' (found 'Someday 2')",
        f"{source}:29: no abstract line after the title",
        f"{source}:35: authors line '• many authors' has no author count",
        f"{source}:43: title is 567 characters long (over 500): is the title line missing?",
    ]
    assert [paper.title for paper in result.papers] == [
        "Good Paper With Authors",
        "Organisation Paper With Spaces",
        "Last Paper Without Meta",
    ]
    first, organisation, last = result.papers
    assert (first.published, first.upvotes, first.n_authors) == (date(2026, 2, 27), 5, 3)
    assert (organisation.organization, organisation.published) == ("Acme Research Lab", date(2024, 1, 2))
    assert (last.abstract, last.listed_on) == ("Its abstract, and nothing after it.", date(2026, 3, 3))


def test_page_without_a_date_uses_seen_on_and_says_so() -> None:
    """Page text with no page date lists its entries on seen_on and reports the missing date."""
    text = page("A Paper", "Its abstract.", "  • 2 authors\n·\nMay 1, 2026 3")
    result = parse_text(text, "nodate.txt", seen_on=date(2026, 5, 3))
    assert [paper.listed_on for paper in result.papers] == [date(2026, 5, 3)]
    assert [str(error) for error in result.errors] == [
        "nodate.txt:11: no page date (like 'Jan 5') after the header; using 2026-05-03"
    ]


def test_meta_block_with_no_title_and_a_lone_middle_dot_are_reported() -> None:
    """A meta block in place of a title, and a '·' with nothing after it, are errors; the entry between survives."""
    text = page(
        "Jan 5",
        "  • 3 authors\n·\nJan 1, 2026",
        "Good Paper",
        "Good abstract.",
        "Broken Paper",
        "Its abstract.",
        "org Org\n·",
    )
    result = parse_text(text, "p.txt", seen_on=date(2026, 1, 6))
    assert [paper.title for paper in result.papers] == ["Good Paper"]
    assert [str(error) for error in result.errors] == [
        "p.txt:13: authors/date block '• 3 authors' has no title and abstract before it",
        "p.txt:21: '·' is not followed by a date",
    ]


# Daily Papers API JSON


def test_api_json_gives_thirty_papers_with_ids_and_urls() -> None:
    """The real API response gives its 30 papers, with arXiv ids, Daily Papers URLs and the listing day."""
    result = parse_file(API_JSON, seen_on=API_DAY)
    assert len(result.papers) == 30 and result.errors == ()
    assert result.papers[0].arxiv_id == "2606.00467"
    assert result.papers[-1].arxiv_id == "2606.13106"
    assert all(paper.url == f"https://huggingface.co/papers/{paper.arxiv_id}" for paper in result.papers)
    assert {paper.listed_on for paper in result.papers} == {date(2026, 6, 12)}


def test_api_json_row_fields() -> None:
    """A row gives authors, upvotes, comments, keywords, AI summary, organisation, GitHub URL and publication day."""
    result = parse_file(API_JSON, seen_on=API_DAY)
    paper = by_title(result, "MiniMax Sparse Attention")
    assert paper.arxiv_id == "2606.13392"
    assert (len(paper.authors), paper.authors[0], paper.n_authors) == (11, "Xunhao Lai", 11)
    assert (paper.upvotes, paper.comments, paper.published) == (103, 4, date(2026, 6, 11))
    assert paper.keywords[:2] == ("sparse attention", "Grouped Query Attention")
    assert paper.summary is not None and paper.summary.startswith("MiniMax Sparse Attention enables")
    assert (paper.organization, paper.github_url) == ("MiniMax", "https://github.com/MiniMax-AI/MSA")


def test_api_json_organisation_prefers_fullname_and_reads_project_page() -> None:
    """The organisation is its full name, and projectPage becomes the project URL."""
    result = parse_file(API_JSON, seen_on=API_DAY)
    caltech = result.papers[0]
    assert caltech.organization == "California institute of technology"
    assert caltech.authors == ("Etienne Casanova", "Rafal Kocielnik", "R. Michael Alvarez")
    michigan = [paper for paper in result.papers if paper.arxiv_id == "2606.13594"][0]
    assert michigan.project_url == "https://chicychen.github.io/dense-hetero-latent-mas/"
    assert sum(paper.organization is None for paper in result.papers) == 14


def test_malformed_api_rows_are_reported_with_index_and_line() -> None:
    """Rows that are not objects or lack a title or a valid id give 'file:line: row N: reason'; good rows are kept."""
    result = parse_file(FIXTURES / "api_malformed.json", seen_on=API_DAY)
    source = fixture_source("api_malformed.json")
    assert [str(error) for error in result.errors] == [
        f"{source}:3: row 1: expected an object, found int",
        f"{source}:4: row 2: no title",
        f"{source}:5: row 3: no paper id",
        f"{source}:6: row 4: paper id 'not-an-id' is not an arXiv id",
    ]
    first, second = result.papers
    assert (first.arxiv_id, first.authors, first.upvotes, first.comments) == ("2606.00001", ("Ada Lovelace",), 4, 1)
    assert (second.arxiv_id, second.title, second.organization) == ("2606.00003", "Second Good Row", "acme")
    assert second.listed_on == API_DAY


def test_invalid_api_json_gives_one_error_and_no_papers() -> None:
    """JSON that does not parse gives one error at the line the decoder stopped, and no papers."""
    result = parse_file(FIXTURES / "api_invalid.json", seen_on=API_DAY)
    assert result.papers == ()
    assert [str(error) for error in result.errors] == [
        f"{fixture_source('api_invalid.json')}:4: invalid JSON: Expecting ',' delimiter (column 1)"
    ]


def test_api_json_object_holding_rows_is_read_as_api_json() -> None:
    """An object with a 'dailyPapers' list, or any list of rows with a 'paper', is read as API JSON."""
    rows = json.loads(API_JSON.read_text(encoding="utf-8"))[:3]
    for text in (json.dumps({"dailyPapers": rows}), json.dumps({"date": "2026-06-12", "papers": rows})):
        assert detect_format(text) == HF_API_JSON
        result = parse_text(text, "rows.json", seen_on=API_DAY)
        assert [paper.arxiv_id for paper in result.papers] == ["2606.00467", "2606.12730", "2606.13594"]


# Daily Papers HTML page


def test_html_page_rows_are_read_from_data_props() -> None:
    """The page's DailyPapers data-props rows become papers; the malformed row is reported at the div's line."""
    result = parse_file(HTML_PAGE, seen_on=API_DAY)
    assert [paper.arxiv_id for paper in result.papers] == ["2606.00467", "2606.13392", "2606.99901", "2606.13289"]
    assert [str(error) for error in result.errors] == [f"{fixture_source('hf_page.html')}:16: row 3: no title"]
    minimax = result.papers[1]
    assert (minimax.upvotes, minimax.comments, minimax.organization) == (103, 4, "MiniMax")


def test_html_escaped_markup_in_a_title_comes_back_as_plain_text() -> None:
    """HTML-escaped markup in data-props is unescaped once into the literal text, for the renderer to escape."""
    paper = parse_file(HTML_PAGE, seen_on=API_DAY).papers[2]
    assert paper.title == 'Escaping check: <script>alert(1)</script> & "quotes"'
    assert paper.abstract == "An abstract with <b>markup</b> & an ampersand that must stay text."


def test_html_page_without_the_daily_papers_div_is_one_error() -> None:
    """An HTML page with no DailyPapers div gives one error and no papers, not a crash."""
    result = parse_text("<!doctype html><html><body><p>Hello</p></body></html>", "other.html", seen_on=API_DAY)
    assert result.papers == ()
    assert [str(error) for error in result.errors] == [
        'other.html: no <div data-target="DailyPapers"> in the page: is it a huggingface.co/papers page?'
    ]


def test_html_page_with_broken_data_props_is_one_error() -> None:
    """A DailyPapers div whose data-props is not JSON gives one error at the div's line."""
    text = (
        '<html>\n<body>\n<div data-target="DailyPapers" data-props="{&quot;dailyPapers&quot;: [">\n</div></body></html>'
    )
    result = parse_text(text, "broken.html", seen_on=API_DAY)
    assert result.papers == ()
    assert [str(error) for error in result.errors] == [
        "broken.html:3: data-props is not valid JSON: Expecting value (column 18)"
    ]


# Papers JSONL


def test_jsonl_real_sample_lines_become_papers() -> None:
    """The first 300 lines of the real arXiv sample give 300 papers with ids, listing days and arXiv-only categories."""
    with gzip.open(ARXIV_SAMPLE, "rt", encoding="utf-8") as lines:
        text = "".join(islice(lines, 300))
    result = parse_text(text, "sample.jsonl", seen_on=SEEN)
    assert len(result.papers) == 300 and result.errors == ()
    first = result.papers[0]
    assert (first.arxiv_id, first.title) == ("1904.11093", "Deep Sparse Representation-based Classification")
    assert first.categories == ("cs.CV", "cs.AI", "cs.LG", "stat.ML")
    assert (first.listed_on, first.url) == (date(2025, 10, 13), "https://arxiv.org/abs/1904.11093")
    assert all(paper.arxiv_id and paper.categories for paper in result.papers)


def test_malformed_jsonl_lines_are_reported_and_the_rest_read() -> None:
    """Bad JSON, a missing title or abstract and a non-object each give 'file:line: reason'; blank lines are skipped."""
    result = parse_file(FIXTURES / "papers_malformed.jsonl", seen_on=SEEN)
    source = fixture_source("papers_malformed.jsonl")
    assert [str(error) for error in result.errors] == [
        f"{source}:3: invalid JSON: Expecting value (column 58)",
        f"{source}:4: no title",
        f"{source}:5: no abstract",
        f"{source}:6: expected a JSON object, found list",
    ]
    assert [paper.arxiv_id for paper in result.papers] == ["2501.00001", "2501.00005"]


def test_jsonl_fields_are_cleaned() -> None:
    """Titles collapse whitespace, ids lose versions and prefixes, author strings split, primary category leads."""
    first, second = parse_file(FIXTURES / "papers_malformed.jsonl", seen_on=SEEN).papers
    assert (first.title, first.abstract) == ("Good JSONL Paper", "Abstract one.")
    assert first.authors == ("Ada Lovelace", "Alan Turing", "Grace Hopper")
    assert (first.published, first.upvotes, first.listed_on) == (date(2025, 1, 2), 7, SEEN)
    assert first.categories == ("stat.ML", "cs.LG")
    assert (second.arxiv_id, second.url, second.listed_on) == (
        "2501.00005",
        "https://example.org/p/5",
        date(2025, 1, 6),
    )


# Format detection and files


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("new\n\nDaily Papers\n\nJan 5\n", HF_PAGE_TEXT),
        ("A Title\n\nAn abstract.\n\n  • 3 authors\n·\nJun 20, 2024\n", HF_PAGE_TEXT),
        ('  [{"paper": {"id": "2606.00001"}}]', HF_API_JSON),
        ('{"dailyPapers": [{"paper": {"id": "2606.00001"}}]}', HF_API_JSON),
        ('{"id": "2501.00001", "title": "T", "abstract": "A"}', JSONL),
        ('{"id": "1"}\n{"id": "2"}\n', JSONL),
        ('{"broken": \n{"id": "2"}\n{"id": "3"}\n', JSONL),
        ("\ufeff<!doctype html><html></html>", HF_PAGE_HTML),
        ('text then <div data-target="DailyPapers" data-props="{}"></div>', HF_PAGE_HTML),
        ('<?xml version="1.0"?>\n<feed xmlns="http://www.w3.org/2005/Atom"></feed>', ARXIV_FEED),
        ("<?xml version='1.0' encoding='UTF-8'?>\n<rss version=\"2.0\"><channel></channel></rss>", ARXIV_FEED),
    ],
)
def test_format_is_detected_from_content(text: str, expected: str) -> None:
    """detect_format names the format from the text alone."""
    assert detect_format(text) == expected


@pytest.mark.parametrize(
    ("content", "name", "count"),
    [
        (FIXTURES / "papers_malformed.jsonl", "papers.txt", 2),
        (API_JSON, "daily.html", 30),
        (HTML_PAGE, "page.json", 4),
        (next(SEEDS.glob("002_*.txt")), "seed.jsonl", 13),
        (FIXTURES / "arxiv_listing.rss", "listing.json", 4),
    ],
)
def test_misleading_extensions_do_not_matter(tmp_path: Path, content: Path, name: str, count: int) -> None:
    """A file is parsed by what it contains, whatever its extension says."""
    path = tmp_path / name
    shutil.copyfile(content, path)
    assert len(parse_file(path, seen_on=SEEN).papers) == count


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("Just some notes.\nNothing to see here.\n", "unknown format: expected Daily Papers page text"),
        ("  \n\n", "unknown format: the file is empty"),
    ],
)
def test_unrecognised_content_raises_unknown_format(tmp_path: Path, text: str, hint: str) -> None:
    """Content in none of the formats raises UnknownFormat (a SourceError) naming the file."""
    path = tmp_path / "mystery.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UnknownFormat) as raised:
        parse_file(path, seen_on=SEEN)
    assert isinstance(raised.value, SourceError)
    assert str(raised.value).startswith(f"{path}: ") and hint in str(raised.value)


def test_gzipped_files_are_gunzipped_whatever_their_name(tmp_path: Path) -> None:
    """A .jsonl.gz file, and gzip content under a plain name, are decompressed before parsing."""
    data = gzip.compress((FIXTURES / "papers_malformed.jsonl").read_bytes())
    for name in ("papers.jsonl.gz", "papers.txt"):
        (tmp_path / name).write_bytes(data)
        result = parse_file(tmp_path / name, seen_on=SEEN)
        assert [paper.arxiv_id for paper in result.papers] == ["2501.00001", "2501.00005"]
        assert len(result.errors) == 4


def test_unreadable_files_raise_source_error(tmp_path: Path) -> None:
    """A missing file or a corrupt gzip raises SourceError naming the file."""
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b" + b"not really gzip")
    for path, reason in ((tmp_path / "absent.txt", "cannot read"), (tmp_path / "bad.gz", "cannot be decompressed")):
        with pytest.raises(SourceError) as raised:
            parse_file(path, seen_on=SEEN)
        assert str(raised.value).startswith(f"{path}: ") and reason in str(raised.value)


def test_invalid_utf8_is_reported_at_its_line_and_the_rest_parsed(tmp_path: Path) -> None:
    """A byte that is not UTF-8 gives an error at its line and the record on it is skipped; the others are read."""
    good = b'{"id": "2501.00001", "title": "One", "abstract": "A."}\n'
    path = tmp_path / "latin.jsonl"
    path.write_bytes(good + b'{"id": "2501.00002", "title": "Caf\xe9", "abstract": "B."}\n' + good.replace(b"1", b"3"))
    result = parse_file(path, seen_on=SEEN)
    assert [paper.title for paper in result.papers] == ["One", "One"]
    assert [str(error) for error in result.errors] == [
        f"{path}:2: not valid UTF-8 (byte 0xe9 at column 35): the record on this line is skipped"
    ]


def test_iter_paths_expands_directories_into_sorted_readable_files(tmp_path: Path) -> None:
    """Directories become their .txt/.json/.jsonl/.html/.htm/.gz files, sorted, hidden and other files skipped."""
    names = ["b.json", "a.txt", "c.jsonl.gz", "d.htm", "e.html", "f.jsonl", ".hidden.txt", "notes.md"]
    for name in names:
        (tmp_path / name).write_text("x", encoding="utf-8")
    (tmp_path / "sub.txt").mkdir()
    explicit = tmp_path / "notes.md"
    found = iter_paths([tmp_path, explicit])
    assert [path.name for path in found] == ["a.txt", "b.json", "c.jsonl.gz", "d.htm", "e.html", "f.jsonl", "notes.md"]


def test_html_fixture_escapes_its_props_like_the_real_page() -> None:
    """The fixture embeds its rows HTML-escaped, so the script tag never appears raw in the page."""
    text = HTML_PAGE.read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in text
    assert html.escape("<script>alert(1)</script>") in text
