"""A profile's `library` is a file of the profile's own folder: an absolute path, a `..` or a symbolic link out of the
folder is refused on the `library` line before anything is read, the other profiles still load, and nothing a library
file holds is ever echoed (a problem says file:line and why, never the line's text). Real files and real commands."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from digest.store import Store
from digest.subscribers import libraries as L
from digest.subscribers.libraries import parse_library
from digest.subscribers.profiles import shown
from digest.subscribers.roster import import_path

from ..conftest import cli_env

SECRET = "hunter2-do-not-print"
# What a file of secrets looks like to the id-list reader: a first line that names a paper, then the rest.
SECRETS = f"10.1145/3600006.3613165\nDIGEST_SECRET={SECRET}\nSMTP_PASSWORD={SECRET}-smtp\n"
GOOD_BIB = "@misc{a, title = {SnapKV: LLM Knows What You are Looking for Before Generation}, eprint = {2404.14469}}\n"


def profile(address: str, library: str, *, keywords: bool = False) -> str:
    """A profile of one library interest (and, with `keywords`, a keyword interest written before it)."""
    first = '[[interests]]\nname = "Serving"\nkeywords = ["LLM serving"]\n\n' if keywords else ""
    return f'email = "{address}"\n\n{first}[[interests]]\nname = "Mine"\nlibrary = "{library}"\n'


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def check(cwd: Path) -> subprocess.CompletedProcess[str]:
    """`digest subscribers check`, as a profiles repository's CI runs it (no digest.toml, no database)."""
    return subprocess.run([sys.executable, "-m", "digest", "subscribers", "check"], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=cli_env())


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """A working folder with `subscribers/`, and a secrets file outside it (as /etc/paper-digest/env is)."""
    folder = tmp_path / "subscribers"
    folder.mkdir()
    outside = tmp_path / "etc" / "env"
    outside.parent.mkdir()
    outside.write_text(SECRETS)
    return folder, outside


def test_a_library_outside_the_profiles_folder_is_refused_and_its_content_never_printed(site):
    """An absolute path, a `../` path and a link inside the folder that points out are each one problem on the
    profile's `library` line saying why; the secrets file is never read into a message; the good profile (a
    relative library, and one reached through a link that stays inside) still loads."""
    folder, outside = site
    (folder / "libs").mkdir()
    (folder / "libs" / "ada.bib").write_text(GOOD_BIB)
    (folder / "linked.bib").symlink_to(folder / "libs" / "ada.bib")
    (folder / "env.bib").symlink_to(outside)
    files = {
        "abs": (folder / "abs.toml", profile("abs@uni.acme.dev", str(outside)), "is an absolute path"),
        "up": (folder / "up.toml", profile("up@uni.acme.dev", "../etc/env"), "goes up with '..'"),
        "link": (folder / "link.toml", profile("link@uni.acme.dev", "env.bib", keywords=True),
                 "leads outside this file's folder through a symbolic link"),
    }
    for path, text, _why in files.values():
        path.write_text(text)
    (folder / "ada.toml").write_text(profile("ada@uni.acme.dev", "libs/ada.bib"))
    (folder / "grace.toml").write_text(profile("grace@uni.acme.dev", "linked.bib"))
    result = check(folder.parent)
    assert SECRET not in result.stdout + result.stderr
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "2 valid, 3 invalid profiles"
    n = {"abs": 1, "up": 1, "link": 2}
    expected = [f"{path}:{line_of(path, 'library =')}: interest {n[name]}: library {shown(value)} {why}"
                for name, (path, _text, why) in files.items()
                for value in [path.read_text().rpartition('library = "')[2].rstrip().rstrip('"')]]
    assert len(lines) == 4 and all(any(line.startswith(e) for line in lines[:-1]) for e in expected), lines
    assert all("a library is a file in this file's folder" in line or "copy the library" in line
               for line in lines[:-1])
    assert "Traceback" not in result.stderr


