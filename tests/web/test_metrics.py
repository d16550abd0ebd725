"""`/metrics`: Prometheus' text format read from the store, right across processes and workers, behind a login."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from digest.app import App
from digest.config import load_config
from digest.store.tables import deliveries

from ..conftest import _MODEL_ROWS, SEEDS, cli_env, prime
from ..smtpd import Recorder, smtp_server
from ..web_server import OPERATOR, Server

DATE = "2026-06-12"
READERS = 80
IDENTITY = ('[newsletter]\nfrom_address = "digest@paperdigest-lab.net"\nbase_url = "https://paperdigest-lab.net"\n'
            'postal_address = "Paper Digest Lab, 2 Main Road, Oxford"\n')  # not the sample's: an SMTP send refuses it


def scrape(server: Server, **auth: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, by (name, sorted labels), parsed with prometheus_client's own parser."""
    response = server.client.get("/metrics", **auth or {"auth": OPERATOR})  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def matching(samples: dict, name: str, **labels: str) -> dict[tuple, float]:
    return {key: v for key, v in samples.items() if key[0] == name and set(labels.items()) <= set(key[1])}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """READERS trending-digest profiles (one address each, due and never empty) with the seeds ingested, on SQLite."""
    (tmp_path / "subscribers").mkdir()
    profiles = {tmp_path / f"subscribers/r{i:03}.toml": f'email = "reader{i}@example.org"\n' for i in range(READERS)}
    for path, text in profiles.items():
        path.write_text(text)
    (tmp_path / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n')
    prime(f"sqlite:///{tmp_path / 'digest.db'}", _MODEL_ROWS[0])
    with contextlib.closing(App(load_config(tmp_path / "digest.toml"))) as app:
        app.ingest([SEEDS], seen_on=date.fromisoformat(DATE))
    return tmp_path


@pytest.mark.slow
def test_scraped_during_a_send_with_two_workers_the_numbers_follow_the_send_log(site):
    """Scraped while `digest send --workers 2` runs in other processes: sent only grows; afterwards sent, the
    workers' progress and the queue agree with the send log and the SMTP server, and the send is no run of the log."""
    server = Recorder(on_message=lambda _message: time.sleep(0.015))  # the send takes a second or so
    with smtp_server(server) as port:
        (site / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n[delivery]\ntransport = "smtp"\n'
                                          f'batch_size = 10\n[smtp]\nhost = "127.0.0.1"\nport = {port}\n'
                                          f'security = "none"\n{IDENTITY}')
        app = App(load_config(site / "digest.toml"))
        web = Server(app)
        try:
            send = subprocess.Popen([sys.executable, "-m", "digest", "send", "--date", DATE, "--workers", "2"],
                                    cwd=site, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=cli_env())
            seen = []
            while send.poll() is None:
                seen.append(value(scrape(web), "digest_digests", date=DATE, state="sent"))
                time.sleep(0.05)
            out, err = send.communicate()
            assert send.returncode == 0, err
            after = scrape(web)
        finally:
            web.close()
    with app.store.engine.connect() as conn:
        sent_in_log = conn.execute(sa.select(sa.func.count()).select_from(deliveries)
                                   .where(deliveries.c.status == "sent")).scalar_one()
    app.close()
    assert seen == sorted(seen) and any(0 < n < READERS for n in seen), seen  # scraped mid-send, never falling
    assert value(after, "digest_digests", date=DATE, state="sent") == sent_in_log == len(server.messages) == READERS
    assert value(after, "digest_digests", date=DATE, state="failed") == 0
    assert all(v == 0 for v in matching(after, "digest_queue_depth").values())
    workers = {key: v for key, v in matching(after, "digest_worker_sent").items() if ("command", "send") in key[1]}
    assert sum(workers.values()) == READERS
    assert len([v for v in workers.values() if v]) >= 2  # two worker processes shared the send
    assert all(v == 0 for v in matching(after, "digest_worker_running").values())
    # a manual `digest send` is not a run of the run log (`run`, `fetch`, the scheduler's sends): its workers show
    # above, and the age of the last successful run is not reset by it (a stalled cron still shows)
    assert not matching(after, "digest_last_success_age_seconds", command="send")
    assert value(after, "digest_send_rate_per_second") == pytest.approx(READERS / 300)


def test_metrics_need_the_operator_password_or_the_token(app, monkeypatch):
    """No credentials, a wrong password or a wrong token: 401 and no numbers; the password or the bearer token
    from $DIGEST_METRICS_TOKEN: the metrics."""
    monkeypatch.setenv("DIGEST_METRICS_TOKEN", "scrape-token-for-tests")
    server = Server(app)
    try:
        for auth in ({}, {"auth": ("operator", "wrong")}, {"headers": {"Authorization": "Bearer wrong"}},
                     {"headers": {"Authorization": "Bearer scrape-token-for-tests-and-more"}}):
            response = server.client.get("/metrics", **auth)  # type: ignore[arg-type]
            assert response.status_code == 401 and "digest_" not in response.text, auth
        assert matching(scrape(server), "digest_digests") == {}  # nothing sent yet
        by_token = scrape(server, headers={"Authorization": "Bearer scrape-token-for-tests"})
        assert value(by_token, "digest_queue_depth", state="queued") == 0
    finally:
        server.close()


def test_without_a_token_setting_only_the_password_opens_metrics(app, monkeypatch):
    """With an empty token in the environment, no bearer header opens anything (an empty token is no token)."""
    monkeypatch.setenv("DIGEST_METRICS_TOKEN", "")
    server = Server(app)
    try:
        for header in ("Bearer x", "Bearer"):
            assert server.client.get("/metrics", headers={"Authorization": header}).status_code == 401
        assert httpx.get(f"{server.base}/metrics", auth=OPERATOR).status_code == 200
    finally:
        server.close()
