"""How often the papers of each "Why" strength were on topic: bench/ranking.py's protocol, hybrid only, by band.

    .venv/bin/python bench/why_bands.py [ranking.py's options, e.g. --set R --pools 6]

The strength words (`digest.select.explain.strength`) read the calibrated relevance: "possible match" from
the floor (0.5) to GOOD_MATCH, "good match" to STRONG_MATCH, "strong match" above. This runs the relevance
benchmark (`bench/ranking.py`: arXiv categories as ground truth, pools of 300 papers with 30 of the category)
with those levels and prints, per band, how many papers every pool's relevance put there and the share of
them that arXiv lists in the category, pooled and per style of interest.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import ranking  # noqa: E402

from digest.select.explain import GOOD_MATCH, STRONG_MATCH  # noqa: E402

BANDS = ("possible match", "good match", "strong match")


def report(results: Any, anchors: Any, min_relevance: float) -> None:
    """ranking.py's report, then the papers and precision of each band."""
    ranking_report(results, anchors, min_relevance)
    print("\n| style | " + " | ".join(f"{band}: on topic (papers)" for band in BANDS) + " |")
    print("|---|" + "---:|" * len(BANDS))
    for style, counts in [*results.floor.items(), ("pooled", sum(results.floor.values()))]:
        cells = []
        for n in range(len(BANDS)):
            passed, hits = counts[n][0] - counts[n + 1][0], counts[n][1] - counts[n + 1][1]
            cells.append(f"{hits / max(passed, 1):.2f} ({passed:.0f})")
        print(f"| {style} | " + " | ".join(cells) + " |")


ranking_report = ranking.report
ranking.FLOOR_LEVELS = (0.5, GOOD_MATCH, STRONG_MATCH, 1.01)  # (1.01: nothing is above, so the last band is closed)
ranking.report = report

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "--methods", "hybrid", *sys.argv[1:]]
    ranking.main()
