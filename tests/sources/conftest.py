"""What the source tests share: an empty SQLite store of their own."""

from __future__ import annotations

import pytest

from digest.store import Store


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    yield s
    s.close()
