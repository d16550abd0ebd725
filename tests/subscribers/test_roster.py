"""The roster: profile files synced into the store, CSV imports, export, one source per address."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from digest.store import Store
from digest.store.subscribers import profile_json
from digest.subscribers.roster import export_csv, import_path, roster, sync

from ..conftest import SEEDS, SUBSCRIBERS, cli_env


@pytest.fixture
def store(store_url):
    opened = Store(store_url)
    yield opened
    opened.close()


def profile(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_only_changed_files_are_parsed_again(store, tmp_path):
    """A second sync parses nothing; a touched file is recognised by its hash; an edited one is read again."""
    folder = tmp_path / "subscribers"
    for i in range(50):
        profile(folder, f"r{i:02}", f'email = "r{i}@example.org"\nname = "R {i}"\n')
    first = sync(store, folder)
    assert (first.parsed, first.unchanged) == (50, 0) and store.count_subscribers() == 50
    assert sync(store, folder).parsed == 0
    os.utime(folder / "r01.toml", ns=(1, 1))  # same bytes, new time stamp
    touched = sync(store, folder)
    assert touched.parsed == 0 and touched.unchanged == 50
    profile(folder, "r02", 'email = "r2@example.org"\nname = "Renamed"\n')
    edited = sync(store, folder)
    assert edited.parsed == 1 and store.subscribers_by_email(["r2@example.org"])["r2@example.org"].name == "Renamed"
    (folder / "r03.toml").unlink()
    assert sync(store, folder).removed == 1 and store.count_subscribers() == 49


def test_a_second_file_with_a_used_address_takes_nothing_over_and_both_are_refused(store, tmp_path):
    """A new file naming a subscriber's address (even sorted first) takes nothing over: both files are reported,
    each naming the other, and neither is sent until one goes; then the one left is the subscriber."""
    folder = tmp_path / "subscribers"
    profile(folder, "ada", 'email = "ada@example.org"\nname = "Ada"\nmax_papers = 4\n')
    sync(store, folder)
    profile(folder, "0-impostor", 'email = "ADA@example.org"\nname = "Impostor"\n')
    report = sync(store, folder)
    first, second = sorted(report.problems, key=lambda p: p.path)
    assert first.path.endswith("0-impostor.toml") and "ada.toml" in first.message
    assert second.path.endswith("ada.toml") and "0-impostor.toml" in second.message
    assert store.subscribers_by_email(["ada@example.org"]) == {}
    assert len(sync(store, folder).problems) == 2  # still both, run after run
    (folder / "0-impostor.toml").unlink()  # the operator removes the wrong one: the other is the subscriber again
    assert sync(store, folder).problems == []
    kept = store.subscribers_by_email(["ada@example.org"])["ada@example.org"]
    assert (kept.name, kept.max_papers) == ("Ada", 4)


def test_export_then_import_gives_the_same_subscribers(store, store_url, tmp_path):
    """Every field of every example profile survives export to CSV and import into another store."""
    sync(store, SUBSCRIBERS)
    out = io.StringIO()
    assert export_csv(store, out) == 5
    (tmp_path / "list.csv").write_text(out.getvalue(), encoding="utf-8")
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    report = import_path(other, tmp_path / "list.csv")
    assert report.problems == [] and report.imported == 5
    mine = {s.email: profile_json(s) for s in roster(store).subscribers}
    theirs = {s.email: profile_json(s) for s in roster(other).subscribers}
    other.close()
    assert mine == theirs


def test_bad_csv_rows_are_reported_by_line_and_the_rest_imported(store, tmp_path):
    """A row with a bad time zone and a subscriber split in two are errors with their line; the others go in."""
    (tmp_path / "list.csv").write_text(
        "email,name,timezone,send_at,interest,keywords,weight\n"
        "a@example.org,A,Europe/London,07:00,GPUs,CUDA;Triton,1\n"
        "a@example.org,,,,Compilers,MLIR,0.5\n"
        "b@example.org,B,Mars/Olympus,07:00,,,\n"
        "c@example.org,C,UTC,25:00,,,\n"
        "d@example.org,D,UTC,08:00,Robots,robot,11\n"
        "e@example.org,E,UTC,08:00,,,\n"
        "a@example.org,A again,UTC,08:00,,,\n", encoding="utf-8")
    report = import_path(store, tmp_path / "list.csv")
    lines = {(p.line, p.message.split(" ")[0]) for p in report.problems}
    assert lines == {(4, "timezone"), (5, "send_at"), (6, "interest"), (8, "email")}
    assert report.imported == 2
    a = store.subscribers_by_email(["a@example.org"])["a@example.org"]
    assert [(i.name, i.keywords, i.weight) for i in a.interests] == [("GPUs", ("CUDA", "Triton"), 1.0),
                                                                     ("Compilers", ("MLIR",), 0.5)]


def test_an_import_cannot_shadow_a_profile_file_and_can_be_removed(store, tmp_path):
    """An imported row for an address a file defines is refused (naming the file); an imported one can be removed."""
    sync(store, SUBSCRIBERS)
    (tmp_path / "list.csv").write_text("email,name\nada@example.org,Not Ada\nnew@example.org,New\n", encoding="utf-8")
    report = import_path(store, tmp_path / "list.csv")
    [problem] = report.problems
    assert problem.line == 2 and "ada.toml" in problem.message
    assert store.subscribers_by_email(["ada@example.org"])["ada@example.org"].name == "Ada Lovelace"
    assert store.remove_subscriber("new@example.org", "import")
    assert not store.remove_subscriber("ada@example.org", "import")  # a file's subscriber is not removed this way
    assert store.count_subscribers() == 5


@pytest.mark.slow
def test_imported_subscribers_get_their_digest_without_any_profile_file(tmp_path):
    """`digest subscribers import list.csv` then `digest send`: the imported readers are sent to, from the store."""
    (tmp_path / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n[subscribers]\ndir = "none"\n')
    (tmp_path / "none").mkdir()
    rows = "".join(f"reader{i}@example.org,Reader {i},UTC,07:00,daily,3,,GPUs,CUDA;GPU;kernel\n" for i in range(20))
    (tmp_path / "list.csv").write_text("email,name,timezone,send_at,frequency,max_papers,exclude,interest,keywords\n"
                                       + rows, encoding="utf-8")

    def digest(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "digest", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, env=cli_env(DIGEST_SECRET="s"))

    def embedded() -> tuple[int, int]:  # (interest texts, papers) whose dense embeddings the store keeps
        with sqlite3.connect(tmp_path / "digest.db") as db:
            texts = db.execute("SELECT count(*) FROM embeddings WHERE paper_key LIKE 'text:%'").fetchone()[0]
            return texts, db.execute("SELECT count(*) FROM embeddings").fetchone()[0] - texts

    imported = digest("subscribers", "import", "list.csv")
    assert imported.returncode == 0 and "imported 20 subscribers" in imported.stdout, imported.stderr
    assert embedded() == (1, 0)  # the import embedded the interest the twenty share, once
    assert digest("ingest", "--date", "2026-06-12").returncode == 0
    with sqlite3.connect(tmp_path / "digest.db") as db:
        ingested = db.execute("SELECT count(*) FROM papers").fetchone()[0]
    assert embedded() == (1, ingested)  # the ingest embedded its papers
    sent = digest("send", "--date", "2026-06-12")
    assert sent.returncode == 0, sent.stderr
    assert embedded() == (1, ingested)  # so the send embedded nothing itself
    assert "2026-06-12: sent 20, skipped 0" in sent.stdout
    assert len(list((tmp_path / "outbox" / "2026-06-12").glob("reader*.eml"))) == 20
    listed = digest("subscribers", "list")
    assert listed.stdout.count("\n") == 20
    assert "reader7@example.org\tReader 7\tdaily at 07:00 UTC\tGPUs" in listed.stdout


def test_a_synced_profile_file_has_its_interests_embedded_at_once(make_config, tmp_path):
    """A new or edited profile file's interests get their text-model profile when the sync stores them (not by the
    send that reads them); an unchanged one is not read again."""
    from digest.app import App
    from digest.select.dense import interest_text
    from digest.select.vectors import text_key

    folder = tmp_path / "subscribers"
    profile(folder, "ada", 'email = "ada@example.org"\n[[interests]]\nname = "Kernels"\nkeywords = ["CUDA"]\n')
    app = App(make_config(subscribers={"dir": str(folder)}))

    def stored(email: str) -> bool:
        [interest] = app.store.subscribers_by_email([email])[email].interests
        return app.store.get_cache(text_key(interest_text(interest))) is not None

    app.profiles.sync()
    assert stored("ada@example.org")
    profile(folder, "ada", 'email = "ada@example.org"\n[[interests]]\nname = "Kernels"\nkeywords = ["Triton"]\n')
    app.profiles.sync()
    assert stored("ada@example.org")
    app.close()


def test_a_missing_folder_forgets_nobody_but_an_emptied_one_does(store, tmp_path):
    """A subscribers folder that is not there (wrong directory, another machine) leaves the store alone;
    deleting every file from the folder removes their subscribers."""
    folder = tmp_path / "subscribers"
    profile(folder, "ada", 'email = "ada@example.org"\n')
    sync(store, folder)
    [problem] = sync(store, tmp_path / "elsewhere").problems
    assert "not found" in problem.message and store.count_subscribers() == 1
    (folder / "ada.toml").unlink()
    assert sync(store, folder).removed == 1 and store.count_subscribers() == 0
