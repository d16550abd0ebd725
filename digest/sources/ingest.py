"""Ingest: the papers of files and folders (any format `sources` reads) merged into the store, then analysed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from digest import sources
from digest.errors import UsageError
from digest.models import Paper, RecordError
from digest.select.analysis import Analysis
from digest.store import Store


@dataclass
class IngestReport:
    """What an ingest read and what it changed."""

    files: int = 0
    records: int = 0
    distinct: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    errors: list[RecordError] = field(default_factory=list)

    def summary(self) -> str:
        return (f"ingested {self.records} records from {self.files} files: {self.distinct} distinct papers "
                f"({self.new} new, {self.updated} updated, {self.unchanged} unchanged), "
                f"{len(self.errors)} errors")


class Ingest:
    """`digest ingest`: the papers of files and folders merged into a store, then analysed once (`Analysis`)."""

    def __init__(self, store: Store, analysis: Analysis) -> None:
        self.store, self.analysis = store, analysis

    def __call__(self, paths: Sequence[Path], *, seen_on: date) -> IngestReport:
        """Parse every file under `paths`, merge its papers into the store, and analyse them."""
        report = IngestReport()
        files = sources.iter_paths(list(paths))
        if not files:
            raise UsageError(f"no input files found in {', '.join(map(str, paths))}")
        papers = []
        for path in files:
            try:
                result = sources.vet(sources.parse_file(path, seen_on=seen_on), str(path))
            except sources.SourceError as exc:
                report.errors.append(RecordError(str(path), None, exc.reason))
                continue
            report.files += 1
            report.records += len(result.papers)
            report.errors.extend(result.errors)
            papers.extend(result.papers)
        counts = self.store.add_papers(papers, seen_on=seen_on)
        report.distinct, report.new = counts.distinct, counts.new
        report.updated, report.unchanged = counts.updated, counts.unchanged
        self.analysis.papers(papers)
        return report


def read_papers(path: Path, day: date) -> tuple[list[Paper], list[RecordError]]:
    """The papers of one file (any format `ingest` reads), without storing them."""
    try:
        result = sources.vet(sources.parse_file(path, seen_on=day), str(path))
    except sources.SourceError as exc:
        raise UsageError(str(exc)) from exc
    return list(result.papers), list(result.errors)
