"""What the trend's signals change on a real day that mixes sources.

    .venv/bin/python bench/trend.py --data PATH/arxiv_sample.jsonl.gz [--listing 2026-06-12] [--readers 20]

One store, as `digest run` leaves it: the real Daily Papers API response of 2026-06-12 (tests/fixtures: 30 papers
with upvotes and comments, 16 of them with their code's GitHub stars) and the arXiv sample's papers of one listing
day (an arXiv feed's papers: no count at all), ingested on one day. The day's digests are ranked twice through the
product's own path (`Composer.rank`, the text model on): with the trend as it was before the signals (upvotes + 2 ×
comments; a paper with no count: 0) and as it is (`select.pool.trend`: GitHub stars at 0.2 upvote each, a paper
with no count as one upvote). Figures, for the reader without interests (10 papers) and for held-out readers with
one interest each (bench/relevance_profiles.py SET_R, keywords and sentence, 10 papers each):

- trending: the top 10 before and after, how many changed, the Spearman correlation of the Daily Papers papers'
  ranks, and how many starred papers moved up;
- readers: picks that changed, places whose paper changed, the share of picks from the Daily Papers API before
  and after (the feed's papers were ranked below every upvoted one of equal relevance before), and the precision
  of the arXiv picks against the sample's categories (which only the arXiv papers have).

Citations are not in this day's data (no saved OpenAlex answers for its papers), so they are not measured here;
they enter the same sum. Last lines: `name: value` figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import relevance_profiles as written  # noqa: E402

from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.models import Interest, Subscriber  # noqa: E402
from digest.select import pool as pool_module  # noqa: E402

API = ROOT / "tests" / "fixtures" / "hf_daily_papers_2026-06-12.json"
DAY = date(2026, 6, 12)


def old_trend(papers, comment_weight, star_weight, citation_weight):  # noqa: ARG001 - the signature of trend
    """The trend before the signals: log(1 + upvotes + comment_weight × comments), 0 without a count."""
    values = np.array([(p.upvotes or 0) + comment_weight * (p.comments or 0) for p in papers], dtype=float)
    top = values.max(initial=0.0)
    return np.log1p(values) / np.log1p(top) if top > 0 else np.zeros(len(papers))


def arxiv_day(path: str, listing: str) -> tuple[Path, dict[str, frozenset[str]]]:
    """The sample's papers listed on `listing`, written as a JSONL file `digest ingest` reads; their categories."""
    out = Path(tempfile.mkdtemp()) / f"arxiv_{listing}.jsonl"
    categories = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines, out.open("w", encoding="utf-8") as kept:
        for line in lines:
            row = json.loads(line)
            if row.get("listing_date") == listing:
                kept.write(json.dumps({k: row[k] for k in ("id", "title", "abstract", "categories")} |
                                      {"published": listing}) + "\n")
                categories[row["id"]] = frozenset(row.get("categories") or ())
    return out, categories


def readers(count: int) -> list[tuple[str, Subscriber]]:
    out = []
    for category in written.CATEGORIES[:count]:
        profile = written.SET_R[category]
        interest = Interest(category, tuple(profile["keywords"]), description=profile["description"])
        out.append((category, Subscriber(email=f"{category}@example.org", max_papers=10, interests=(interest,))))
    return out


def ranked(app: App, subscriber: Subscriber) -> list:
    return [r for r in app.composer.rank(subscriber, DAY) if r.passes_floor][:subscriber.max_papers]


