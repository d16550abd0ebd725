"""Hostile ingest files and fetched pages: every limit on what `digest ingest` and the sources read is
tried at and past its number, the issue's cases are kept as fixtures (the big ones made here), and each format is
fuzzed. One bad record or file never stops the others, never reaches the store, and is one line naming the file."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import zlib
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest.app import App
from digest.errors import FetchError
from digest.models import NOT_TEXT, Paper, ParseResult
from digest.sources import (
    MAX_DOCUMENT_BYTES,
    MAX_GUNZIP_RATIO,
    SourceError,
    gunzip_limit,
    parse_bytes,
    parse_file,
    vet,
)
from digest.sources._fields import (
    MAX_ABSTRACT_CHARS,
    MAX_AUTHORS,
    MAX_BLANK_LINES,
    MAX_MARKUP,
    MAX_NAME_CHARS,
    MAX_REFUSED,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    MAX_URL_CHARS,
    BadRecord,
    checked,
)
from digest.sources._json import MAX_JSON_DEPTH, MAX_JSON_INT_DIGITS
from digest.sources.arxivfeed import parse as parse_feed
from digest.sources.collect import collect
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.hfhtml import parse as parse_page
from digest.sources.jsonl import MAX_RECORD_BYTES
from digest.sources.jsonl import parse as parse_jsonl
from digest.sources.live import SourceSpec
from digest.store import Store
from digest.store.papers import _merge

from ..conftest import SEEDS, cli_env, sample_site
from ..http_server import Reply, ScriptedServer

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile" / "ingest"
DAY = date(2026, 6, 12)
SEED_TITLE = "CE-SSL: Computation-Efficient Semi-Supervised Learning for ECG-based Cardiovascular Diseases Detection"
WHOLE = "1 of 1 records are invalid (the first: "  # how a file refused whole begins (sources.vet)

NOT_READ = "; nothing from it was stored"
# Each fixture: the good records it holds (all stored), and its one error (after the file's name).
CASES = {
    "deep_10000.jsonl": (["Good record 1", "Good record 2"],
                         ":2: invalid JSON: nested deeper than 32 levels (column 72)"),
    "int_5000_digits.jsonl": (["Good record 3", "Good record 4"], ":2: upvotes is a number of 5,000 digits (over 19)"),
    "lone_surrogate.jsonl": (["Good record 5", "Good record 6"],
                             ":2: title holds U+D800 (a lone surrogate) at character 6: not text"),
    "nul_abstract_over_seed.jsonl": (["Good record 7", "Good record 8"],
                                     ":2: abstract holds U+0000 (NUL) at character 10: not text"),
    # a JSON document nested too deep cannot be read at all (its rows are found only by reading it)
    "deep_10000.json": ([], f": {WHOLE}line 1: invalid JSON: nested deeper than 32 levels (column 142)){NOT_READ}"),
    "int_5000_digits.json": (["Good row 21", "Good row 23"],
                             ":10: row 1: upvotes is a number of 5,000 digits (over 19)"),
    "lone_surrogate.json": (["Good row 24", "Good row 26"],
                            ":10: row 1: title holds U+D800 (a lone surrogate) at character 6: not text"),
    "deep_10000.html": ([], f": {WHOLE}line 3: data-props is not valid JSON: nested deeper than 32 levels "
                            f"(column 48)){NOT_READ}"),
    "int_5000_digits.html": (["Good row 30", "Good row 32"],
                             ":3: row 1: upvotes is a number of 5,000 digits (over 19)"),
    "lone_surrogate.html": (["Good row 33", "Good row 35"],
                            ":3: row 1: title holds U+D800 (a lone surrogate) at character 6: not text"),
    "nul_reference.atom": (["Good entry 40", "Good entry 42"],
                           ": entry 2: title holds U+0000 (NUL) at character 4: not text"),
    # feedparser's lenient parser itself fails on these references: the feed is refused, in one line
    "surrogate_reference.atom": ([], f": {WHOLE}not a readable feed: UnicodeEncodeError: 'utf-8' codec can't encode "
                                     f"character '\\ud800' in position 0: surrogates not allowed){NOT_READ}"),
    "huge_reference.atom": ([], f": {WHOLE}not a readable feed: OverflowError: Python int too large to convert to C "
                                f"int){NOT_READ}"),
    "nul_title.txt": (["Good page entry one", "Good page entry two"],
                      ":9: title holds U+0000 (NUL) at character 4: not text"),
}


def read(path: Path) -> tuple[list[str], list[str]]:
    """(titles, errors) of one file as `digest ingest` reads it: a file refused whole is one error."""
    try:
        result = vet(parse_file(path, seen_on=DAY), str(path))
    except SourceError as error:
        return [], [str(error)]
    return [paper.title for paper in result.papers], [str(error) for error in result.errors]


def digest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=cli_env())


# -- the issue's cases, kept -----------------------------------------------------------------------------------

def test_every_case_of_the_issue_is_kept_as_a_fixture():
    """The fixtures folder holds exactly the cases below, so none is dropped unnoticed."""
    assert sorted(p.name for p in HOSTILE.iterdir()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_record_is_refused_in_one_line_and_the_good_ones_go_in(name):
    """Nesting 10,000 deep, a 5,000-digit number, a lone surrogate, NUL: one line naming the file (and line) and
    what is wrong; every good record of the file is read (each of these was a traceback that stopped the ingest)."""
    titles, errors = read(HOSTILE / name)
    good, error = CASES[name]
    assert titles == good
    assert errors == [f"{HOSTILE / name}{error}"]


@pytest.mark.slow
def test_ingest_of_hostile_files_beside_the_seeds_stores_every_good_paper_and_exits_1(tmp_path):
    """`digest ingest` of the seeds and every hostile file: the 227 seed papers (197 of the pages, 30 of the API
    day) and the 20 good records are stored, one `error:` line per bad record or file, no traceback, exit 1
    (docs/commands.md); the seed abstract that a later NUL-laden record named is the clean one still."""
    site = sample_site(tmp_path, "[select]\ntext_model = false\n")
    result = digest(site, "ingest", "--date", "2026-06-12", str(SEEDS), str(HOSTILE))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert sorted(result.stderr.splitlines()) == sorted(f"error: {HOSTILE / name}{error}"
                                                        for name, (_, error) in CASES.items())
    with sqlite3.connect(site / "digest.db") as db:
        titles = {title for (title,) in db.execute("SELECT title FROM papers")}
        (abstract,) = db.execute("SELECT abstract FROM papers WHERE title = ?", (SEED_TITLE,)).fetchone()
    assert len(titles) == 197 + 30 + 20 and {t for good, _ in CASES.values() for t in good} <= titles
    assert abstract.startswith("The label scarcity problem is the main challenge") and not NOT_TEXT.search(abstract)


@pytest.mark.slow
def test_run_with_a_hostile_file_source_still_sends_every_due_digest(tmp_path):
    """The issue's run: a file source holding the hostile files beside the seeds sent 0 of the due digests; now
    every due digest is written to the outbox, as a run without that source sends them."""
    sources = (f'[[sources]]\nkind = "file"\nname = "seeds"\npath = "{SEEDS}"\n\n'
               f'[[sources]]\nkind = "file"\nname = "hostile"\npath = "{HOSTILE}"\n')
    site = sample_site(tmp_path, f"[select]\ntext_model = false\n\n{sources}")
    result = digest(site, "run", "--date", "2026-06-12")
    assert "Traceback" not in result.stderr and result.returncode == 0, result.stderr
    assert "hostile: 20 records, 20 new, 0 updated, 14 errors" in result.stdout
    assert "2026-06-12: sent 4, skipped 1, failed 0" in result.stdout
    sent = sorted(p.name for p in (site / "outbox" / "2026-06-12").glob("*.eml"))
    assert sent == ["ada@example.org.eml", "alan@example.org.eml", "grace@example.org.eml",
                    "margaret@example.org.eml"]


BIG = textwrap.dedent("""
    import json, sys, time
    from datetime import date
    from pathlib import Path
    from digest.sources import SourceError, parse_file, vet
    for path in map(Path, sys.argv[1:]):
        start = time.perf_counter()
        try:
            result = vet(parse_file(path, seen_on=date(2026, 6, 12)), str(path))
            out = [[p.title for p in result.papers], [str(e) for e in result.errors]]
        except SourceError as error:
            out = [[], [str(error)]]
        print(json.dumps(out + [round(time.perf_counter() - start, 2)]))
    # VmHWM is this program's own peak (ru_maxrss would count the test process it was forked from)
    status = Path("/proc/self/status").read_text()
    print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
