"""Ranking readers who share their interests (catalogue topics), from stored matches and by a full re-rank.

Takes an existing store (an `e2e.py --days` run's digest.toml: a week of papers and 10,000 readers), gives
`--readers` of its readers 1 to 3 interests drawn from `--topics` of their own, and ranks them in batches of 100 as
a send does, once from stored matches (`select.stored_matches`), once on the whole window, alternately, printing
each round's CPU seconds and their ratio. The first stored round scores every interest over the window and keeps
it (the store is a copy: work on one); the later rounds read what it kept (no new papers: a day's new papers would
be scored once per interest on top). The digests of both ways are compared and must be the same.

    .venv/bin/python bench/shared_interests.py --config runs/.../digest.toml --day 2026-07-01
"""

from __future__ import annotations

import argparse
import os
import random
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

from digest.app import App
from digest.config import load_config
from digest.select import select_many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="a digest.toml whose store is a copy to work on")
    parser.add_argument("--day", type=date.fromisoformat, required=True, help="the send date (its window is ranked)")
    parser.add_argument("--readers", type=int, default=3000)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("DIGEST_ALLOW_PLACEHOLDER", "1")
    app = App(load_config(args.config))
    base = list(app.profiles.roster().subscribers)[:args.readers]
    rng = random.Random(1)
    topics = [i for s in base for i in s.interests][:args.topics]
    readers = [replace(s, interests=tuple(rng.sample(topics, rng.randint(1, 3)))) for s in base]

    def rank(stored: bool) -> tuple[float, list]:
        pool = app.composer.pool(args.day)
        start, out = time.process_time(), []
        for i in range(0, len(readers), 100):
            batch = readers[i:i + 100]
            out += select_many(pool, batch, day=args.day, settings=app.settings,
                               signals=app.composer.signals(batch, args.day),
                               store=app.store if stored else None)
        return time.process_time() - start, out

    first, kept = rank(True)
    papers = len(app.composer.pool(args.day))
    print(f"{len(readers):,} readers over {len(topics)} interests, {papers:,} papers in the window")
    print(f"stored, first round (every interest scored over the window and kept): {first:.1f} s CPU")
    for n in range(args.rounds):
        full, by_full = rank(False)
        fast, by_stored = rank(True)
        same = [[(i.paper.store_id, round(i.score, 6)) for i in d.items] for d in by_full] == \
            [[(i.paper.store_id, round(i.score, 6)) for i in d.items] for d in by_stored]
        print(f"round {n + 1}: full re-rank {full:.1f} s, stored {fast:.1f} s CPU, ratio {fast / full:.2f}, "
              f"digests the same: {'yes' if same else 'NO'}")
    app.close()


if __name__ == "__main__":
    main()