def test_a_readable_file_that_is_no_library_is_reported_by_line_never_by_content(site):
    """A file in the folder whose first line is a DOI is read as a list of ids: its other lines are problems naming
    the file and line and saying why, without a character of what they hold; the DOI still counts."""
    folder, _outside = site
    (folder / "notes.txt").write_text(SECRETS)
    (folder / "ada.toml").write_text(profile("ada@uni.acme.dev", "notes.txt"))
    result = check(folder.parent)
    assert SECRET not in result.stdout + result.stderr and "DIGEST_SECRET" not in result.stdout + result.stderr
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "1 valid, 0 invalid profiles"
    warned = [line for line in result.stderr.splitlines() if "notes.txt:" in line]
    assert [line.split("notes.txt:", 1)[1] for line in warned] == [f"2: {L.NOT_AN_ID}", f"3: {L.NOT_AN_ID}"], \
        result.stderr


BROKEN_BIBTEX = [  # (a broken block naming SECRET where bibtexparser's own message would quote it, our reason)
    (f"@misc{{k1,\n title = {{A}},\n {SECRET}\n}}\n", "a field name without '=' after it"),
    (f"@misc{{k2, title {SECRET}}}\n", "a field name without '=' after it"),
    (f"@misc{{k3, title = {{A}}}}\n@misc{{{SECRET}, title = {{B}}\n", "the file ends before this entry is closed"),
    (f"@misc{{{SECRET} title = {{x}}}}\n@misc{{k5, title = {{Fine}}}}\n", "no ',' after the entry's key"),
]


@pytest.mark.parametrize(("text", "why"), BROKEN_BIBTEX)
def test_broken_bibtex_is_a_problem_at_its_line_in_our_words_that_quote_nothing(text, why, caplog):
    """A broken BibTeX block is `where:line: BibTeX syntax error, entry skipped: <why>` in words that quote nothing of
    the file; no log line (bibtexparser's own included) holds the block's text either."""
    with caplog.at_level(logging.DEBUG):
        library = parse_library(text, "mine.bib")
    broken = [p for p in library.problems if "BibTeX syntax error" in p]
    assert [p.split(": ", 1)[1] for p in broken] == [f"BibTeX syntax error, entry skipped: {why}"], library.problems
    assert all(p.startswith("mine.bib:") for p in broken)
    assert not any(SECRET in p for p in library.problems), library.problems
    assert not any(SECRET in r.getMessage() for r in caplog.records)


def test_an_import_list_names_libraries_in_its_own_folder_only(tmp_path: Path):
    """A CSV list's `library` follows the same rule, relative to the list: an absolute path and a `..` are problems
    on their rows (the secrets never read), a library beside the list is imported."""
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "ada.bib").write_text(GOOD_BIB)
    (tmp_path / "env").write_text(SECRETS)
    listing = lists / "list.csv"
    listing.write_text("email,interest,library\n"
                       "ada@uni.acme.dev,Mine,ada.bib\n"
                       f"bob@uni.acme.dev,Mine,{tmp_path / 'env'}\n"
                       "cy@uni.acme.dev,Mine,../env\n")
    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    try:
        report = import_path(store, listing)
        assert report.imported == 1
        assert [(p.line, p.message.split(" library ", 1)[0]) for p in report.problems] == [
            (3, "interest 1:"), (4, "interest 1:")]
        assert "is an absolute path" in report.problems[0].message
        assert "goes up with '..'" in report.problems[1].message
        assert not any(SECRET in str(p) for p in report.problems)
        [ada] = store.subscribers_by_email(["ada@uni.acme.dev"]).values()
        assert ada.interests[0].library_source == str(lists / "ada.bib")
    finally:
        store.close()


def test_a_link_loop_is_refused_not_a_traceback(site):
    """Two links pointing at each other in the folder: refused as leading nowhere inside it, one line."""
    folder, _outside = site
    os.symlink(folder / "b.bib", folder / "a.bib")
    os.symlink(folder / "a.bib", folder / "b.bib")
    (folder / "ada.toml").write_text(profile("ada@uni.acme.dev", "a.bib"))
    result = check(folder.parent)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    [problem] = result.stdout.splitlines()[:-1]
    assert problem.startswith(f"{folder / 'ada.toml'}:5: interest 1: library 'a.bib' ")