""")


@pytest.mark.slow
def test_a_50_mb_record_a_gzip_bomb_and_an_oversized_page_are_refused_with_flat_memory(tmp_path):
    """The issue's 50 MB record (84 s and 22.4 GB), a gzip file holding 200 MB on one line (46 times its size, so
    within what it may expand to), and a 25 MB API JSON file: each refused in one line, the good records around
    them read, in a process that never holds any of them (its peak stays near what Python and the parsers need)."""
    good = [json.dumps({"title": f"Good {i}", "abstract": "Fine."}) for i in range(4)]
    record = tmp_path / "record_50MB.jsonl"
    huge = json.dumps({"title": "Huge", "abstract": "word " * 10_000_000})
    record.write_text(f"{good[0]}\n{huge}\n{good[1]}\n")
    bomb = tmp_path / "bomb.jsonl.gz"
    megabyte = bytearray(1_000_000)  # NULs with a letter in every hundred bytes: 200 MB of NULs alone gzip 230 times
    megabyte[::100] = random.Random(0).choices(b"abcdefghijklmnopqrstuvwxyz", k=10_000)
    with gzip.open(bomb, "wb", compresslevel=1) as out:
        out.write(f"{good[2]}\n".encode())
        for _ in range(200):
            out.write(megabyte)
        out.write(f"\n{good[3]}\n".encode())
    page = tmp_path / "page.json"
    page.write_text(json.dumps([{"paper": {"id": "2511.00001", "title": "T", "summary": "x" * 25_000_000}}]))
    run = subprocess.run([sys.executable, "-c", BIG, str(record), str(bomb), str(page)], capture_output=True,
                         text=True, timeout=120, env=cli_env())
    assert run.returncode == 0, run.stderr
    *outcomes, peak_mb = [json.loads(line) for line in run.stdout.splitlines()]
    skipped = "bytes (over 1,000,000): skipped"
    assert outcomes[0][:2] == [["Good 0", "Good 1"], [f"{record}:2: a record of {len(huge):,} {skipped}"]]
    assert outcomes[1][:2] == [["Good 2", "Good 3"], [f"{bomb}:2: a record of 200,000,000 {skipped}"]]
    assert outcomes[2][:2] == [[], [f"{page}: larger than 20,000,000 bytes, and only papers JSONL is read past "
                                    f"that size{NOT_READ}"]]
    assert peak_mb < 150, peak_mb  # reading the 50 MB file whole takes more than this by itself
    assert all(seconds < 10 for *_, seconds in outcomes), outcomes


# -- each limit, at its number and one past it ----------------------------------------------------------------

def jsonl_line(**extra: object) -> str:
    return json.dumps({"title": "T", "abstract": "A.", **extra})


def one(text: str) -> ParseResult:
    return parse_jsonl(text, "f.jsonl", seen_on=DAY)


def test_json_nesting_is_read_to_its_limit_and_refused_past_it():
    """A record nested MAX_JSON_DEPTH deep is read; one level more is refused before the decoder recurses."""
    def nested(depth: int) -> str:  # the record's own object is the first level
        inner = depth - 1
        return '{"title": "T", "abstract": "A.", "n": ' + "[" * inner + "]" * inner + "}"
    assert len(one(nested(MAX_JSON_DEPTH)).papers) == 1
    result = one(nested(MAX_JSON_DEPTH + 1))
    assert [str(e) for e in result.errors] == ["f.jsonl:1: invalid JSON: nested deeper than 32 levels (column 70)"]
    assert len(one('{"title": "T", "abstract": "' + "[" * 10_000 + '"}').papers) == 1  # brackets in a string count not


def test_long_numbers_are_never_converted_and_refuse_only_the_field_that_needs_them():
    """Up to MAX_JSON_INT_DIGITS digits a number is read (too big to count, it counts as none); past that it refuses
    the record when it is in a field we read, and is ignored anywhere else."""
    assert one(jsonl_line(upvotes=int("9" * MAX_JSON_INT_DIGITS))).papers[0].upvotes is None
    past = one(jsonl_line().replace("}", ', "upvotes": ' + "9" * (MAX_JSON_INT_DIGITS + 1) + "}"))
    assert [e.reason for e in past.errors] == ["upvotes is a number of 21 digits (over 19)"]
    unread = one(jsonl_line().replace("}", ', "size": -' + "9" * 100_000 + "}"))
    assert len(unread.papers) == 1 and not unread.errors


def padded(size: int) -> str:
    """A valid record line of exactly `size` bytes."""
    line = jsonl_line(pad="")
    return line.replace('"pad": ""', '"pad": "' + "x" * (size - len(line)) + '"')


def test_a_record_is_read_up_to_its_size_limit_in_a_small_file_and_in_a_large_one(tmp_path):
    """A line of MAX_RECORD_BYTES is read and one byte more is refused, whether the file is parsed whole or, past
    MAX_DOCUMENT_BYTES, one line at a time (where a 25 MB line is skipped without being held)."""
    small = one("\n".join([padded(MAX_RECORD_BYTES), padded(MAX_RECORD_BYTES + 1)]))
    assert len(small.papers) == 1
    assert [str(e) for e in small.errors] == ["f.jsonl:2: a record of 1,000,001 bytes (over 1,000,000): skipped"]
    large = tmp_path / "large.jsonl"
    large.write_text("\n".join([padded(MAX_RECORD_BYTES), padded(MAX_RECORD_BYTES + 1), "x" * 25_000_000,
                                jsonl_line(title="Last")]) + "\n")
    result = parse_file(large, seen_on=DAY)
    assert [p.title for p in result.papers] == ["T", "Last"]
    assert [e.reason for e in result.errors] == ["a record of 1,000,001 bytes (over 1,000,000): skipped",
                                                 "a record of 25,000,000 bytes (over 1,000,000): skipped"]
    assert [e.line for e in result.errors] == [2, 3]


def test_a_page_feed_or_api_file_is_read_up_to_the_document_limit(tmp_path):
    """An API JSON file of MAX_DOCUMENT_BYTES is read; one byte more is refused whole (only JSONL is streamed)."""
    def api(size: int) -> bytes:
        text = json.dumps([{"paper": {"id": "2511.00001", "title": "T", "summary": "S."}, "thumbnail": ""}])
        return text.replace('"thumbnail": ""', '"thumbnail": "' + "x" * (size - len(text)) + '"').encode()
    at, past = tmp_path / "at.json", tmp_path / "past.json"
    at.write_bytes(api(MAX_DOCUMENT_BYTES))
    past.write_bytes(api(MAX_DOCUMENT_BYTES + 1))
    assert [p.title for p in parse_file(at, seen_on=DAY).papers] == ["T"]
    with pytest.raises(SourceError, match="larger than 20,000,000 bytes, and only papers JSONL is read past that size"):
        parse_file(past, seen_on=DAY)


# -- what a gzip file may expand to, and blank lines ------------------------------------------------------------

def gzip_members(path: Path, *members: tuple[bytes, int]) -> Path:
    """`path` written as gzip members: each (its bytes, compressed once) repeated its count. A gzip reader reads on
    from one member to the next, so a file of gigabytes costs milliseconds to make."""
    with path.open("wb") as out:
        for data, times in members:
            packed = gzip.compress(data, compresslevel=9)
            for _ in range(times):
                out.write(packed)
    return path


def gunzip_refusal(path: Path) -> str:
    """The one line that refuses `path` for expanding past what its size allows."""
    size = path.stat().st_size
    return (f"{path}: gunzipped, it passes {gunzip_limit(size):,} bytes: a gzip file may expand to {MAX_GUNZIP_RATIO} "
            f"times its {size:,} bytes and at least to {MAX_DOCUMENT_BYTES:,} (real ones: 2.5 to 5 times); nothing "
            "from it was stored")


def test_a_gzip_of_50_million_blank_lines_is_refused_in_one_line_and_the_other_files_go_in(make_config, tmp_path):
    """A 48 KB gzip file of a record, 50 million blank lines and a record (58 s of skipping blank lines, and 500
    million ran past 300 s) is refused once it passes what a gzip file of its size may expand to, in one line naming
    it, and the ingest goes on: the file beside it goes in."""
    bomb = tmp_path / "blank.jsonl.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
    with bomb.open("wb") as out:
        out.write(packer.compress(jsonl_line(title="Before").encode() + b"\n"))
        for _ in range(50):
            out.write(packer.compress(b"\n" * 1_000_000))
        out.write(packer.compress(jsonl_line(title="After").encode() + b"\n") + packer.flush())
    good = tmp_path / "good.jsonl"
    good.write_text(jsonl_line(title="Good") + "\n")
    app = App(make_config(select={"text_model": False}))
    report = app.ingest([bomb, good], seen_on=DAY)
    assert [str(error) for error in report.errors] == [gunzip_refusal(bomb)]
    assert bomb.stat().st_size < 50_000 and "passes 20,000,000 bytes" in str(report.errors[0])
    assert report.files == 1 and [paper.title for paper in app.store.all_papers()] == ["Good"]
    app.close()


def test_blank_lines_are_skipped_to_their_limit_and_refuse_the_file_past_it(tmp_path):
    """MAX_BLANK_LINES blank lines more than the records read are skipped; one more refuses the file whole in one
    line, whether it is read whole or a line at a time (past MAX_DOCUMENT_BYTES: 25 million blank lines in a plain
    file, or the 486 KB gzip file of 500 million, which ran past 300 s, refused at line 1,003); a blank line after
    every record, however many records, is never too many."""
    record = jsonl_line()
    assert len(one(record + "\n" * (1 + MAX_BLANK_LINES)).papers) == 1  # (the last newline ends the record's line)
    refused = "over 1,000 blank lines more than the records read, by line 1,003: not papers JSONL; nothing from it " \
              "was stored"
    with pytest.raises(SourceError) as error:
        one(record + "\n" * (2 + MAX_BLANK_LINES))
    assert str(error.value) == f"f.jsonl: {refused}"
    spaced = "".join(jsonl_line(title=f"T{i}") + "\n\n" for i in range(3 * MAX_BLANK_LINES))
    assert len(one(spaced).papers) == 3 * MAX_BLANK_LINES
    plain = tmp_path / "blank.jsonl"
    plain.write_bytes(record.encode() + b"\n" * 25_000_000)
    bomb = gzip_members(tmp_path / "blank.jsonl.gz", (record.encode(), 1), (b"\n" * 10_000_000, 50))
    assert bomb.stat().st_size < 500_000
    for path in (plain, bomb):
        with pytest.raises(SourceError) as error:
            parse_file(path, seen_on=DAY)
        assert str(error.value) == f"{path}: {refused}"


def test_a_gzip_file_is_read_to_what_its_size_allows_and_refused_past_it(tmp_path):
    """A gzip file may expand to MAX_GUNZIP_RATIO times its size, and at least to MAX_DOCUMENT_BYTES: one giving
    exactly 20,000,000 bytes is read and a byte more is refused; a 22.5 MB file of records that compress as real
    ones do (here 1.3 times) is read a line at a time; one of records repeated, 100 MB from 900 KB, is refused in
    one line naming it, having read no more than it may give and a byte (each of these was read to its end)."""
    repeated = (padded(99_999) + "\n").encode()
    at = gzip_members(tmp_path / "at.jsonl.gz", (repeated, 200))
    over = gzip_members(tmp_path / "over.jsonl.gz", (repeated, 200), (b"\n", 1))
    assert len(parse_file(at, seen_on=DAY).papers) == 200
    with pytest.raises(SourceError) as error:
        parse_file(over, seen_on=DAY)
    assert str(error.value) == gunzip_refusal(over)
    noise = jsonl_line(pad=base64.b64encode(random.Random(0).randbytes(675_000)).decode()).encode() + b"\n"
    real = gzip_members(tmp_path / "real.jsonl.gz", (noise, 25))
    assert len(parse_file(real, seen_on=DAY).papers) == 25
    bomb = gzip_members(tmp_path / "bomb.jsonl.gz", (noise, 1), ((padded(999_999) + "\n").encode() * 10, 10))
    with pytest.raises(SourceError) as error:
        parse_file(bomb, seen_on=DAY)
    assert str(error.value) == gunzip_refusal(bomb)
    assert MAX_DOCUMENT_BYTES < gunzip_limit(bomb.stat().st_size) < 100_000_000


@pytest.mark.slow
def test_a_fetched_body_is_read_up_to_the_document_limit_even_when_compressed(tmp_path):
    """A source whose body passes MAX_DOCUMENT_BYTES fails in one line naming its URL, also when it arrives gzipped
    (counted as it is decompressed); a body of exactly the limit is read; the other sources still go in."""
    row = json.dumps([{"paper": {"id": "2511.00001", "title": "T", "summary": "S."}, "x": ""}])
    at = row.replace('"x": ""', '"x": "' + "y" * (MAX_DOCUMENT_BYTES - len(row)) + '"').encode()
    bomb = gzip.compress(b" " * (MAX_DOCUMENT_BYTES + 1), compresslevel=1)
    scripts = {"/at": [Reply(body=at)], "/over": [Reply(body=at + b" ")],
               "/bomb": [Reply(body=bomb, headers={"Content-Encoding": "gzip"})]}
    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    with ScriptedServer(scripts) as server:
        specs = [SourceSpec("hf_daily", name=name, url=server.url(f"/{name}")) for name in ("over", "bomb", "at")]
        fetcher = Fetcher(FetchPolicy(timeout=10, retries=0))
        report = collect(store, specs, fetcher, DAY)
    store.close()
    assert [o.line() for o in report.outcomes] == [
        f"over: failed: {server.url('/over')}: the body is larger than 20,000,000 bytes: not a page we read",
        f"bomb: failed: {server.url('/bomb')}: the body is larger than 20,000,000 bytes: not a page we read",
        "at: 1 records, 1 new, 0 updated, 0 errors"]
    with ScriptedServer({"/": [Reply(body=b"[" + b" " * 9 + b"]")]}) as server:
        assert len(fetcher.get(server.url("/"), accept=("application/json",), limit=11).body) == 11
        with pytest.raises(FetchError, match="larger than 10 bytes"):
            fetcher.get(server.url("/"), accept=("application/json",), limit=10)
    fetcher.close()


FIELDS = [  # (field, limit, how a paper with n characters in it is made)
    ("title", MAX_TITLE_CHARS, lambda n: Paper("t" * n, "A.")),
    ("abstract", MAX_ABSTRACT_CHARS, lambda n: Paper("T", "a" * n)),
    ("summary", MAX_ABSTRACT_CHARS, lambda n: Paper("T", "A.", summary="s" * n)),
    ("organization", MAX_NAME_CHARS, lambda n: Paper("T", "A.", organization="o" * n)),
    ("author 2", MAX_NAME_CHARS, lambda n: Paper("T", "A.", authors=("Ada", "n" * n))),
    ("keyword 1", MAX_TAG_CHARS, lambda n: Paper("T", "A.", keywords=("k" * n,))),
    ("category 1", MAX_TAG_CHARS, lambda n: Paper("T", "A.", categories=("c" * n,))),
    ("url", MAX_URL_CHARS, lambda n: Paper("T", "A.", url="u" * n)),
    ("github_url", MAX_URL_CHARS, lambda n: Paper("T", "A.", github_url="g" * n)),
    ("project_url", MAX_URL_CHARS, lambda n: Paper("T", "A.", project_url="p" * n)),
]


@pytest.mark.parametrize(("what", "limit", "make"), FIELDS, ids=[f[0] for f in FIELDS])
def test_every_text_field_is_read_to_its_limit_and_refused_past_it(what, limit, make):
    """Each field's limit is where the record is refused, naming the field."""
    assert checked(make(limit)) == make(limit)
    with pytest.raises(BadRecord, match=f"^{what} is {limit + 1:,} characters long \\(over {limit:,}\\)$"):
        checked(make(limit + 1))


