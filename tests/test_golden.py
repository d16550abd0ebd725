"""Golden files: the real program's HTML and text for one subscriber, reviewed as diffs.

Regenerate after an intended change: UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from digest.app import App
from digest.config import SETTINGS

from .conftest import DAY, SEEDS

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture
def composed(make_config, monkeypatch):
    """Ada's digest for DAY from the seed pages, with a fixed link-signing key and the default age limit."""
    monkeypatch.setenv("DIGEST_SECRET", "golden-secret")
    default = next(s for s in SETTINGS if s.name == "select.max_age_days").default
    app = App(make_config(select={"max_age_days": default}))
    app.ingest([SEEDS], seen_on=DAY)
    result = app.composer.compose(app.profiles.roster().find("ada@example.org"), DAY, app.composer.pool(DAY))
    app.close()
    return result


@pytest.mark.slow
@pytest.mark.parametrize("name, part", [("ada.html", "html"), ("ada.txt", "text"), ("ada.subject", "subject")])
def test_matches_golden(composed, name, part):
    """The rendered part equals its golden file byte for byte."""
    actual = getattr(composed.rendered, part)
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"missing {path}: run UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py"
    assert actual == path.read_text(encoding="utf-8"), f"{name} changed: regenerate and review the diff"
