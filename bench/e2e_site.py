"""The benchmarked site for bench/e2e.py: a day of real arXiv papers and N generated subscribers, cached per N.

A site is what an operator has before `digest send`: a papers file, the subscriber profiles (one
TOML file each, or one CSV file when the product can import one) and a database into which the
real `digest` command ingested the papers (and imported the subscribers). Building it for 100,000
subscribers takes a while, so it is kept under bench/out/e2e/ and reused while its description
(size, date, seed, form) is the same; timed runs work on copies of its database.
"""

from __future__ import annotations

import csv
import gzip
import json
import random
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from scale import TOPICS  # the ranking benchmark's ten topics, so both benches model the same audience

from digest.select.text import words
from digest.store.schema import HEAD
from digest.subscribers.profiles import WEEKDAYS

SITE_VERSION = 3  # bump when what a site holds changes, so cached sites are rebuilt
PAPERS = 1000
VOCABULARY = 5000  # each interest gets one word of its own from the commonest title words
ZONES = ("UTC", "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles",
         "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney")
PAPER_FIELDS = ("id", "title", "abstract", "categories", "primary_category", "listing_date")


@dataclass(frozen=True)
class SiteSpec:
    """What identifies a cached site: a different spec builds a different folder."""

    subscribers: int
    day: date
    seed: int
    form: str  # "toml" (a file per subscriber) or "csv" (`digest subscribers import`)

    @property
    def name(self) -> str:
        return f"site-{self.subscribers}-{self.day}-s{self.seed}-{self.form}"


@dataclass(frozen=True)
class Site:
    """A built site's files (absolute paths)."""

    spec: SiteSpec
    folder: Path

    @property
    def papers(self) -> Path:
        return self.folder / "papers.jsonl"

    @property
    def subscribers_dir(self) -> Path:
        return self.folder / "subscribers"

    @property
    def subscribers_csv(self) -> Path:
        return self.folder / "subscribers.csv"

    @property
    def database(self) -> Path:
        """The SQLite database after ingest (and import): copied, never written, by timed runs."""
        return self.folder / "base.db"