@pytest.mark.parametrize(("name", "most"), [("authors", MAX_AUTHORS), ("keywords", MAX_TAGS), ("categories", MAX_TAGS)])
def test_lists_are_read_to_their_length_limit_and_refused_past_it(name, most):
    """Names, keywords and categories: so many are read, one more refuses the record."""
    assert checked(Paper("T", "A.", **{name: ("x",) * most}))
    with pytest.raises(BadRecord, match=f"^{most + 1:,} {name} \\(over {most:,}\\)$"):
        checked(Paper("T", "A.", **{name: ("x",) * (most + 1)}))


@pytest.mark.parametrize("char", ["\0", "\x01", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f", "\x80", "\x85", "\x9f",
                                  "\ud800", "\udfff"])
def test_what_is_not_text_refuses_the_record_wherever_it_is(char):
    """NUL, C0 and C1 controls (but tab, newline, CR), DEL and lone surrogates, in any text field: refused."""
    for paper in (Paper(f"T{char}", "A."), Paper("T", f"A{char}"), Paper("T", "A.", authors=(f"N{char}",)),
                  Paper("T", "A.", url=f"u{char}")):
        with pytest.raises(BadRecord, match=rf"holds U\+{ord(char):04X} \(.*\) at character 2: not text$"):
            checked(paper)


