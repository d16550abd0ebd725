"""One curated topic from a paper list: the arXiv ids a list cites that the arXiv sample holds, as a topics.json entry.

    .venv/bin/python bench/topics/extract.py --topic "Speculative decoding" --repo OWNER/NAME --path README.md \
        --commit SHA [--data SAMPLE] [--append bench/topics/topics.json] LIST_FILE

LIST_FILE is the list's text (a README, a YAML or BibTeX file) as read from the repository at that commit; the script
reads no network. Ids are every `arxiv.org/abs|pdf|html/NNNN.NNNNN` the text cites (versions dropped), kept when the
sample has them. It prints the entry with its counts (in the sample, listed on or after ranking.RESERVED_BEFORE) and,
with --append, adds it to (or replaces it in) a topics file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
from datetime import date
from pathlib import Path

ARXIV_LINK = re.compile(r"arxiv\.org/(?:abs|pdf|html)/(\d{4}\.\d{4,5})", re.IGNORECASE)
RESERVED_BEFORE = date(2025, 6, 1)  # as bench/ranking.py: earlier papers are background data, never in a pool


def cited_ids(text: str) -> list[str]:
    """The new-style arXiv ids a text links to, in order of first mention."""
    return list(dict.fromkeys(ARXIV_LINK.findall(text)))


def sample_listing_dates(path: str) -> dict[str, str]:
    """arXiv id → listing date (ISO) of every paper of the sample."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return {row["id"]: row.get("listing_date", "") for row in map(json.loads, lines)}


def entry(topic: str, repo: str, path: str, commit: str, text: str, listed: dict[str, str]) -> dict[str, object]:
    ids = [i for i in cited_ids(text) if i in listed]
    return {"topic": topic, "source": {"repo": repo, "path": path, "commit": commit}, "arxiv_ids": ids}


def append(file: Path, new: dict[str, object]) -> None:
    topics = json.loads(file.read_text()) if file.exists() else []
    topics = [t for t in topics if t["topic"] != new["topic"]] + [new]
    file.write_text(json.dumps(topics, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("list_file")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--data", default=os.environ.get("DIGEST_ARXIV_SAMPLE", ""),
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--append", type=Path, help="a topics file to add the entry to")
    args = parser.parse_args()
    listed = sample_listing_dates(args.data)
    text = Path(args.list_file).read_text(encoding="utf-8", errors="replace")
    new = entry(args.topic, args.repo, args.path, args.commit, text, listed)
    ids: list[str] = new["arxiv_ids"]  # type: ignore[assignment]
    late = sum(listed[i] >= RESERVED_BEFORE.isoformat() for i in ids)
    print(f"{args.topic}: {len(cited_ids(text))} ids cited, {len(ids)} in the sample, {late} listed on or after "
          f"{RESERVED_BEFORE}")
    if args.append:
        append(args.append, new)


if __name__ == "__main__":
    main()
