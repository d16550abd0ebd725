"""Shared fixtures: a real SQLite file under tmp_path, the real seeds and example subscribers."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from digest.config import Config, build_config

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
SUBSCRIBERS = ROOT / "subscribers"
DAY = date(2026, 6, 12)


# The tests' SMTP servers are a lab: sends under the sample's identity go through (tests/test_launch.py unsets it).
os.environ["DIGEST_ALLOW_PLACEHOLDER"] = "1"


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a `digest` subprocess: this checkout's package (not whichever one is installed)."""
    return {"PATH": "/usr/bin:/bin", "DIGEST_SECRET": "test-secret", "PYTHONPATH": str(ROOT),
            "DIGEST_ALLOW_PLACEHOLDER": "1", **extra}


def sample_site(folder: Path, settings: str = "") -> Path:
    """A working folder as an operator sets one up: a copy of the example subscribers and a digest.toml over the
    seed pages (plus `settings`), for commands run as subprocesses."""
    subs = folder / "subscribers"
    subs.mkdir()
    for profile in SUBSCRIBERS.glob("*.toml"):
        (subs / profile.name).write_text(profile.read_text())
    # lookups of library ids never leave this machine in a test (`test_library` points them at a local server)
    offline = "" if "[libraries]" in settings else "\n[libraries]\nlookup = false\n"
    (folder / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n{settings}{offline}')
    if _MODEL_ROWS and "[store]" not in settings:  # the store the settings name, as a first run leaves it
        prime(f"sqlite:///{folder / 'digest.db'}", _MODEL_ROWS[0])
    return folder


_MODEL_ROWS: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []  # set once per session (model_rows)


@pytest.fixture(scope="session", autouse=True)
def _share_model_rows(model_rows: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """Let `sample_site` (a plain function, called by tests for their subprocesses) prime its store too."""
    _MODEL_ROWS.append(model_rows)


@pytest.fixture(scope="session")
def model_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The text model's work on the built-in sample, done once per test session as a first `digest run` does it:
    the seed papers' and example interests' embeddings (rows of the embeddings table) and the interests' profiles
    (rows of the cache table). Each test's fresh store starts with them (`prime`), so it does not embed the 197
    seed papers again; what is embedded, stored and read back is tested by tests that start cold."""
    import sqlalchemy as sa

    from digest.app import App
    from digest.store.tables import cache, embeddings

    folder = tmp_path_factory.mktemp("model-rows")
    app = App(build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
                            "ingest": {"paths": [str(SEEDS)]}}, base=folder))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        app.profiles.sync()
        with app.store.engine.connect() as conn:
            vectors = [dict(r._mapping) for r in conn.execute(sa.select(embeddings))]
            profiles = [dict(r._mapping) for r in conn.execute(sa.select(cache).where(
                cache.c.key.startswith("dense-profile/")))]
    finally:
        app.close()
    return vectors, profiles


def prime(url: str, rows: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """Make the store at `url` (if new) holding the text model's work on the built-in sample (`model_rows`)."""
    from digest.store import Store
    from digest.store.tables import cache, embeddings

    store = Store(url)
    try:
        with store.write() as conn:
            if rows[0]:
                conn.execute(embeddings.insert(), rows[0])
            if rows[1]:
                conn.execute(cache.insert(), rows[1])
    finally:
        store.close()


@pytest.fixture
def make_config(tmp_path: Path, model_rows: tuple[list[dict[str, Any]], list[dict[str, Any]]]):
    """Build settings rooted in tmp_path, with a fresh database (holding the text model's vectors of the sample)
    and outbox."""
    primed: set[str] = set()

    def make(**sections: dict) -> Config:
        # The seed pages' papers are mostly years old: the tests rank all of them as new (max_age_days 0)
        # unless they ask for the age limit (test_dating, the golden files).
        raw = {"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
               "ingest": {"paths": [str(SEEDS)]}, "select": {"max_age_days": 0}, "libraries": {"lookup": False}}
        for name, values in sections.items():
            raw.setdefault(name, {}).update(values)
        config = build_config(raw, base=tmp_path)
        url = config.store.url
        if url.startswith("sqlite:///") and url not in primed and not Path(url.removeprefix("sqlite:///")).exists():
            prime(url, model_rows)
            primed.add(url)
        return config

    return make


@pytest.fixture
def app(make_config):
    """An App over the example subscribers with the seed pages ingested on DAY."""
    from digest.app import App

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


@pytest.fixture
def smtp_app(make_config):
    """Make Apps that deliver over SMTP to 127.0.0.1:`port`, with tiny retry delays; seeds ingested on DAY."""
    from digest.app import App

    apps = []

    def make(port: int, *, ingest: bool = True, **sections: dict) -> App:
        sections["smtp"] = {"host": "127.0.0.1", "port": port, "security": "none", "timeout": 5,
                            **sections.get("smtp", {})}
        sections["delivery"] = {"transport": "smtp", "retry_delay": 0.01, **sections.get("delivery", {})}
        application = App(make_config(**sections))
        if ingest:
            application.ingest([SEEDS], seen_on=DAY)
        apps.append(application)
        return application

    yield make
    for application in apps:
        application.close()
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def background_papers():
    """The 300 real arXiv papers of the committed fixture, as Papers (a store's worth of term statistics)."""
    import gzip

    from digest.sources.jsonl import parse

    text = gzip.decompress((FIXTURES / "arxiv_sample_head.jsonl.gz").read_bytes()).decode()
    return list(parse(text, "fixture", seen_on=DAY).papers)


def _throwaway(start: Any, name: str, required_by: str) -> Iterator[Any]:
    """A server the tests start for the session; skipped where `name` is not installed, unless CI requires it."""
    import os

    try:
        server = start()
    except (FileNotFoundError, OSError) as exc:
        if os.environ.get(required_by):
            raise
        pytest.skip(f"{name} not available: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session."""
    from .pg import start

    yield from _throwaway(start, "PostgreSQL", "DIGEST_REQUIRE_POSTGRES")


@pytest.fixture(scope="session")
def dovecot():
    """A Dovecot IMAP server for the session."""
    from .imapd import start

    yield from _throwaway(start, "Dovecot", "DIGEST_REQUIRE_DOVECOT")


@pytest.fixture
def web(app):
    """`digest serve` on a free port for the test module's `app` fixture."""
    from .web_server import Server

    server = Server(app)
    yield server
    server.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path: Path) -> str:
    """A fresh database URL: a SQLite file, and a PostgreSQL database (every store test runs on both)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'digest.db'}"
    return request.getfixturevalue("postgres").new_database()


POSTGRES_PARAMS = {"postgres", "postgresql"}


@pytest.fixture(autouse=True)
def _lookups_stay_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Library lookups that a test's settings leave on ask a closed port of this machine, never the public services
    (a test that means them points `libraries.arxiv_api` and `doi_api` at a local server)."""
    monkeypatch.setattr("digest.sources.lookup.ARXIV_API", "http://127.0.0.1:9/api/query")
    monkeypatch.setattr("digest.sources.lookup.DOI_API", "http://127.0.0.1:9/works/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers a test earns from what it uses: `browser` (the Chromium fixture), `postgres` (the PostgreSQL server,
    or a sqlite/postgresql parameter set to postgresql); both are also `slow`. Slow tests say so themselves."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "browser" in names:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
        if "postgres" in names or any(isinstance(v, str) and v in POSTGRES_PARAMS for v in params.values()):
            item.add_marker(pytest.mark.postgres)
            item.add_marker(pytest.mark.slow)