@pytest.mark.parametrize("char", ["\t", "\n", "\r", "é", "\u2028", "\ufffd", "\U0001f600"])
def test_tab_newline_and_any_other_character_are_text(char):
    assert checked(Paper(f"T{char}", f"A{char}", authors=(f"N{char}",)))


def test_a_page_or_feed_is_read_to_the_markup_limit_and_refused_past_it():
    """'<' (and '&' in a feed) are counted before parsing: MAX_MARKUP is parsed, one more is refused in one line."""
    def page(marks: int) -> str:
        text = "<html><body><p>" + "< " * (marks - 6) + "</p></body></html>"
        assert text.count("<") == marks
        return text
    assert "no <div" in str(parse_page(page(MAX_MARKUP), "p.html", seen_on=DAY).errors[0])
    assert [str(e) for e in parse_page(page(MAX_MARKUP + 1), "p.html", seen_on=DAY).errors] == [
        "p.html: 200,001 '<' (over 200,000): not a Daily Papers page"]

    def feed(marks: int) -> str:
        text = ('<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><entry><id>http://arxiv.org/abs/'
                '2511.00001</id><title>T</title><summary><![CDATA[{}]]></summary></entry></feed>')
        return text.format("&" * (marks - text.count("<")))
    assert "abstract is 199,988 characters" in str(parse_feed(feed(MAX_MARKUP), "f.atom", seen_on=DAY).errors[0])
    assert [str(e) for e in parse_feed(feed(MAX_MARKUP + 1), "f.atom", seen_on=DAY).errors] == [
        "f.atom: 200,001 '<' and '&' (over 200,000): not an arXiv feed"]


