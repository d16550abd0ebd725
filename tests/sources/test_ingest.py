"""Ingest never damages the store: undecodable lines skipped at file:line, mostly-invalid files refused whole,
dates never moved back, clean text never replaced by U+FFFD, repeated input cheap."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from digest.app import App
from digest.models import Paper
from digest.sources import SourceError, parse_bytes, vet
from digest.sources.pagetext import parse as parse_page
from digest.store.papers import _merge

from ..conftest import DAY, SEEDS

PAGE = sorted(SEEDS.glob("*.txt"))[0]


def rows(app: App) -> list[tuple]:
    """Every paper as stored: what a bad ingest must not change."""
    return [(p.title, p.abstract, p.published, p.listed_on, p.upvotes) for p in app.store.all_papers()]


def corrupt(data: bytes, lines: list[int]) -> bytes:
    """`data` with a Latin-1 byte put into each of the given (1-based) lines."""
    out = data.split(b"\n")
    for number in lines:
        out[number - 1] = out[number - 1][:3] + b"\xe9" + out[number - 1][3:]
    return b"\n".join(out)


def test_a_few_undecodable_bytes_in_a_seed_page_change_nothing_already_stored(make_config, tmp_path):
    """The issue's case: a seed page with non-UTF-8 bytes, ingested later, moves no date, puts no U+FFFD in any
    abstract and reports each bad line as file:line; the entries on clean lines still merge."""
    app = App(make_config())
    app.ingest([SEEDS], seen_on=DAY)
    before = rows(app)
    text = PAGE.read_bytes()
    numbered = text.split(b"\n")
    abstracts = [n for n, line in enumerate(numbered, 1) if len(line) > 300][:5]
    bad = tmp_path / PAGE.name
    bad.write_bytes(corrupt(text, abstracts))
    report = app.ingest([bad], seen_on=date(2026, 11, 24))
    assert [str(e) for e in report.errors] == [
        f"{bad}:{n}: not valid UTF-8 (byte 0xe9 at column 4): the record on this line is skipped" for n in abstracts]
    after = rows(app)
    assert after == before
    assert not any("\ufffd" in (abstract or "") for _, abstract, *_ in after)
    app.close()


def test_an_undecodable_page_date_refuses_the_whole_page(make_config, tmp_path):
    """When the page date line itself is not UTF-8, every implied year would be a guess: the page is refused."""
    text = PAGE.read_bytes()
    date_line = text.split(b"\n").index(b"Jan 5") + 1
    with pytest.raises(SourceError, match=f"line {date_line} is not valid UTF-8 and the page date cannot be read"):
        parse_bytes(corrupt(text, [date_line]), "page.txt", seen_on=DAY)


def test_a_mostly_invalid_file_is_refused_whole_and_the_store_is_unchanged(make_config, tmp_path):
    """More than half the records invalid: one error, nothing stored, not even the valid records."""
    app = App(make_config())
    app.ingest([SEEDS], seen_on=DAY)
    before = rows(app)
    path = tmp_path / "mostly.jsonl"
    good = [json.dumps({"title": f"Valid {i}", "abstract": "Fine."}) for i in range(3)]
    path.write_text("\n".join(good + ['{"title": "no abstract"}'] * 4) + "\n")
    report = app.ingest([path], seen_on=DAY)
    assert [str(e) for e in report.errors] == [
        f"{path}: 4 of 7 records are invalid (the first: line 4: no abstract); nothing from it was stored"]
    assert rows(app) == before
    app.close()


def test_a_file_with_a_minority_of_bad_records_keeps_the_good_ones():
    """The control for the rule above: half or fewer invalid, the valid records go through."""
    result = parse_bytes(b'{"title": "A", "abstract": "a"}\n{"title": "B"}\n', "x.jsonl", seen_on=DAY)
    assert vet(result, "x.jsonl") is result and len(result.papers) == 1


def test_dates_never_move_backwards_and_publication_never_later():
    """A later sighting may move the listing date forward, but never the publication date later (a misread year);
    an earlier sighting moves neither."""
    old = Paper("T", "A", published=date(2025, 3, 26), listed_on=date(2026, 1, 5), upvotes=4)
    misread = replace(old, published=date(2026, 3, 26), listed_on=date(2026, 11, 24))
    merged = _merge(old, misread)
    assert merged.published == date(2025, 3, 26) and merged.listed_on == date(2026, 11, 24)
    earlier = replace(old, published=date(2024, 1, 1), listed_on=date(2025, 1, 1))
    assert _merge(old, earlier).listed_on == date(2026, 1, 5)


def test_text_with_replacement_characters_never_replaces_clean_text_but_clean_text_repairs_it():
    """Whatever the order of sightings, the clean abstract and author list are what the store keeps."""
    clean = Paper("T", "Clean abstract.", authors=("Zoë",), listed_on=date(2026, 1, 5))
    mangled = Paper("T", "Clean abstr\ufffdct.", authors=("Zo\ufffd",), listed_on=date(2026, 6, 1))
    assert _merge(clean, mangled).abstract == "Clean abstract."
    assert _merge(clean, mangled).authors == ("Zoë",)
    assert _merge(mangled, replace(clean, listed_on=date(2025, 1, 1))).abstract == "Clean abstract."


def test_repeated_input_is_cheap(make_config, tmp_path):
    """20 MB of one JSONL line repeated is stored as one paper in a few seconds (it took minutes and 0.5 GB)."""
    line = json.dumps({"id": "2501.00001", "title": "Repeated", "abstract": "word " * 60}) + "\n"
    path = tmp_path / "repeated.jsonl"
    path.write_text(line * (20_000_000 // len(line)))
    app = App(make_config())
    start = time.perf_counter()
    report = app.ingest([path], seen_on=DAY)
    elapsed = time.perf_counter() - start
    assert (report.distinct, report.new, report.errors) == (1, 1, [])
    assert elapsed < 5, elapsed
    app.close()


def test_page_text_with_replacement_characters_reports_the_right_lines():
    """The parsers see undecodable lines at their own line numbers (no shift), so errors point at the real line."""
    text = PAGE.read_bytes()
    title = text.split(b"\n").index(b"Jan 5") + 3  # the first entry's title line
    result = parse_bytes(corrupt(text, [title]), "p.txt", seen_on=DAY)
    clean = parse_page(text.decode(), "p.txt", seen_on=DAY)
    assert [e.line for e in result.errors] == [title]
    assert len(result.papers) == len(clean.papers) - 1


def test_fetched_bodies_are_decoded_the_same_way(tmp_path: Path):
    """A live source's body goes through the same line-by-line decoding (it was decoded with replacement)."""
    from digest.sources.live import SourceSpec, _read_files

    (tmp_path / "a.jsonl").write_bytes(b'{"title": "A", "abstract": "a"}\n{"title": "B\xff", "abstract": "b"}\n'
                                       b'{"title": "C", "abstract": "c"}\n')
    result = _read_files(SourceSpec("file", path=str(tmp_path / "a.jsonl")), DAY)
    assert [p.title for p in result.parsed.papers] == ["A", "C"]
    assert [e.line for e in result.parsed.errors] == [2]