def day_papers(sample: Path, day: date, count: int = PAPERS) -> list[dict[str, object]]:
    """The `count` papers listed on `day` and the listing days just before it (a digest cannot hold later ones)."""
    by_day: dict[str, list[dict[str, object]]] = {}
    with gzip.open(sample, "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row["listing_date"] <= day.isoformat():
                by_day.setdefault(row["listing_date"], []).append({k: row.get(k) for k in PAPER_FIELDS})
    chosen: list[dict[str, object]] = []
    for listing in sorted(by_day, reverse=True):
        chosen.extend(by_day[listing][: count - len(chosen)])
        if len(chosen) == count:
            break
    return chosen


def title_vocabulary(sample: Path, size: int = VOCABULARY) -> list[str]:
    """The commonest title words of the whole sample (as the ranking scale benchmark draws them)."""
    common: Counter[str] = Counter()
    with gzip.open(sample, "rt", encoding="utf-8") as lines:
        for line in lines:
            common.update(words(json.loads(line)["title"]))
    return [w for w, _ in common.most_common(size)]


def frequencies(day: date) -> tuple[str, ...]:
    """Schedules that all make `day` a delivery day, weighted as a real list might be (mostly daily)."""
    weekly = f"weekly:{WEEKDAYS[day.weekday()]}"
    weekdays = "weekdays" if day.weekday() < 5 else "daily"
    return ("daily",) * 7 + (weekdays,) * 2 + (weekly,)


def profiles(n: int, vocabulary: Sequence[str], day: date, seed: int) -> Iterator[dict[str, object]]:
    """`n` profiles: 1–3 interests from the topics, a random subset of each topic's keywords plus a word of
    their own; every tenth trending-only; varied time zones and send times, all due on `day`."""
    rng = random.Random(seed)
    names, schedules = list(TOPICS), frequencies(day)
    for i in range(n):
        interests = []
        if i % 10:
            for name in rng.sample(names, rng.randint(1, 3)):
                keywords = rng.sample(TOPICS[name], rng.randint(2, len(TOPICS[name])))
                interests.append({"name": name, "keywords": [*keywords, rng.choice(vocabulary)],
                                  "weight": round(rng.uniform(0.5, 1.5), 2)})
        yield {"email": f"reader{i}@example.org", "name": f"Reader {i}", "timezone": rng.choice(ZONES),
               "send_at": f"{rng.randint(5, 9):02d}:{rng.choice((0, 15, 30, 45)):02d}",
               "frequency": rng.choice(schedules), "max_papers": rng.choice((5, 10, 15)), "interests": interests}


def toml_profile(profile: dict[str, object]) -> str:
    """One profile as the TOML file an operator would write (JSON strings are valid TOML basic strings)."""
    lines = [f"{key} = {json.dumps(profile[key])}" for key in
             ("email", "name", "timezone", "send_at", "frequency", "max_papers")]
    for interest in profile["interests"]:  # type: ignore[attr-defined]
        lines += ["", "[[interests]]", f"name = {json.dumps(interest['name'])}",
                  f"keywords = {json.dumps(interest['keywords'])}", f"weight = {interest['weight']}"]
    return "\n".join(lines) + "\n"


def write_toml(folder: Path, rows: Iterator[dict[str, object]]) -> None:
    folder.mkdir(parents=True)
    for i, profile in enumerate(rows):
        (folder / f"reader{i:07d}.toml").write_text(toml_profile(profile), encoding="utf-8")


CSV_COLUMNS = ("email", "name", "timezone", "send_at", "frequency", "max_papers", "exclude",
               "interest", "keywords", "description", "seed_papers", "weight")
CSV_LIST = ";"  # the separator of keywords within a cell


def csv_rows(profile: dict[str, object]) -> Iterator[dict[str, object]]:
    """A profile as `digest subscribers import` reads it: one row per interest (one bare row when trending-only)."""
    head = {key: profile[key] for key in ("email", "name", "timezone", "send_at", "frequency", "max_papers")}
    interests = profile["interests"] or [{}]  # type: ignore[list-item]
    for interest in interests:  # type: ignore[attr-defined]
        yield {**head, "interest": interest.get("name", ""), "keywords": CSV_LIST.join(interest.get("keywords", ())),
               "weight": interest.get("weight", "")}


def write_csv(path: Path, rows: Iterator[dict[str, object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, CSV_COLUMNS)
        writer.writeheader()
        for profile in rows:
            writer.writerows(csv_rows(profile))


def setup_config(site: Site, url: str, path: Path) -> Path:
    """A settings file for filling the store at `url` with the site (ingest, import)."""
    path.write_text(f'[store]\nurl = "{url}"\n\n[subscribers]\ndir = "{site.subscribers_dir}"\n', encoding="utf-8")
    return path


def load_site(digest: Sequence[str], config: Path, site: Site) -> None:
    """What an operator runs to fill a store: `digest ingest` the papers, `digest subscribers import` the list
    (or, with profile files, `digest subscribers list`, which brings them into a store that keeps them)."""
    base = [*digest, "--config", str(config)]
    steps = [["ingest", str(site.papers), "--date", site.spec.day.isoformat()],
             ["subscribers", "import", str(site.subscribers_csv)] if site.spec.form == "csv" else
             ["subscribers", "list"]]
    for step in steps:
        done = subprocess.run([*base, *step], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            raise RuntimeError(f"digest {' '.join(step)} failed (exit {done.returncode}): {done.stderr.strip()}")


def cached(folder: Path, wanted: dict[str, object]) -> bool:
    """True when `folder` holds a finished build of `wanted` (its site.json); else it is removed, to be built."""
    marker = folder / "site.json"
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return True
    shutil.rmtree(folder, ignore_errors=True)
    return False


def build(spec: SiteSpec, root: Path, sample: Path, digest: Sequence[str]) -> Site:
    """The cached site of `spec` under `root`, built first when missing or incomplete."""
    site = Site(spec, root / spec.name)
    marker = site.folder / "site.json"
    # the schema too: a site built by an older version is rebuilt, not refused by the store
    wanted = {**asdict(spec), "day": spec.day.isoformat(), "version": SITE_VERSION, "schema": HEAD}
    if cached(site.folder, wanted):
        return site
    site.folder.mkdir(parents=True)
    with site.papers.open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(p) + "\n" for p in day_papers(sample, spec.day))
    rows = profiles(spec.subscribers, title_vocabulary(sample), spec.day, spec.seed)
    if spec.form == "csv":
        write_csv(site.subscribers_csv, rows)
        site.subscribers_dir.mkdir()  # the profile folder the settings name, empty: everyone is in the store
    else:
        write_toml(site.subscribers_dir, rows)
    load_site(digest, setup_config(site, f"sqlite:///{site.database}", site.folder / "setup.toml"), site)
    marker.write_text(json.dumps(wanted))  # last: a site interrupted while building is rebuilt
    return site