def test_a_file_of_junk_stops_being_read_once_refusals_pass_the_limit_and_outnumber_papers():
    """20 MB of junk lines stops at MAX_REFUSED refusals (it used to keep an error per line: gigabytes); a file whose
    papers outnumber its refusals is read to the end, however many there are."""
    junk = one("{x\n" * 6_000_000)
    assert len(junk.errors) == MAX_REFUSED + 2 and not junk.papers
    assert str(junk.errors[-1]) == ("f.jsonl:1001: over 1,000 records refused and more refused than read: the rest is "
                                    "not read")
    mixed = one("\n".join([jsonl_line(title=f"T{i}") for i in range(2_000)] + ["{x"] * 1_500))
    assert (len(mixed.papers), len(mixed.errors)) == (2_000, 1_500)


def test_a_file_mostly_not_utf8_is_refused_at_the_limit_without_reading_the_rest():
    """Over MAX_REFUSED undecodable lines, most of those read: refused whole with a hint (not an error per line)."""
    with pytest.raises(SourceError, match="over 1,000 lines are not valid UTF-8, most of those read .the first: line 1."
                                          ": is it in another encoding"):
        parse_bytes(b"{\xff}\n" * 5_000_000, "latin.jsonl", seen_on=DAY)
    assert len(parse_bytes(b"{\xff}\n" * MAX_REFUSED, "x.jsonl", seen_on=DAY).errors) == MAX_REFUSED  # at the limit


