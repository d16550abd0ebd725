"""Shared fixtures: a real SQLite file under tmp_path, the real seeds and example subscribers."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from digest.config import Config, build_config

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
SUBSCRIBERS = ROOT / "subscribers"
DAY = date(2026, 6, 12)


@pytest.fixture
def make_config(tmp_path: Path):
    """Build settings rooted in tmp_path, with a fresh database and outbox."""

    def make(**sections: dict) -> Config:
        raw = {"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
               "ingest": {"paths": [str(SEEDS)]}}
        for name, values in sections.items():
            raw.setdefault(name, {}).update(values)
        return build_config(raw, base=tmp_path)

    return make


@pytest.fixture
def app(make_config):
    """An App over the example subscribers with the seed pages ingested on DAY."""
    from digest.pipeline import App

    application = App(make_config())
    application.ingest([SEEDS], seen_on=DAY)
    yield application
    application.close()


@pytest.fixture
def subscribers_dir(tmp_path: Path) -> Path:
    """A writable copy of the example subscribers."""
    target = tmp_path / "subscribers"
    shutil.copytree(SUBSCRIBERS, target)
    return target


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def background_papers():
    """The 300 real arXiv papers of the committed fixture, as Papers (a store's worth of term statistics)."""
    import gzip

    from digest.sources.jsonl import parse

    text = gzip.decompress((FIXTURES / "arxiv_sample_head.jsonl.gz").read_bytes()).decode()
    return list(parse(text, "fixture", seen_on=DAY).papers)