def spearman(a: list[str], b: list[str]) -> float:
    common = [x for x in a if x in b]
    ra = np.argsort(np.argsort([a.index(x) for x in common]))
    rb = np.argsort(np.argsort([b.index(x) for x in common]))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(common) > 2 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("DIGEST_ARXIV_SAMPLE", ""), required=False)
    parser.add_argument("--listing", default="2026-06-12", help="the arXiv sample's listing day to mix in")
    parser.add_argument("--readers", type=int, default=20)
    args = parser.parse_args()
    if not args.data:
        raise SystemExit("--data PATH/arxiv_sample.jsonl.gz (or $DIGEST_ARXIV_SAMPLE)")
    feed, categories = arxiv_day(args.data, args.listing)
    folder = Path(tempfile.mkdtemp())
    config = build_config({"store": {"url": f"sqlite:///{folder / 'digest.db'}"},
                           "subscribers": {"dir": str(folder / "subscribers")}}, base=folder)
    app = App(config)
    app.ingest([API, feed], seen_on=DAY)
    pool = app.composer.pool(DAY)
    api_ids = {p.arxiv_id for p in pool.papers if p.upvotes is not None}
    starred = {p.arxiv_id for p in pool.papers if p.stars}
    print(f"pool: {len(pool.papers)} papers, {len(api_ids)} from the Daily Papers API ({len(starred)} with GitHub "
          f"stars), {len(pool.papers) - len(api_ids)} from the arXiv listing of {args.listing} (no count)")

    def both(subscriber: Subscriber) -> tuple[list, list]:
        saved = pool_module.trend
        pool_module.trend = old_trend
        try:
            before = ranked(app, subscriber)
        finally:
            pool_module.trend = saved
        return before, ranked(app, subscriber)

    trending = Subscriber(email="trending@example.org", max_papers=10)
    before, after = both(trending)
    b_ids, a_ids = [r.paper.arxiv_id for r in before], [r.paper.arxiv_id for r in after]
    print("\ntrending digest, before → after (upvotes, comments, stars):")
    for n in range(10):
        pb, pa = before[n].paper, after[n].paper
        print(f"  {n + 1:2}. {pb.title[:38]:38} ({pb.upvotes}, {pb.comments}, {pb.stars})"
              f"  →  {pa.title[:38]:38} ({pa.upvotes}, {pa.comments}, {pa.stars})")
    moved_up = sum(1 for x in a_ids if x in starred and (x not in b_ids or a_ids.index(x) < b_ids.index(x)))
    changed_places = sum(1 for n in range(10) if b_ids[n] != a_ids[n])

    places_changed = 0
    picks_changed, total, api_before, api_after, right_before, right_after, arxiv_before, arxiv_after = \
        0, 0, 0, 0, 0, 0, 0, 0
    for category, subscriber in readers(args.readers):
        b, a = both(subscriber)
        bi, ai = {r.paper.arxiv_id for r in b}, {r.paper.arxiv_id for r in a}
        picks_changed += len(ai - bi)
        places_changed += sum(1 for x, y in zip(b, a, strict=False) if x.paper.arxiv_id != y.paper.arxiv_id)
        total += len(a)
        api_before += len(bi & api_ids)
        api_after += len(ai & api_ids)
        arxiv_before += len(bi - api_ids)
        arxiv_after += len(ai - api_ids)
        right_before += sum(1 for x in bi - api_ids if category in categories.get(x, ()))
        right_after += sum(1 for x in ai - api_ids if category in categories.get(x, ()))
    print()
    print(f"trending_top10_changed_places: {changed_places}")
    print(f"trending_top10_new_papers: {len(set(a_ids) - set(b_ids))}")
    print(f"trending_spearman_before_after: {spearman(b_ids, a_ids):.3f}")
    print(f"trending_starred_papers_moved_up: {moved_up}")
    print(f"readers: {args.readers}")
    print(f"reader_picks_changed: {picks_changed} of {total}")
    print(f"reader_places_changed: {places_changed} of {total}")
    print(f"reader_share_from_daily_papers_before: {api_before / max(total, 1):.3f}")
    print(f"reader_share_from_daily_papers_after: {api_after / max(total, 1):.3f}")
    print(f"reader_arxiv_precision_before: {right_before / max(arxiv_before, 1):.3f} ({arxiv_before} picks)")
    print(f"reader_arxiv_precision_after: {right_after / max(arxiv_after, 1):.3f} ({arxiv_after} picks)")
    app.close()


if __name__ == "__main__":
    main()