def test_a_parser_that_fails_refuses_only_its_own_source():
    """An error no parser was written for (a bug, a library's) is one line naming the source, not a traceback."""
    def broken(text: str, source: str, *, seen_on: date) -> ParseResult:
        raise KeyError("surprise\non two lines")
    with pytest.raises(SourceError, match=r"^x.json: the parser failed \(KeyError: 'surprise\\non two lines'\); "
                                          r"nothing from it was stored \(--debug shows where\)$"):
        parse_bytes(b"[]", "x.json", seen_on=DAY, parser=broken)


def test_the_store_never_lets_text_that_is_not_text_replace_clean_text():
    """Whatever brings a paper in, a NUL-laden or control-laden sighting (even a later listing) leaves the clean
    abstract and names alone, and clean text repairs a stored one that is not."""
    clean = Paper("T", "Clean abstract.", authors=("Zoë",), listed_on=date(2026, 1, 5))
    dirty = Paper("T", "Clean\0 abstract\x1b.", authors=("Zo\ud800",), listed_on=date(2026, 12, 1))
    assert (_merge(clean, dirty).abstract, _merge(clean, dirty).authors) == ("Clean abstract.", ("Zoë",))
    assert _merge(dirty, replace(clean, listed_on=date(2025, 1, 1))).abstract == "Clean abstract."


# -- the regression examples of the fuzz tests below, and the fuzz tests --------------------------------------

# 60 examples a format in CI; DIGEST_FUZZ_SCALE=30 tries 1,800 (as tests/test_fuzz.py), EXPLORE=1 new ones each run
FUZZ = settings(max_examples=int(60 * float(os.environ.get("DIGEST_FUZZ_SCALE", "1"))), deadline=None,
                derandomize=not os.environ.get("EXPLORE"), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
RAW = "\u0001RAW{}\u0001"  # a placeholder string replaced by raw JSON (a deep nest, a long number) after dumping
HOSTILE_TEXT = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", " ", "\0", "a\0b", "\ud800", "x\udc00y", "\x1b[31m", "\x85", "\x9f", "\ufffd", "\t\n\r",
                     "x" * (MAX_ABSTRACT_CHARS + 1), "<script>", "&#0;", "\u202e"]),
)
RAW_JSON = st.one_of(st.integers(1, 3_000).map(lambda d: "[" * d + "]" * d),
                     st.integers(19, 6_000).map(lambda n: "9" * n),
                     st.integers(1, 200).map(lambda d: "[" * d))


def dumped(data: object, raws: list[str]) -> str:
    """`data` as JSON with each RAW placeholder replaced by its raw JSON text."""
    text = json.dumps(data)
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(RAW.format(index)), raw)
    return text


@st.composite
def hostile_object(draw: st.DrawFn, fields: tuple[str, ...]) -> tuple[dict[str, object], list[str]]:
    """An object with hostile values in some of `fields` (some of them raw JSON) and the raw texts it needs."""
    data: dict[str, object] = {}
    raws: list[str] = []
    for name in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4, unique=True)):
        if draw(st.booleans()):
            data[name] = draw(HOSTILE_TEXT)
        else:
            data[name] = RAW.format(len(raws))
            raws.append(draw(RAW_JSON))
    return data, raws


@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory: pytest.TempPathFactory):
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'digest.db'}")
    yield store
    store.close()


def stored_whole_or_refused(path: Path, good: list[str], store: Store) -> None:
    """The property of every fuzz test: the file is refused in one line naming it, or each of its errors is one
    line naming it, every good record is stored (into a real SQLite store), and nothing stored is not text."""
    try:
        result = vet(parse_file(path, seen_on=DAY), str(path))
    except SourceError as error:
        assert str(error).startswith(f"{path}: ") and "\n" not in str(error)
        return
    for error in result.errors:
        assert str(error).startswith(str(path)) and "\n" not in str(error), error
    store.add_papers(result.papers, seen_on=DAY)
    titles = {paper.title for paper in result.papers}
    assert set(good) <= titles, (good, result.errors)
    for paper in result.papers:
        assert not any(NOT_TEXT.search(text) for text in (paper.title, paper.abstract, *paper.authors))


JSONL_FIELDS = ("id", "title", "abstract", "authors", "upvotes", "published", "categories", "url", "extra")


@pytest.mark.slow
@FUZZ
@given(st.lists(hostile_object(JSONL_FIELDS), max_size=3), st.integers(3, 5), st.randoms())
@example([({"title": RAW.format(0), "abstract": "a"}, ["[" * 10_000 + "]" * 10_000])], 3, None)
@example([({"title": "big", "abstract": "a", "upvotes": RAW.format(0)}, ["9" * 5_000])], 3, None)
@example([({"title": "Sur \ud800", "abstract": "a\udc00"}, [])], 3, None)
@example([({"title": "n", "abstract": "a\0" * 50}, [])], 3, None)
def test_fuzz_jsonl(tmp_path_factory, fuzz_store, bad, goods, rng):
    """Papers JSONL with hostile records among good ones: every good record is stored."""
    path = tmp_path_factory.mktemp("jsonl") / "papers.jsonl"
    good = [f"Good JSONL {i}" for i in range(goods)]
    lines = [json.dumps({"title": title, "abstract": "Fine."}) for title in good] + [dumped(*b) for b in bad]
    if rng is not None:
        rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    stored_whole_or_refused(path, good, fuzz_store)


ROW_FIELDS = ("id", "title", "summary", "authors", "upvotes", "numComments", "organization", "ai_keywords",
              "githubRepo", "publishedAt")


def rows_text(bad: list[tuple[dict[str, object], list[str]]], good: list[str]) -> str:
    """A Daily Papers rows list as JSON: the good rows, then the hostile ones (their paper fields drawn)."""
    rows = [json.dumps({"paper": {"id": f"2511.{i:05d}", "title": title, "summary": "Fine."}, "numComments": 0})
            for i, title in enumerate(good)]
    rows += [dumped({"paper": {"id": "2511.99999", "title": "Hostile", "summary": "s", **data}}, raws)
             for data, raws in bad]
    return "[" + ",\n".join(rows) + "]"


@FUZZ
@given(st.lists(hostile_object(ROW_FIELDS), max_size=3), st.integers(3, 5))
@example([({"upvotes": RAW.format(0)}, ["9" * 5_000])], 3)
@example([({"title": "Lone \ud800"}, [])], 3)
def test_fuzz_api_json(tmp_path_factory, fuzz_store, bad, goods):
    """Daily Papers API JSON with hostile rows among good ones: every good row is stored, or (nested too deep) the
    file is refused in one line."""
    path = tmp_path_factory.mktemp("api") / "daily.json"
    good = [f"Good API row {i}" for i in range(goods)]
    path.write_text(rows_text(bad, good), encoding="utf-8", errors="surrogatepass")
    stored_whole_or_refused(path, good, fuzz_store)


NOISE = st.sampled_from(["<div>" * 2_000, "</div>" * 50, "<!--", "<script>var a = '<div data-target=x>';</script>",
                         "&#0;", "&#xD800;", "<p>\0</p>", "<" * 500, "<![CDATA[", ""])


@pytest.mark.slow
@FUZZ
@given(st.lists(hostile_object(ROW_FIELDS), max_size=3), st.integers(3, 5), NOISE, NOISE)
@example([({"summary": RAW.format(0)}, ["[" * 10_000 + "]" * 10_000])], 3, "", "")
def test_fuzz_html_page(tmp_path_factory, fuzz_store, bad, goods, before, after):
    """A Daily Papers HTML page (rows HTML-escaped in data-props) with hostile rows and hostile markup around them:
    every good row is stored, or the page is refused in one line."""
    path = tmp_path_factory.mktemp("page") / "page.html"
    good = [f"Good page row {i}" for i in range(goods)]
    props = ('{"dailyPapers": ' + rows_text(bad, good) + "}").replace("&", "&amp;").replace('"', "&quot;")
    path.write_text(f'<!doctype html><html><body>{before}<div data-target="DailyPapers" data-props="{props}"></div>'
                    f"{after}</body></html>", encoding="utf-8", errors="surrogatepass")
    stored_whole_or_refused(path, good, fuzz_store)


FEED_TEXT = st.one_of(st.text(st.characters(blacklist_categories=["Cs"]), max_size=20).map(
    lambda t: t.replace("&", "&amp;").replace("<", "&lt;")), st.sampled_from(
    ["&#0;", "&#x1b;", "&#xD800;", "&#99999999999999999999;", "&#x110000;", "<b>" * 3_000, "<![CDATA[<a>]]>",
     "x" * (MAX_ABSTRACT_CHARS + 1), "&amp;lt;script&amp;gt;", "</summary>", "&undefined;", ""]))


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(FEED_TEXT, FEED_TEXT), max_size=3), st.integers(3, 5), st.booleans())
@example([("Lone &#xD800;", "a")], 3, False)
@example([("NUL&#0;", "a&#1;b")], 3, True)
def test_fuzz_arxiv_feed(tmp_path_factory, fuzz_store, bad, goods, rss):
    """An arXiv Atom or RSS feed with hostile entries among good ones: every good entry is stored, or the feed is
    refused in one line (feedparser itself fails on some character references)."""
    path = tmp_path_factory.mktemp("feed") / ("listing.rss" if rss else "api.atom")
    good = [f"Good feed entry {i}" for i in range(goods)]
    entries = [(f"2511.{i:05d}", title, "Fine.") for i, title in enumerate(good)]
    entries += [(f"2512.{i:05d}", title, summary) for i, (title, summary) in enumerate(bad)]
    if rss:
        items = "".join(f"<item><title>{t}</title><link>https://arxiv.org/abs/{i}</link><description>{s}</description>"
                        "</item>" for i, t, s in entries)
        text = f'<?xml version="1.0"?><rss version="2.0"><channel><title>cs</title>{items}</channel></rss>'
    else:
        items = "".join(f"<entry><id>http://arxiv.org/abs/{i}v1</id><title>{t}</title><summary>{s}</summary></entry>"
                        for i, t, s in entries)
        text = f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">{items}</feed>'
    path.write_text(text, encoding="utf-8")
    stored_whole_or_refused(path, good, fuzz_store)
